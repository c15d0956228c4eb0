/*
 * Loaded objects' dynamic symbols, read from their memory (runtime/core/elfsym.c): the
 * next definition of a name without a call of the dynamic linker's (dlsym would end the
 * program's pending dlerror() message), and what the MPI loader reads and rewrites of
 * the core's own symbol table (mpi_loader.c).
 */
#ifndef PW_CORE_ELFSYM_H
#define PW_CORE_ELFSYM_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pw_elf {
    uintptr_t base;
    ElfW(Sym) * sym;
    const char *str;
    const uint32_t *gnu, *sysv; /* DT_GNU_HASH, DT_HASH */
    const ElfW(Half) * versym;
    const ElfW(Rela) * rela; /* DT_RELA; the PLT's (DT_JMPREL) when it holds Rela */
    size_t nrela;
    const ElfW(Rela) * jmprel;
    size_t njmprel;
    uintptr_t relro, relro_end; /* PT_GNU_RELRO */
} pw_elf;

/* The tables of one loaded object; 0 when it has none to look names up in. (link.h
 * defines dl_phdr_info only under _GNU_SOURCE: declared here for the others.) */
struct dl_phdr_info;
int pw_elf_read(const struct dl_phdr_info *info, pw_elf *t);
/* The object's own entry for name, defined or not (a reference), of its default version
 * (or its only one, as the dynamic linker takes it); NULL when it has none. _hashed: with
 * the name's GNU hash (pw_elf_hash), for a name looked up in many objects. */
ElfW(Sym) * pw_elf_entry(const pw_elf *t, const char *name);
ElfW(Sym) * pw_elf_entry_hashed(const pw_elf *t, const char *name, uint32_t hash);
uint32_t pw_elf_hash(const char *name);
/* Its definition of name (global or weak, with a value); NULL when it has none. */
const ElfW(Sym) * pw_elf_defined(const pw_elf *t, const char *name, uint32_t hash);
/* The tables of the objects loaded after the core, in load order, at most max. */
int pw_objects_after_core(pw_elf *out, int max);
/* The core's load address. */
uintptr_t pw_core_base(void);
/* The first definition of name in an object loaded after the core, in load order (the
 * C library's, an MPI library's also when dlopened RTLD_LOCAL, a tool preloaded after
 * perfweave's); NULL if none. */
void *pw_next_symbol(const char *name);
/* Whether one does (no call of the dynamic linker's, even for an IFUNC). */
int pw_next_defines(const char *name);
/* Each function of each loaded object (the program's and the libraries' files: their
 * .symtab, or .dynsym when stripped) with its address and size, one call of fn each.
 * Reads the files: at start, never from a signal handler. */
typedef void pw_elf_function_fn(const char *name, uintptr_t addr, size_t size, void *arg);
void pw_elf_functions(pw_elf_function_fn *fn, void *arg);

#endif
