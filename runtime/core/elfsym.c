/*
 * Loaded objects' dynamic symbols, read from their memory (elfsym.h). A wrapper finds
 * its real function here, not with dlsym(RTLD_NEXT): every dlsym frees the message a
 * failed dlopen left for dlerror(), and the string dlerror() already returned, so a
 * program's `fprintf(stderr, "%s\n", dlerror())` printed freed memory when that fprintf
 * was the wrapper's first call. dl_iterate_phdr and dladdr leave that state alone.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfsym.h"

int pw_elf_read(const struct dl_phdr_info *info, pw_elf *t)
{
    memset(t, 0, sizeof *t);
    t->base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(t->base + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) {
            t->relro = t->base + ph->p_vaddr;
            t->relro_end = t->relro + ph->p_memsz;
        }
    }
    if (!dyn)
        return 0;
    int plt_rela = 0;
    size_t pltsz = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        /* the dynamic linker made the addresses absolute where the section is writable */
        uintptr_t p = dyn->d_un.d_ptr < t->base ? dyn->d_un.d_ptr + t->base : dyn->d_un.d_ptr;
        switch (dyn->d_tag) {
        case DT_SYMTAB:
            t->sym = (ElfW(Sym) *)p;
            break;
        case DT_STRTAB:
            t->str = (const char *)p;
            break;
        case DT_GNU_HASH:
            t->gnu = (const uint32_t *)p;
            break;
        case DT_HASH:
            t->sysv = (const uint32_t *)p;
            break;
        case DT_VERSYM:
            t->versym = (const ElfW(Half) *)p;
            break;
        case DT_RELA:
            t->rela = (const ElfW(Rela) *)p;
            break;
        case DT_RELASZ:
            t->nrela = dyn->d_un.d_val / sizeof(ElfW(Rela));
            break;
        case DT_JMPREL:
            t->jmprel = (const ElfW(Rela) *)p;
            break;
        case DT_PLTRELSZ:
            pltsz = dyn->d_un.d_val;
            break;
        case DT_PLTREL:
            plt_rela = dyn->d_un.d_val == DT_RELA;
            break;
        }
    }
    t->njmprel = plt_rela ? pltsz / sizeof(ElfW(Rela)) : 0;
    return t->sym && t->str && (t->gnu || t->sysv);
}

/* A match of name at i: 1 of the default version (or unversioned), 2 of another one. */
static int match(const pw_elf *t, uint32_t i, const char *name)
{
    if (strcmp(t->str + t->sym[i].st_name, name))
        return 0;
    return t->versym && (t->versym[i] & 0x8000) ? 2 : 1;
}

/* The dynamic linker takes, for a name looked up without a version, the default one, or
 * a non-default one when it is the object's only version of it (__xstat of glibc >=
 * 2.33: its compat version alone). */
static ElfW(Sym) *
    take(const pw_elf *t, uint32_t i, const char *name, ElfW(Sym) * *other, int *others)
{
    int m = match(t, i, name);
    if (m == 1)
        return &t->sym[i];
    if (m == 2 && (*others)++ == 0)
        *other = &t->sym[i];
    return NULL;
}

uint32_t pw_elf_hash(const char *name)
{
    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = h * 33 + *c;
    return h;
}

ElfW(Sym) * pw_elf_entry(const pw_elf *t, const char *name)
{
    return pw_elf_entry_hashed(t, name, pw_elf_hash(name));
}

ElfW(Sym) * pw_elf_entry_hashed(const pw_elf *t, const char *name, uint32_t h)
{
    ElfW(Sym) *other = NULL, *s = NULL;
    int others = 0;
    if (t->gnu) { /* the GNU hash table: a Bloom filter, buckets, then chains of hashes */
        uint32_t nb = t->gnu[0], off = t->gnu[1], nbloom = t->gnu[2], shift = t->gnu[3];
        const ElfW(Addr) *bloom = (const ElfW(Addr) *)(t->gnu + 4);
        const unsigned bits = sizeof(ElfW(Addr)) * 8;
        ElfW(Addr) word = nbloom ? bloom[(h / bits) % nbloom] : 0;
        if (!((word >> (h % bits)) & (word >> ((h >> shift) % bits)) & 1))
            return NULL; /* not in the object: most objects, at two word operations */
        const uint32_t *bucket = t->gnu + 4 + nbloom * (sizeof(ElfW(Addr)) / 4);
        const uint32_t *chain = bucket + nb;
        for (uint32_t i = nb ? bucket[h % nb] : 0; !s && i && i >= off; i++) {
            uint32_t ch = chain[i - off];
            if ((ch | 1) == (h | 1))
                s = take(t, i, name, &other, &others);
            if (ch & 1)
                break;
        }
    } else { /* DT_HASH */
        uint32_t h = 0, g;
        for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
            h = (h << 4) + *c;
            g = h & 0xf0000000;
            h ^= g >> 24;
            h &= ~g;
        }
        uint32_t nb = t->sysv[0];
        const uint32_t *bucket = t->sysv + 2, *chain = bucket + nb;
        for (uint32_t i = nb ? bucket[h % nb] : 0; !s && i; i = chain[i])
            s = take(t, i, name, &other, &others);
    }
    return s ? s : others == 1 ? other : NULL;
}

const ElfW(Sym) * pw_elf_defined(const pw_elf *t, const char *name, uint32_t h)
{
    const ElfW(Sym) *e = pw_elf_entry_hashed(t, name, h);
    return e && e->st_shndx != SHN_UNDEF && (e->st_value || e->st_shndx == SHN_ABS) &&
                   ELF64_ST_BIND(e->st_info) != STB_LOCAL
               ? e
               : NULL;
}

uintptr_t pw_core_base(void)
{
    static uintptr_t base;
    Dl_info info;
    if (!base && dladdr((void *)pw_core_base, &info))
        base = (uintptr_t)info.dli_fbase;
    return base;
}

typedef struct next_definition {
    const char *name;
    uint32_t hash;
    uintptr_t core;
    int past; /* the objects seen so far include the core */
    const ElfW(Sym) * sym;
    uintptr_t base;
} next_definition;

static int after_core(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    next_definition *d = data;
    pw_elf t;
    if (!d->past) {
        d->past = info->dlpi_addr == d->core;
        return 0;
    }
    d->sym = pw_elf_read(info, &t) ? pw_elf_defined(&t, d->name, d->hash) : NULL;
    d->base = t.base;
    return d->sym != NULL;
}

int pw_next_defines(const char *name)
{
    next_definition d = {name, pw_elf_hash(name), pw_core_base(), 0, NULL, 0};
    return dl_iterate_phdr(after_core, &d);
}

void *pw_next_symbol(const char *name)
{
    next_definition d = {name, pw_elf_hash(name), pw_core_base(), 0, NULL, 0};
    if (!dl_iterate_phdr(after_core, &d))
        return NULL;
    if (ELF64_ST_TYPE(d.sym->st_info) == STT_GNU_IFUNC) /* its resolver is the linker's to call */
        return dlsym(RTLD_NEXT, name);
    return (void *)(d.sym->st_shndx == SHN_ABS ? d.sym->st_value : d.base + d.sym->st_value);
}

typedef struct objects_after {
    pw_elf *out;
    int max, n, past;
    uintptr_t core;
} objects_after;

static int collect(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    objects_after *a = data;
    if (!a->past) {
        a->past = info->dlpi_addr == a->core;
        return 0;
    }
    if (a->n < a->max && pw_elf_read(info, &a->out[a->n]))
        a->n++;
    return 0;
}

int pw_objects_after_core(pw_elf *out, int max)
{
    objects_after a = {out, max, 0, 0, pw_core_base()};
    dl_iterate_phdr(collect, &a);
    return a.n;
}

/* ---- every function of the loaded objects, from their files' symbol tables ---- */

typedef struct each_function {
    pw_elf_function_fn *fn;
    void *arg;
    int seen;
} each_function;

/* The symbols of one object's file: its .symtab (every function, static ones too), or
 * its .dynsym when stripped. */
static void object_functions(const char *path, uintptr_t base, each_function *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return;
    void *m = fstat(fd, &st) == 0 && st.st_size > (off_t)sizeof(ElfW(Ehdr))
                  ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
                  : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED)
        return;
    size_t len = (size_t)st.st_size;
    const ElfW(Ehdr) *eh = m;
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)((const char *)m + eh->e_shoff);
    const ElfW(Shdr) *tab = NULL;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_shoff &&
        eh->e_shoff + (size_t)eh->e_shnum * sizeof *sh <= len)
        for (int pass = 0; pass < 2 && !tab; pass++)
            for (int i = 0; i < eh->e_shnum && !tab; i++)
                if (sh[i].sh_type == (pass ? SHT_DYNSYM : SHT_SYMTAB) &&
                    sh[i].sh_link < eh->e_shnum)
                    tab = &sh[i];
    const ElfW(Shdr) *strs = tab ? &sh[tab->sh_link] : NULL;
    if (tab && tab->sh_offset + tab->sh_size <= len && strs->sh_offset + strs->sh_size <= len) {
        const ElfW(Sym) *sym = (const ElfW(Sym) *)((const char *)m + tab->sh_offset);
        const char *str = (const char *)m + strs->sh_offset;
        size_t n = tab->sh_size / sizeof *sym;
        for (size_t i = 0; i < n; i++) {
            int type = ELF64_ST_TYPE(sym[i].st_info);
            if ((type == STT_FUNC || type == STT_GNU_IFUNC) && sym[i].st_value &&
                sym[i].st_shndx != SHN_UNDEF && sym[i].st_name < strs->sh_size)
                e->fn(str + sym[i].st_name, base + sym[i].st_value, sym[i].st_size, e->arg);
        }
    }
    munmap(m, len);
}

static int functions_of(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    each_function *e = data;
    const char *name = info->dlpi_name;
    if (!e->seen++) /* the program: the first object, nameless */
        name = "/proc/self/exe";
    if (name && *name == '/') /* not the vDSO (no file) */
        object_functions(name, info->dlpi_addr, e);
    return 0;
}

void pw_elf_functions(pw_elf_function_fn *fn, void *arg)
{
    each_function e = {fn, arg, 0};
    dl_iterate_phdr(functions_of, &e);
}
