/*
 * Heap placement (--place, heap_place.c; docs/placement.md): the heap module's allocations
 * that match a rule (a total size range, a function of the call path, a FILE:LINE of it)
 * come from arenas of perfweave's own, mapped apart, bound with mbind to the fast tier's
 * nodes (--tier-nodes) and/or backed by huge pages (--tier-emulate hugepage); free,
 * realloc and malloc_usable_size know an arena's block by its address. The counts live in
 * the heap record's placement part (format/heap.h), what the dump reads back too. Only
 * heap.c calls these, through the few lines that hand it placed allocations.
 */
#ifndef PW_MODULES_HEAP_PLACE_H
#define PW_MODULES_HEAP_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "perfweave/format/heap.h"

/* Non-zero while rules place allocations (heap.c's wrappers branch on it). */
extern int pw_heap_placing;
extern uintptr_t pw_heap_arena_lo, pw_heap_arena_hi;

/* The rules parsed (pw_opt.place) and the arenas mapped; 0 when there is nothing to place
 * (no rule) or on success, -1 (said on stderr) when the placement cannot be made. At the
 * module's start, before the record is made. */
int pw_heap_place_start(void);
/* Bytes the placement part adds to a record of max_sites sites (0 without rules). */
size_t pw_heap_place_len(int max_sites);
/* The placement part at `at` in a new record; from: a forked parent's (rules kept, counts
 * not). sites/objects: the record's, which site rules read. */
void pw_heap_place_attach(pw_heap_header_rec *h, char *at, int max_sites, const char *from,
                          const pw_heap_site_rec *sites, const pw_heap_object_rec *objects);
/* A forked child's state made its own (locks free, its parent's blocks not its own). */
void pw_heap_place_child(void);

static inline int pw_heap_place_owns(const void *p)
{
    return (uintptr_t)p - pw_heap_arena_lo < pw_heap_arena_hi - pw_heap_arena_lo;
}
/* A block of n bytes (zeroed when zero) from the arena of the first rule that matches
 * (size n, site `site`'s call path), counted for the rule and the site; NULL, counted as
 * fallback when a rule matched, when it goes to the default allocator. */
void *pw_heap_place_alloc(size_t n, int zero, int site);
/* The aligned allocators': n bytes asked (what the rules judge and the counts hold; pvalloc's
 * unrounded n) in a block of `size` usable bytes (pvalloc: n rounded to pages) whose address
 * is a multiple of `align`, a power of two up to PW_HEAP_MAX_ALIGN. */
void *pw_heap_place_aligned(size_t n, size_t size, size_t align, int site);
/* 1 when the arenas take an aligned allocation of n bytes asked, aligned to `align`: a power
 * of two up to PW_HEAP_MAX_ALIGN, and for posix_memalign (posix) a multiple of
 * sizeof(void *); *size: the bytes the block must hold (pvalloc, pages: n rounded up to
 * pages; 0 returned when that overflows, the C library's ENOMEM). */
int pw_heap_place_takes(size_t align, size_t n, int posix, int pages, size_t *size);
/* An allocation of n bytes at site `site` that the C library served because its alignment
 * is not one the arenas take (not a power of two, which the library rounds, or past
 * PW_HEAP_MAX_ALIGN): a fallback for its alignment when a rule matches it. */
void pw_heap_place_unaligned(size_t n, int site);
void pw_heap_place_free(void *p);
size_t pw_heap_place_usable(const void *p);
/* At the dump: each arena's policy, nodes and huge pages read back. Async-signal-safe. */
void pw_heap_place_verify(void);

#endif
