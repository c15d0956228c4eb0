/*
 * The heap module's part of the experiment format (runtime/modules/heap.c, --heap; the
 * vocabulary: include/perfweave/format.h).
 *
 * heap/NAME.pwheap, one per process (NAME: HOST.PID, the name it has from its start): the
 * module's record itself, a file mapped MAP_SHARED from the process's start, so that a
 * process killed by SIGKILL leaves what it counted. Layout (docs/format.md "Heap
 * profile"), every part at a multiple of 4096 bytes: one heap_header; max_objects
 * heap_object (the loaded objects the sites' frames name); max_sites heap_site (site 0:
 * the allocations of sites past max_sites; a site with count 0 is unused).
 * Sizes are bytes; byte_ticks (= hi * 2^64 + lo) is bytes times ticks live (the module's
 * clock: CLOCK_MONOTONIC_COARSE ns where header.tick_res_ns > 0, else pw_ticks();
 * header.ns_per_tick converts them); times are ns of CLOCK_MONOTONIC. With sample_bytes > 0 the counts, bytes, live bytes and byte_ticks are
 * estimates (each sampled allocation weighted by the inverse of its chance to be
 * sampled, rounded at random to an integer); min and max are those of the sampled allocations.
 */
#ifndef PERFWEAVE_FORMAT_HEAP_H
#define PERFWEAVE_FORMAT_HEAP_H

#include "perfweave/format.h"

/* clang-format off */
#define PW_HEAP_VERSION 1
#define PW_HEAP_MAGIC "perfweave-heap"
#define PW_HEAP_MAGIC_NUMBER 0x3170616568777000LL /* heap_header.magic */
#define PW_HEAP_DEPTH 4         /* frames of a site's call path, innermost first */
#define PW_HEAP_RANGES 48       /* log2 size groups: group g holds sizes in [2^(g-1), 2^g),
                                   group 0 size 0; the last one every larger size */
#define PW_HEAP_OBJECT_PATH 248

#define PW_HEAP_HEADER_FIELDS(X, A)                                                        \
    X(int64_t, "<i8", magic)           /* PW_HEAP_MAGIC_NUMBER, written last at start */   \
    X(int32_t, "<i4", version)         /* PW_HEAP_VERSION */                               \
    X(int32_t, "<i4", rank)            /* the process's rank once known, else -1 */        \
    X(int64_t, "<i8", pid)                                                                 \
    X(int64_t, "<i8", parent_pid)      /* a process forked by a measured one: its parent */ \
    X(int32_t, "<i4", state)           /* -1 running (or killed), else PW_STATES */        \
    X(int32_t, "<i4", max_sites)                                                           \
    X(int32_t, "<i4", nsites)          /* heap_site entries in use (site 0 included) */    \
    X(int32_t, "<i4", max_objects)                                                         \
    X(int32_t, "<i4", nobjects)                                                            \
    X(int32_t, "<i4", live_slots)      /* capacity of the live-object table */            \
    X(int64_t, "<i8", sample_bytes)    /* 0: every allocation; N: one per N bytes */       \
    X(int64_t, "<i8", t_start)         /* ns: the module's start */                        \
    X(int64_t, "<i8", t_end)           /* ns: the dump (objects live then integrated to \
                                          it); t_start while running or killed */          \
    X(int64_t, "<i8", tick_start)      /* pw_ticks() at t_start */                          \
    X(double, "<f8", ns_per_tick)      /* at t_end (refreshed at each new site while running) */ \
    X(int64_t, "<i8", dropped_sites)   /* allocations of sites past max_sites (site 0) */  \
    X(int64_t, "<i8", untracked)       /* allocations not in the live table (full): their \
                                          bytes are counted, their lifetime is not */      \
    X(int64_t, "<i8", unseen_frees)    /* frees of pointers the module did not allocate */ \
    X(int64_t, "<i8", bootstrap)       /* allocations served by the bootstrap arena */     \
    X(int64_t, "<i8", unwinds)         /* call paths unwound (new call-path keys) */       \
    X(int64_t, "<i8", keys_full)       /* unwinds because the key cache was full */        \
    X(int64_t, "<i8", live_bytes)      /* now (at t_end: still live at exit) */            \
    X(int64_t, "<i8", peak_live_bytes) /* of the whole process */                          \
    A(int64_t, "<i8", range_live, PW_HEAP_RANGES)                                          \
    A(int64_t, "<i8", range_peak, PW_HEAP_RANGES) /* peak live bytes of each size group */ \
    A(uint64_t, "<u8", range_ticks_lo, PW_HEAP_RANGES) /* byte_ticks of each size group */ \
    A(uint64_t, "<u8", range_ticks_hi, PW_HEAP_RANGES)                                     \
    X(int64_t, "<i8", backtraces)      /* of the unwinds, those made by backtrace() (no \
                                          rule from .eh_frame for some frame) */          \
    X(int64_t, "<i8", tick_res_ns)     /* the lifetimes' clock's resolution: ns of a tick \
                                          of CLOCK_MONOTONIC_COARSE, 0: the time-stamp \
                                          counter (pw_ticks) */
PW_RECORD_STRUCT(PW_HEAP_HEADER_FIELDS, pw_heap_header_rec)

#define PW_HEAP_OBJECT_FIELDS(X, A)                                                        \
    X(uint64_t, "<u8", hash)           /* of the path; 0: free */                          \
    A(char, "S1", path, PW_HEAP_OBJECT_PATH)
PW_RECORD_STRUCT(PW_HEAP_OBJECT_FIELDS, pw_heap_object_rec)

/* One allocation site: a call path of up to PW_HEAP_DEPTH return addresses, innermost
 * (the allocator's caller) first, each an (object, offset). */
#define PW_HEAP_SITE_FIELDS(X, A)                                                          \
    X(uint64_t, "<u8", path_hash)      /* 0: the slot is unused */                         \
    X(int32_t, "<i4", depth)           /* frames kept */                                   \
    X(int32_t, "<i4", fn)              /* the allocator called (heap_fns) */               \
    A(int32_t, "<i4", object, PW_HEAP_DEPTH) /* heap_object index; -1: offset is the     \
                                                address */                                 \
    A(int64_t, "<i8", offset, PW_HEAP_DEPTH) /* return address - the object's base */     \
    X(int64_t, "<i8", count)           /* allocations: the sum of hist_count (written at \
                                          the dump; a killed process's reader sums) */     \
    X(int64_t, "<i8", frees)           /* of them freed (realloc's old block included) */  \
    X(int64_t, "<i8", bytes)           /* the sum of hist_bytes, likewise */                \
    X(int64_t, "<i8", min)                                                                 \
    X(int64_t, "<i8", max)                                                                 \
    X(int64_t, "<i8", live)            /* bytes live now */                                \
    X(int64_t, "<i8", peak)            /* the most bytes of this site live at once */      \
    X(uint64_t, "<u8", byte_ticks_lo)  /* bytes x ticks live, freed or at the dump */      \
    X(uint64_t, "<u8", byte_ticks_hi)                                                      \
    X(int64_t, "<i8", first_ns)        /* CLOCK_MONOTONIC ns of its first allocation */    \
    X(int64_t, "<i8", live_ticks)      /* ticks while some of its objects were live (to \
                                          the dump for those still live then) */           \
    X(int64_t, "<i8", live_since)      /* pw_ticks() its live bytes last rose from 0 */     \
    A(int64_t, "<i8", hist_count, PW_HEAP_RANGES) /* allocations per log2 size group */   \
    A(int64_t, "<i8", hist_bytes, PW_HEAP_RANGES)
PW_RECORD_STRUCT(PW_HEAP_SITE_FIELDS, pw_heap_site_rec)

/* The allocator functions a site's allocations were made through. */
#define PW_HEAP_FNS(X)                                                                     \
    X(MALLOC, 0, "malloc")                                                                 \
    X(CALLOC, 1, "calloc")                                                                 \
    X(REALLOC, 2, "realloc")                                                               \
    X(POSIX_MEMALIGN, 3, "posix_memalign")                                                 \
    X(ALIGNED_ALLOC, 4, "aligned_alloc")                                                   \
    X(MEMALIGN, 5, "memalign")                                                             \
    X(VALLOC, 6, "valloc")                                                                 \
    X(PVALLOC, 7, "pvalloc")

#define PW_FORMAT_heap(FILE, RECORD, NAMES, CODES, CONST, JSON)                            \
    FILE(heap, "heap", PW_HEAP_MAGIC, PW_HEAP_VERSION)                                     \
    RECORD(heap_header, PW_HEAP_HEADER_FIELDS, pw_heap_header_rec)                         \
    RECORD(heap_object, PW_HEAP_OBJECT_FIELDS, pw_heap_object_rec)                         \
    RECORD(heap_site, PW_HEAP_SITE_FIELDS, pw_heap_site_rec)                               \
    NAMES(heap_fns, PW_HEAP_FNS)                                                           \
    CONST(heap_depth, PW_HEAP_DEPTH)                                                       \
    CONST(heap_ranges, PW_HEAP_RANGES)                                                     \
    CONST(heap_magic_number, PW_HEAP_MAGIC_NUMBER)
/* clang-format on */

#endif
