/*
 * The heap module's part of the experiment format (runtime/modules/heap.c, --heap; the
 * vocabulary: include/perfweave/format.h).
 *
 * heap/NAME.pwheap, one per process (NAME: HOST.PID, the name it has from its start): the
 * module's record itself, a file mapped MAP_SHARED from the process's start, so that a
 * process killed by SIGKILL leaves what it counted. Layout (docs/format.md "Heap
 * profile"), every part at a multiple of 4096 bytes: one heap_header; max_objects
 * heap_object (the loaded objects the sites' frames name); max_sites heap_site (site 0:
 * the allocations of sites past max_sites; a site with count 0 is unused); max_threads
 * heap_thread (version 3: the threads that recorded while others did, nthreads used).
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
#define PW_HEAP_VERSION 4 /* 2: the placement part (--place); 3: the threads' records,
                             publish_bytes, recorders, the rules' aligned fallbacks;
                             4: the live timelines */
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
                                          counter (pw_ticks) */ \
    X(int32_t, "<i4", nrules)          /* --place rules: the placement part follows */     \
    X(int32_t, "<i4", place_emulate)   /* PW_HEAP_EMULATE: how the fast tier is made */    \
    X(int64_t, "<i8", place_cap)       /* bytes the rules may hold placed at once; 0: no cap */ \
    X(int64_t, "<i8", place_live)      /* bytes placed and live now (requested sizes) */   \
    X(int64_t, "<i8", place_peak)      /* the most at once */                              \
    X(uint64_t, "<u8", tier_nodes)     /* the fast tier's NUMA nodes (bit n: node n) */ \
    X(int64_t, "<i8", publish_bytes)   /* a recording thread's unpublished live-bytes \
                                          change (per site, size group, process) stays \
                                          under this while several threads record */      \
    X(int32_t, "<i4", recorders)       /* threads that recorded; > 1: the peaks are within \
                                          recorders x publish_bytes */                    \
    X(int32_t, "<i4", max_threads)     /* heap_thread records (after the sites) */         \
    X(int32_t, "<i4", nthreads)        /* of them in use */                                \
    X(int32_t, "<i4", unused)                                                              \
    X(int64_t, "<i8", live_at)         /* bytes from the record's start to the live \
                                          timelines (heap_live); 0: none */             \
    X(int32_t, "<i4", live_buckets)    /* buckets per site (PW_HEAP_LIVE_BUCKETS) */      \
    X(int32_t, "<i4", live_log2)       /* bucket j: ticks [tick_start + j 2^live_log2, \
                                          tick_start + (j + 1) 2^live_log2) */           \
    X(int64_t, "<i8", live_slack)      /* ticks a closing interval is extended by (the \
                                          coarse clock's tick: its time is the last tick \
                                          before the event) */                           \
    X(int32_t, "<i4", live_folding)    /* 1 while the buckets were being widened: a \
                                          record killed then has mixed widths */         \
    X(int32_t, "<i4", live_unused)                                                         \
    X(int64_t, "<i8", live_unclosed)   /* intervals open at a dump in a signal handler \
                                          that could not take the timelines' lock: not \
                                          marked past their first bucket */
PW_RECORD_STRUCT(PW_HEAP_HEADER_FIELDS, pw_heap_header_rec)

/* One thread that recorded while others did (version 3): its size groups' byte-ticks,
 * which a reader adds to the header's range_ticks. */
#define PW_HEAP_THREAD_FIELDS(X, A)                                                        \
    X(int64_t, "<i8", tid)             /* the thread's id (gettid) */                      \
    A(uint64_t, "<u8", range_ticks_lo, PW_HEAP_RANGES)                                     \
    A(uint64_t, "<u8", range_ticks_hi, PW_HEAP_RANGES)
PW_RECORD_STRUCT(PW_HEAP_THREAD_FIELDS, pw_heap_thread_rec)

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

/* The live timelines (heap_live.c; docs/heap.md "When a site's objects were live"), at
 * header.live_at (a multiple of 4096 bytes), max_sites heap_live by site index: bit j % 64
 * of bits[j / 64] set when some of the site's objects may have been live during bucket j
 * (from the bucket of the tick its live bytes rose from 0 to the one of the tick they fell
 * back, plus live_slack; those still live at the dump closed there). A process killed by
 * SIGKILL keeps its closed intervals and the first bucket of those open then (the site's
 * live_since and live bytes tell which). */
#define PW_HEAP_LIVE_BUCKETS 2048

#define PW_HEAP_LIVE_FIELDS(X, A) A(uint64_t, "<u8", bits, PW_HEAP_LIVE_BUCKETS / 64)
PW_RECORD_STRUCT(PW_HEAP_LIVE_FIELDS, pw_heap_live_rec)

/* The placement part (heap_place.c, --place; docs/placement.md), after the sites when
 * nrules > 0, each at a multiple of 4096 bytes: PW_HEAP_MAX_RULES heap_rule (one per rule,
 * in the order given: the first matching rule places), then max_sites heap_placed (by site
 * index). Each rule has an arena of its own (arena_len bytes reserved, mapped apart); what is
 * read back at the dump (verified = 1; a killed process has its counts, not this): the
 * arena's policy (get_mempolicy MPOL_F_ADDR), its present pages and their nodes (move_pages
 * without target nodes), the node of sample pages (get_mempolicy MPOL_F_NODE|MPOL_F_ADDR),
 * its /proc/self/numa_maps lines and its huge pages (/proc/self/smaps). */
#define PW_HEAP_MAX_RULES 16
#define PW_HEAP_RULE_TEXT 128
#define PW_HEAP_MAX_ALIGN (1LL << 30) /* the largest alignment placed (posix_memalign, ...) */
/* an arena under a cap of C bytes: C + C / PW_HEAP_ARENA_SHARE + PW_HEAP_ARENA_SLACK bytes,
 * in whole PW_HEAP_ARENA_PAGE (huge) pages, to which it is aligned (what the placement
 * sweep reserves hugetlb pages for) */
#define PW_HEAP_ARENA_SHARE 4
#define PW_HEAP_ARENA_SLACK (8LL << 20)
#define PW_HEAP_ARENA_PAGE (2LL << 20)

#define PW_HEAP_RULE_FIELDS(X, A)                                                          \
    X(int32_t, "<i4", kind)            /* PW_HEAP_RULE_KINDS */                           \
    X(int32_t, "<i4", policy)          /* asked: PW_HEAP_POLICIES (none: emulation only) */ \
    X(int64_t, "<i8", lo)              /* size rule: total sizes lo..hi (bytes) placed */  \
    X(int64_t, "<i8", hi)                                                                  \
    A(char, "S1", text, PW_HEAP_RULE_TEXT) /* function, or FILE:LINE */                    \
    X(int64_t, "<i8", count)           /* allocations placed */                            \
    X(int64_t, "<i8", bytes)                                                               \
    X(int64_t, "<i8", fallback_count)  /* matched, but past the cap or the arena: default */ \
    X(int64_t, "<i8", fallback_bytes)                                                      \
    X(int64_t, "<i8", frees)           /* placed blocks freed (realloc's old one included) */ \
    X(int64_t, "<i8", live)            /* placed bytes live now */                         \
    X(int64_t, "<i8", peak)                                                                \
    X(int64_t, "<i8", arena_len)       /* bytes reserved */                                \
    X(int64_t, "<i8", arena_used)      /* bytes handed out at most (blocks and headers) */ \
    X(int32_t, "<i4", hugetlb)         /* 1: the arena is MAP_HUGETLB memory */            \
    X(int32_t, "<i4", verified)        /* 1: read back at the dump */                      \
    X(int32_t, "<i4", read_policy)     /* get_mempolicy's mode for the arena; -1: failed */ \
    X(int32_t, "<i4", sampled)         /* pages whose node get_mempolicy read */           \
    X(uint64_t, "<u8", read_nodes)     /* get_mempolicy's node mask (nodes 0-63) */        \
    X(int32_t, "<i4", sampled_on_tier) /* of them on the tier's nodes */                  \
    X(int32_t, "<i4", numa_maps_lines) /* the arena's lines found in numa_maps */         \
    X(int64_t, "<i8", resident)        /* bytes of present pages (move_pages) */          \
    X(int64_t, "<i8", on_tier)         /* of them on the tier's nodes */                  \
    X(int64_t, "<i8", numa_maps_bytes) /* numa_maps: bytes on the tier's nodes */         \
    X(int64_t, "<i8", huge_bytes)      /* smaps: AnonHugePages + Private_Hugetlb */        \
    A(char, "S1", numa_policy, 32)     /* numa_maps' policy word (bind:0, default, ...) */ \
    X(int64_t, "<i8", align_fallback_count) /* of the fallbacks, those for their alignment \
                                               (version 3): past PW_HEAP_MAX_ALIGN, or not \
                                               a power of two (the C library's to judge) */ \
    X(int64_t, "<i8", align_fallback_bytes)
PW_RECORD_STRUCT(PW_HEAP_RULE_FIELDS, pw_heap_rule_rec)

/* One site's placement (heap_placed[site]): its allocations placed and fallen back. */
#define PW_HEAP_PLACED_FIELDS(X, A)                                                        \
    X(int64_t, "<i8", count)                                                               \
    X(int64_t, "<i8", bytes)                                                               \
    X(int64_t, "<i8", fallback_count)                                                      \
    X(int64_t, "<i8", fallback_bytes)                                                      \
    X(int32_t, "<i4", rule)            /* the rule that matched last; -1: none */          \
    X(int32_t, "<i4", unused)
PW_RECORD_STRUCT(PW_HEAP_PLACED_FIELDS, pw_heap_placed_rec)

#define PW_HEAP_RULE_KINDS(X)                                                              \
    X(SIZE, 0, "size")                                                                     \
    X(FUNCTION, 1, "function")                                                             \
    X(LINE, 2, "line")

/* Linux's mempolicy modes, as get_mempolicy gives them */
#define PW_HEAP_POLICIES(X)                                                                \
    X(DEFAULT, 0, "default")                                                               \
    X(PREFERRED, 1, "preferred")                                                           \
    X(BIND, 2, "bind")                                                                     \
    X(INTERLEAVE, 3, "interleave")                                                         \
    X(LOCAL, 4, "local")                                                                   \
    X(PREFERRED_MANY, 5, "preferred_many")

#define PW_HEAP_EMULATE(X)                                                                 \
    X(NONE, 0, "none")                                                                     \
    X(HUGEPAGE, 1, "hugepage")

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
    RECORD(heap_thread, PW_HEAP_THREAD_FIELDS, pw_heap_thread_rec)                         \
    RECORD(heap_rule, PW_HEAP_RULE_FIELDS, pw_heap_rule_rec)                               \
    RECORD(heap_placed, PW_HEAP_PLACED_FIELDS, pw_heap_placed_rec)                         \
    RECORD(heap_live, PW_HEAP_LIVE_FIELDS, pw_heap_live_rec)                               \
    NAMES(heap_fns, PW_HEAP_FNS)                                                           \
    NAMES(heap_rule_kinds, PW_HEAP_RULE_KINDS)                                             \
    NAMES(heap_policies, PW_HEAP_POLICIES)                                                 \
    NAMES(heap_emulate, PW_HEAP_EMULATE)                                                   \
    CONST(heap_max_rules, PW_HEAP_MAX_RULES)                                               \
    CONST(heap_max_align, PW_HEAP_MAX_ALIGN)                                               \
    CONST(heap_arena_share, PW_HEAP_ARENA_SHARE)                                           \
    CONST(heap_arena_slack, PW_HEAP_ARENA_SLACK)                                           \
    CONST(heap_arena_page, PW_HEAP_ARENA_PAGE)                                             \
    CONST(heap_depth, PW_HEAP_DEPTH)                                                       \
    CONST(heap_ranges, PW_HEAP_RANGES)                                                     \
    CONST(heap_live_buckets, PW_HEAP_LIVE_BUCKETS)                                         \
    CONST(heap_magic_number, PW_HEAP_MAGIC_NUMBER)
/* clang-format on */

#endif
