/*
 * The MPI module's loader: the part of the MPI module that is in every process
 * (libperfweave.so), so that the wrappers that match the MPI library a process
 * really uses are chosen inside that process, at its first MPI call.
 *
 * Why not choose them before the launch: the launcher cannot know. A task may be a
 * wrapper script that execs the program, `env`, `numactl`, a Python interpreter that
 * loads mpi4py, and `ldd` of the command line's program says nothing about any of
 * them. So the preloaded core defines every symbol the MPI module wraps (the list
 * gen_wrappers.py writes, pw_mpi_symbols.h) as a two-instruction stub that jumps
 * through a slot. Every slot starts at a resolver; the first call of any stub binds
 * them all, once:
 *
 *   - the MPI library is the one that defines MPI_Init after this object in the
 *     global scope (the program's), or any loaded object named like an MPI library
 *     (a Python extension loaded it with RTLD_LOCAL);
 *   - its MPI_Get_library_version names the family (Open MPI, or the MPICH ABI of
 *     MPICH, Intel MPI, MVAPICH and Cray MPICH); PERFWEAVE_MPI (perfweave run --mpi)
 *     names a runtime build instead;
 *   - libperfweave-mpi-FLAVOR.so next to this library is loaded (RTLD_LOCAL: it
 *     interposes nothing by itself) and each slot takes its wrapper from its
 *     pw_mpi_wrapper_table; where no build fits, or the runtime is inactive in this
 *     process, each slot takes the real function at its first call and the program
 *     runs as without us.
 *
 * A stub is a jump, not a call: it leaves no frame, and the arguments, the vararg
 * register count and the return address reach the wrapper or the real function
 * untouched, whatever the signature.
 *
 * What the core exports must not tell the program more than its MPI does: a library
 * that looks MPI_File_read_c up (dlsym(RTLD_DEFAULT, ...), to learn whether its MPI is
 * MPI-4) must not find it under Open MPI 4.1, nor a process without MPI find MPI_Init.
 * So the core's constructor makes each stub's symbol an indirect function (IFUNC) in the
 * core's own dynamic symbol table: every later look-up (dlsym, a lazy binding, the
 * relocation of an object dlopened later) asks its resolver, which answers the stub
 * when a loaded MPI library defines the symbol and NULL (absent) otherwise. Not at link
 * time: the dynamic linker relocates the program's libraries (libmpich) before the
 * preloaded core, and binding one of them to an IFUNC of a core not yet relocated prints
 * "Relink ... for IFUNC symbol" under BIND_NOW; those start-up bindings take the plain
 * stubs, as before, and the weak references among them that the MPI cannot satisfy are
 * set to NULL afterwards, as the dynamic linker would have without the core.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elfsym.h"
#include "modules/mpi_loader.h"
#include "pw.h"
#include "pw_mpi_symbols.h"

#define PW_HIDDEN __attribute__((visibility("hidden")))

void pw_mpi_lazy(void) PW_HIDDEN; /* assembly below: save arguments, bind, jump */
void *pw_mpi_bind(long i) PW_HIDDEN;
void *pw_mpi_resolve(long i) PW_HIDDEN; /* the IFUNC resolvers' (assembly below) */
void *pw_mpi_slots[PW_MPI_NSYMBOLS] PW_HIDDEN = {[0 ... PW_MPI_NSYMBOLS - 1] = (void *)pw_mpi_lazy};

#define PW_NAME_ENTRY(i, name) #name,
static const char *const symbol_names[PW_MPI_NSYMBOLS] = {PW_MPI_SYMBOLS(PW_NAME_ENTRY)};

/* ---- the stubs ---- */
#define PW_STR(x) #x
#if defined(__x86_64__)
/* r11: scratch, never an argument register; it carries the stub's number to the
 * resolver. endbr64: a stub is reached through the PLT's indirect jump (a no-op
 * where indirect-branch tracking is off). */
#define PW_STUB(i, name)                                                                           \
    __asm__(".text\n.globl " #name "\n.type " #name ",@function\n.p2align 4\n" #name ":\n"         \
            "\tendbr64\n\tmovl $" #i ",%r11d\n\tjmp *pw_mpi_slots+8*" #i "(%rip)\n.size " #name    \
            ",.-" #name "\n");
PW_MPI_SYMBOLS(PW_STUB)
/* The IFUNC resolver of stub i: pw_mpi_resolve(i) */
#define PW_RESOLVER(i, name)                                                                       \
    __asm__(".text\n.globl pw_mpi_ifunc_" #i "\n.hidden pw_mpi_ifunc_" #i                          \
            "\n.type pw_mpi_ifunc_" #i ",@function\npw_mpi_ifunc_" #i ":\n"                        \
            "\tendbr64\n\tmovl $" #i ",%edi\n\tjmp pw_mpi_resolve\n");
PW_MPI_SYMBOLS(PW_RESOLVER)
/* Saves every register that may carry an argument (integer, vector, al for
 * varargs, r10 for a static chain), binds, restores them and jumps on. */
__asm__(".text\n.globl pw_mpi_lazy\n.hidden pw_mpi_lazy\n.type pw_mpi_lazy,@function\n"
        "pw_mpi_lazy:\n"
        "\tendbr64\n\tpushq %rbp\n\tmovq %rsp,%rbp\n\tsubq $192,%rsp\n"
        "\tmovaps %xmm0,0(%rsp)\n\tmovaps %xmm1,16(%rsp)\n\tmovaps %xmm2,32(%rsp)\n"
        "\tmovaps %xmm3,48(%rsp)\n\tmovaps %xmm4,64(%rsp)\n\tmovaps %xmm5,80(%rsp)\n"
        "\tmovaps %xmm6,96(%rsp)\n\tmovaps %xmm7,112(%rsp)\n"
        "\tmovq %rdi,128(%rsp)\n\tmovq %rsi,136(%rsp)\n\tmovq %rdx,144(%rsp)\n"
        "\tmovq %rcx,152(%rsp)\n\tmovq %r8,160(%rsp)\n\tmovq %r9,168(%rsp)\n"
        "\tmovq %rax,176(%rsp)\n\tmovq %r10,184(%rsp)\n"
        "\tmovq %r11,%rdi\n\tcall pw_mpi_bind\n\tmovq %rax,%r11\n"
        "\tmovaps 0(%rsp),%xmm0\n\tmovaps 16(%rsp),%xmm1\n\tmovaps 32(%rsp),%xmm2\n"
        "\tmovaps 48(%rsp),%xmm3\n\tmovaps 64(%rsp),%xmm4\n\tmovaps 80(%rsp),%xmm5\n"
        "\tmovaps 96(%rsp),%xmm6\n\tmovaps 112(%rsp),%xmm7\n"
        "\tmovq 128(%rsp),%rdi\n\tmovq 136(%rsp),%rsi\n\tmovq 144(%rsp),%rdx\n"
        "\tmovq 152(%rsp),%rcx\n\tmovq 160(%rsp),%r8\n\tmovq 168(%rsp),%r9\n"
        "\tmovq 176(%rsp),%rax\n\tmovq 184(%rsp),%r10\n"
        "\tleave\n\tjmp *%r11\n.size pw_mpi_lazy,.-pw_mpi_lazy\n");
#elif defined(__aarch64__)
/* x16/x17 (IP0/IP1): free at a function's entry; x17 carries the stub's number */
#define PW_STUB(i, name)                                                                           \
    __asm__(".text\n.globl " #name "\n.type " #name ",%function\n.p2align 4\n" #name ":\n"         \
            "\tadrp x16, pw_mpi_slots+8*" #i "\n"                                                  \
            "\tldr x16, [x16, #:lo12:pw_mpi_slots+8*" #i "]\n"                                     \
            "\tmov x17, #" #i "\n\tbr x16\n.size " #name ",.-" #name "\n");
PW_MPI_SYMBOLS(PW_STUB)
#define PW_RESOLVER(i, name)                                                                       \
    __asm__(".text\n.globl pw_mpi_ifunc_" #i "\n.hidden pw_mpi_ifunc_" #i                          \
            "\n.type pw_mpi_ifunc_" #i ",%function\npw_mpi_ifunc_" #i ":\n"                        \
            "\tmov x0, #" #i "\n\tb pw_mpi_resolve\n");
PW_MPI_SYMBOLS(PW_RESOLVER)
/* x0-x7 and x8 (indirect result), q0-q7 */
__asm__(".text\n.globl pw_mpi_lazy\n.hidden pw_mpi_lazy\n.type pw_mpi_lazy,%function\n"
        "pw_mpi_lazy:\n"
        "\tstp x29, x30, [sp, #-224]!\n\tmov x29, sp\n"
        "\tstp x0, x1, [sp, #16]\n\tstp x2, x3, [sp, #32]\n\tstp x4, x5, [sp, #48]\n"
        "\tstp x6, x7, [sp, #64]\n\tstr x8, [sp, #80]\n"
        "\tstp q0, q1, [sp, #96]\n\tstp q2, q3, [sp, #128]\n\tstp q4, q5, [sp, #160]\n"
        "\tstp q6, q7, [sp, #192]\n"
        "\tmov x0, x17\n\tbl pw_mpi_bind\n\tmov x16, x0\n"
        "\tldp x0, x1, [sp, #16]\n\tldp x2, x3, [sp, #32]\n\tldp x4, x5, [sp, #48]\n"
        "\tldp x6, x7, [sp, #64]\n\tldr x8, [sp, #80]\n"
        "\tldp q0, q1, [sp, #96]\n\tldp q2, q3, [sp, #128]\n\tldp q4, q5, [sp, #160]\n"
        "\tldp q6, q7, [sp, #192]\n"
        "\tldp x29, x30, [sp], #224\n\tbr x16\n.size pw_mpi_lazy,.-pw_mpi_lazy\n");
#else
#error "perfweave: the MPI dispatch stubs are written for x86_64 and aarch64"
#endif

/* ---- finding the MPI library ---- */

static int mpi_library_name(const char *n)
{
    return n && (strstr(n, "/libmpi.so") || strstr(n, "/libmpich.so") || strstr(n, "/libmpi_") ||
                 strstr(n, "/libmpichfort.so") || strstr(n, "/libmpifort.so"));
}

void *pw_mpi_next(const char *name)
{
    /* the next definition after this object: the MPI library's (also loaded RTLD_LOCAL,
     * by a Python extension), or a tool's preloaded after perfweave */
    return pw_next_symbol(name);
}

/* The ABI family of the MPI library this process uses, from its own words. */
static const char *mpi_family(void)
{
    int (*version)(char *, int *) = (int (*)(char *, int *))pw_mpi_next("MPI_Get_library_version");
    static char text[16384];
    int len = 0;
    if (version && version(text, &len) == 0 && len > 0 && len < (int)sizeof text) {
        text[len] = 0;
        if (strstr(text, "Open MPI"))
            return "openmpi";
        if (strstr(text, "MPICH") || strstr(text, "MVAPICH") || strstr(text, "Intel(R) MPI"))
            return "mpich";
    }
    /* an MPI-2 library: by the name of the object that defines MPI_Init */
    Dl_info info;
    void *init = pw_mpi_next("MPI_Init");
    if (init && dladdr(init, &info) && info.dli_fname) {
        if (strstr(info.dli_fname, "libmpi.so.4"))
            return "openmpi";
        if (strstr(info.dli_fname, "libmpich") || strstr(info.dli_fname, "libmpi.so.12"))
            return "mpich";
    }
    return NULL;
}

/* libperfweave-mpi-FLAVOR.so in the directory of this library */
static void *load_flavor(const char *flavor)
{
    Dl_info info;
    char path[4096];
    if (!dladdr((void *)pw_mpi_bind, &info) || !info.dli_fname)
        return NULL;
    const char *slash = strrchr(info.dli_fname, '/');
    size_t dir = slash ? (size_t)(slash - info.dli_fname) + 1 : 0;
    if (dir + strlen(flavor) + 32 >= sizeof path)
        return NULL;
    memcpy(path, info.dli_fname, dir);
    strcpy(path + dir, "libperfweave-mpi-");
    strcat(path, flavor);
    strcat(path, ".so");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        pw_log("cannot load the %s runtime (%s); MPI calls are not recorded in pid %d", flavor,
               why ? why : path, (int)getpid());
    }
    return h;
}

/* ---- what the core exports: only what the process's MPI has (see the top) ---- */

static void *stub_addr[PW_MPI_NSYMBOLS]; /* each stub's code, from the symbol table */
static char present[PW_MPI_NSYMBOLS];    /* a loaded MPI defines it: for good */

#define PW_RESOLVER_DECL(i, name) void pw_mpi_ifunc_##i(void) PW_HIDDEN;
PW_MPI_SYMBOLS(PW_RESOLVER_DECL)
#define PW_RESOLVER_ENTRY(i, name) pw_mpi_ifunc_##i,
static void (*const resolvers[PW_MPI_NSYMBOLS])(void) = {PW_MPI_SYMBOLS(PW_RESOLVER_ENTRY)};

static int mpi_defines(long i)
{
    if (__atomic_load_n(&present[i], __ATOMIC_RELAXED))
        return 1;
    /* from the objects' memory: a resolver runs inside the dlsym that asked */
    int yes = pw_next_defines(symbol_names[i]);
    if (yes)
        __atomic_store_n(&present[i], 1, __ATOMIC_RELAXED);
    return yes;
}

void *pw_mpi_resolve(long i) { return mpi_defines(i) ? stub_addr[i] : NULL; }

static int find_self(struct dl_phdr_info *info, size_t size, void *t)
{
    (void)size;
    return info->dlpi_addr == ((pw_elf *)t)->base && pw_elf_read(info, t);
}

/* page-aligned span [lo, hi) made writable, then back to prot */
static int reprotect(uintptr_t lo, uintptr_t hi, int prot)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    lo &= ~(page - 1);
    return mprotect((void *)lo, (hi + page - 1) / page * page - lo, prot);
}

/* A weak reference of an object loaded with the program, bound to a stub at start-up
 * (its relocation came before this constructor), of a symbol no loaded MPI defines: NULL,
 * as the dynamic linker had made it without the core. */
static int unbind_weak(struct dl_phdr_info *info, size_t size, void *self)
{
    (void)size;
    pw_elf t;
    if (info->dlpi_addr == ((pw_elf *)self)->base || !pw_elf_read(info, &t))
        return 0;
    for (int part = 0; part < 2; part++) {
        const ElfW(Rela) *r = part ? t.jmprel : t.rela;
        size_t n = part ? t.njmprel : t.nrela;
        for (size_t k = 0; r && k < n; k++) {
            unsigned type = (unsigned)ELF64_R_TYPE(r[k].r_info);
#if defined(__x86_64__)
            if (type != R_X86_64_GLOB_DAT && type != R_X86_64_64)
                continue;
#else
            if (type != R_AARCH64_GLOB_DAT && type != R_AARCH64_ABS64)
                continue;
#endif
            const ElfW(Sym) *ref = &t.sym[ELF64_R_SYM(r[k].r_info)];
            if (ref->st_shndx != SHN_UNDEF || ELF64_ST_BIND(ref->st_info) != STB_WEAK)
                continue;
            void **slot = (void **)(t.base + r[k].r_offset);
            for (long i = 0; i < PW_MPI_NSYMBOLS; i++) {
                if (*slot != (char *)stub_addr[i] + r[k].r_addend ||
                    strcmp(t.str + ref->st_name, symbol_names[i]) || mpi_defines(i))
                    continue;
                uintptr_t at = (uintptr_t)slot;
                int ro = at >= t.relro && at < t.relro_end;
                if (!ro || reprotect(at, at + sizeof *slot, PROT_READ | PROT_WRITE) == 0) {
                    *slot = NULL;
                    if (ro)
                        reprotect(at, at + sizeof *slot, PROT_READ);
                }
                break;
            }
        }
    }
    return 0;
}

static int mpi_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    return mpi_library_name(info->dlpi_name);
}

/* Before main, while the program makes no look-up of its own (see the top). With an MPI
 * library loaded with the program, the stubs of what it lacks leave the symbol table (a
 * symbol of value 0 is no definition to the dynamic linker: a look-up fails as without
 * the core, with its dlerror), the others stay; without one yet (a process without MPI,
 * an interpreter that may dlopen one), each stub's symbol becomes an IFUNC whose
 * resolver asks the MPI loaded by then. An entry changes in two stores, so no other
 * thread may look an MPI symbol up meanwhile. */
__attribute__((constructor(101))) static void pw_mpi_export_what_mpi_has(void)
{
    pw_elf self = {.base = pw_core_base()};
    if (!self.base || !dl_iterate_phdr(find_self, &self))
        return;
    ElfW(Sym) * e[PW_MPI_NSYMBOLS];
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < PW_MPI_NSYMBOLS; i++) {
        e[i] = pw_elf_entry(&self, symbol_names[i]);
        if (!e[i] || ELF64_ST_TYPE(e[i]->st_info) != STT_FUNC)
            return;
        stub_addr[i] = (void *)(self.base + e[i]->st_value);
        lo = (uintptr_t)e[i] < lo ? (uintptr_t)e[i] : lo;
        hi = (uintptr_t)(e[i] + 1) > hi ? (uintptr_t)(e[i] + 1) : hi;
    }
    int known = dl_iterate_phdr(mpi_loaded, NULL);
    if (known) { /* what the objects after the core define, each read once */
        static pw_elf after[512];
        int n = pw_objects_after_core(after, 512);
        for (int i = 0; i < PW_MPI_NSYMBOLS; i++) {
            uint32_t h = pw_elf_hash(symbol_names[i]);
            for (int k = 0; k < n && !present[i]; k++)
                present[i] = pw_elf_defined(&after[k], symbol_names[i], h) != NULL;
        }
    }
    if (reprotect(lo, hi, PROT_READ | PROT_WRITE) != 0) {
        pw_debug("the MPI symbols stay exported in every process (mprotect refused)");
        return;
    }
    for (int i = 0; i < PW_MPI_NSYMBOLS; i++) {
        if (known && !present[i]) {
            e[i]->st_value = 0;
        } else if (!known) {
            e[i]->st_value = (uintptr_t)resolvers[i] - self.base;
            e[i]->st_info = ELF64_ST_INFO(ELF64_ST_BIND(e[i]->st_info), STT_GNU_IFUNC);
        }
    }
    reprotect(lo, hi, PROT_READ);
    dl_iterate_phdr(unbind_weak, &self);
}

/* ---- binding ---- */

static pthread_once_t bound = PTHREAD_ONCE_INIT;
static PW_TLS int binding; /* this thread is binding: calls go straight through */

static void bind_all(void)
{
    binding = 1;
    const char *flavor =
        pw_opt.mpi && *pw_opt.mpi && strcmp(pw_opt.mpi, "auto") ? pw_opt.mpi : NULL;
    if (!pw_active || (flavor && !strcmp(flavor, "none"))) {
        binding = 0;
        return;
    }
    if (!flavor)
        flavor = mpi_family();
    if (!flavor) {
        pw_log("pid %d calls MPI, but its MPI library is not one perfweave knows "
               "(Open MPI or MPICH ABI); MPI calls are not recorded (perfweave run --mpi "
               "names a runtime build)",
               (int)getpid());
        binding = 0;
        return;
    }
    void *h = load_flavor(flavor);
    void *const *table = h ? (void *const *)dlsym(h, "pw_mpi_wrapper_table") : NULL;
    if (table) {
        for (int i = 0; i < PW_MPI_NSYMBOLS; i++)
            if (table[i]) /* empty: a function this MPI's mpi.h lacks (MPI-4), called as is */
                __atomic_store_n(&pw_mpi_slots[i], table[i], __ATOMIC_RELEASE);
        pw_debug("pid %d: MPI wrappers of the %s runtime", (int)getpid(), flavor);
    }
    binding = 0;
}

void *pw_mpi_bind(long i)
{
    if (binding) /* an MPI call made while binding (by the MPI library itself) */
        return pw_mpi_next(symbol_names[i]);
    pthread_once(&bound, bind_all);
    void *p = __atomic_load_n(&pw_mpi_slots[i], __ATOMIC_ACQUIRE);
    if (p != (void *)pw_mpi_lazy)
        return p;
    /* no wrapper for it here (no build fits, inactive, --mpi none): the real function,
     * looked up at its own first call rather than all 842 at the first MPI call */
    p = pw_mpi_next(symbol_names[i]);
    if (!p) {
        pw_log("pid %d called %s, which no loaded MPI library defines", (int)getpid(),
               symbol_names[i]);
        abort();
    }
    __atomic_store_n(&pw_mpi_slots[i], p, __ATOMIC_RELEASE);
    return p;
}

/* The MPI module in the list: nothing to start (the first MPI call binds, above), and
 * its dump and fork handler are the loaded flavour's own (pw_register_module from its
 * constructor). */
const pw_module pw_module_mpi = {
    .name = "mpi",
    .version = PW_PROFILE_VERSION,
};
