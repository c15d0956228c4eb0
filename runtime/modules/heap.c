/*
 * The heap module (--heap, docs/heap.md): per allocation site (a call path of up to
 * PW_HEAP_DEPTH frames), the allocations' count, bytes, sizes (min, max, log2 groups),
 * bytes live now and at peak, and bytes x time live; per log2 size group of the process,
 * the same lifetimes. Its record is heap/HOST.PID.pwheap (format/heap.h), mapped
 * MAP_SHARED from the start: a process killed by SIGKILL leaves what it counted (its
 * objects still live then have no end, so their time is not counted).
 *
 * The hot path: a site is found by a call-path key, the caller's return address, its
 * stack address and the return address one frame further out (read from the stack at the
 * offset learned when that caller was first unwound: C++ operator new's callers differ
 * only there), checked first against the thread's previous key, else in a cache (one
 * hash, usually one probe); a new key's path is unwound
 * once (heap_unwind.c: per return address a rule from .eh_frame, computed once; else
 * backtrace(), libgcc's unwinder) and the site found or made by the path (two keys
 * of one path share a site; two paths of one key, which a recursion of equal depth could
 * make, share the first one's). Live objects are kept in a bounded open-addressing table
 * of pointer -> (site, weighted size, tick of allocation); past its bound an allocation
 * is counted but not tracked (header.untracked). Lifetimes are timed by a coarse clock
 * (heap_ticks()). While one thread alone records (the usual case: the runtime's own
 * threads never do), the counters are the site's, the size group's and the process's,
 * updated with plain loads and stores (the key cache's new entries too); from the second
 * recording thread on, each thread writes records of its own and keeps its live-bytes
 * changes in its own memory, publishing them in steps (below, "the threads' own
 * records"): no line another thread writes, no lock on the hot path either way; site
 * creation takes a spin lock. The switch
 * is an asymmetric fence: the recording thread marks itself busy around its plain updates
 * (a plain store), the second thread sets `many`, issues membarrier() (every running
 * thread passes a full barrier) and waits for the mark to clear; without membarrier() the
 * module uses atomics from the start.
 * A free of a pointer not in the table (allocated before the start, by the bootstrap
 * arena, or not sampled) only passes on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "heap.h"
#include "heap_unwind.h"
#include "heap_live.h"
#include "heap_place.h"
#include "perfweave/format/heap.h"
#include "wrap.h"

enum {
    FN_MALLOC,
    FN_CALLOC,
    FN_REALLOC,
    FN_POSIX_MEMALIGN,
    FN_ALIGNED_ALLOC,
    FN_MEMALIGN,
    FN_VALLOC,
    FN_PVALLOC
};

#define MAX_OBJECTS 256
#define MAX_PROBE 64
#define TOMB ((uintptr_t)1)

static int enabled;
/* Non-zero: the module records nothing and the real functions are known: each wrapper's
 * first branch calls straight on (a program run without --heap pays only that); 1: no
 * block of the bootstrap arena is out, so free and realloc need not look for one.
 * bootstrapped: some block of it was handed out (set before it is: free looks for one
 * only then). */
static int pass, bootstrapped;
static pw_heap_header_rec *hdr;
static pw_heap_object_rec *objects;
static pw_heap_site_rec *sites;
static size_t map_len;
static char *place_part; /* --place's part of the record (heap_place.c) */
static char store_path[4300];
static int64_t sample_bytes;

/* The live objects: private memory (a forked child drops its parent's). */
typedef struct live_entry {
    uintptr_t ptr; /* 0: never used, TOMB: freed */
    int64_t size;  /* weighted bytes */
    int64_t tick;  /* of the allocation */
    int32_t site, range;
} live_entry;
static live_entry *live;
static size_t live_mask;

/* Call-path key -> site (private; a forked child keeps it: its sites keep their paths).
 * One word an entry, the key's bits above site_bits and the site + 1 in site_bits (0: a
 * free slot): 8 bytes, so that the table (4 x max_sites entries, 128 KiB by default) is
 * half the lines it would be with a key and a site apart; a new key's probe, the likeliest
 * cache miss of a new call path, lands in a smaller table. */
static uint64_t *keys;
static size_t key_mask;
static uint64_t site_bits; /* a power of 2 above max_sites, minus 1 */

/* Caller's return address -> where the next frame's return address lies on the stack
 * (bytes above the wrapper's frame address) + 1; 0 in delta: not found (the key has no
 * third part). Learned at the first unwind from that caller. */
typedef struct ra_entry {
    uintptr_t ra; /* 0: free */
    int64_t delta;
} ra_entry;
#define RA_SLOTS 4096
#define MAX_DELTA 1024
static ra_entry *ras;

/* Path hash -> site + 1, under site_lock. */
static int32_t *by_path;
static size_t path_mask;
static int site_lock;

/* The clock of lifetimes and live spans. rdtsc costs ~17-29 ns under this project's KVM
 * machines, two a malloc/free pair; CLOCK_MONOTONIC_COARSE, read through the vDSO (no
 * system call, no time-stamp counter: the time of the kernel's last tick), ~9 ns. Its
 * value is the time t quantised down to the tick grid, q(t) = D floor(t / D) (D: the
 * tick, 4 ms at HZ=250). An object living from a to b counts q(b) - q(a): the number of
 * tick instants in (a, b] times D, so a site's byte-ticks are D times the sum, over the
 * ticks, of its bytes live at each tick: the integral of its live bytes over time sampled
 * on the tick grid. With the grid's phase uniform with respect to the program (its events
 * are not driven by the tick), an object of life L = kD + r counts (k + 1) D with
 * probability r / D and kD otherwise: kD + r on average, an unbiased estimate, each
 * object's error under D, and the error of a sum of many objects that of sampling the
 * live-bytes curve every D (small when the bytes live change little within a tick, as in
 * a loop keeping many short-lived objects: tests/runtime/test_heap.py checks short- and
 * long-lived objects against the program's own clock). A kernel whose coarse clock is
 * coarser than PW_HEAP_COARSE_MAX_NS gets pw_ticks() (the time-stamp counter). */
#define PW_HEAP_COARSE_MAX_NS 4000000
static int coarse;          /* 1: CLOCK_MONOTONIC_COARSE ns; 0: pw_ticks() */
static int64_t tick_res_ns; /* the coarse clock's resolution */
/* The vDSO's own clock_gettime, called straight (about 4 ns here, where glibc's
 * clock_gettime, a PLT jump and a wrapper around the same call, costs about 6: two reads a
 * pair); NULL: glibc's. */
static int (*vdso_gettime)(clockid_t, struct timespec *);

static inline int64_t heap_ticks(void)
{
    if (PW_LIKELY(coarse)) {
        struct timespec t;
        if (PW_LIKELY(vdso_gettime != NULL))
            vdso_gettime(CLOCK_MONOTONIC_COARSE, &t);
        else
            clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
        return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
    }
    return pw_ticks();
}
static double heap_ns_per_tick(void) { return coarse ? 1.0 : pw_ns_per_tick(); }

static PW_TLS int64_t countdown; /* sampling: bytes to the next sampled allocation */
static PW_TLS uint64_t rng;

/* One recording thread (plain updates) or several (atomics); `one` is alone()'s answer. */
static int many;        /* 1: a second thread has recorded, or membarrier() is missing */
static int owner_busy;  /* the one recording thread is between alone() and alone_end() */
static PW_TLS int role; /* 0: has not recorded; 1: the one recording thread; 2: another */

static void fence_all(void) { syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0); }

/* The process's use of fence_all() registered (at the start, again in a forked child);
 * without it every thread uses atomics. */
static void register_fence(void)
{
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0)
        __atomic_store_n(&many, 1, __ATOMIC_SEQ_CST);
}

static void spin_lock(int *l)
{
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}
static void spin_unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }
static int role_lock, recorders;

/* The calling thread's first recording: the first thread to record is the one; any later
 * one makes every thread use atomics, after the one has left its plain updates. */
static __attribute__((noinline)) void take_role(void)
{
    spin_lock(&role_lock);
    if (hdr)
        __atomic_store_n(&hdr->recorders, recorders + 1, __ATOMIC_RELAXED);
    if (recorders++ == 0 && !__atomic_load_n(&many, __ATOMIC_RELAXED))
        role = 1;
    else {
        role = 2;
        if (!__atomic_load_n(&many, __ATOMIC_RELAXED)) {
            __atomic_store_n(&many, 1, __ATOMIC_SEQ_CST);
            fence_all(); /* the one either saw `many` or its busy mark is visible now */
            while (__atomic_load_n(&owner_busy, __ATOMIC_ACQUIRE))
                sched_yield();
        }
    }
    spin_unlock(&role_lock);
}

/* 1: the caller may update the counters with plain loads and stores until alone_end(). */
static inline int alone(void)
{
    if (PW_UNLIKELY(role == 0))
        take_role();
    if (PW_LIKELY(role == 1)) {
        __atomic_store_n(&owner_busy, 1, __ATOMIC_RELAXED);
        __asm__ volatile("" ::: "memory");
        if (PW_LIKELY(!__atomic_load_n(&many, __ATOMIC_RELAXED)))
            return 1;
        __atomic_store_n(&owner_busy, 0, __ATOMIC_RELEASE);
        role = 2; /* for good: its busy mark, a line the others read, is not written again */
    }
    return 0;
}
static inline void alone_end(int one)
{
    if (one)
        __atomic_store_n(&owner_busy, 0, __ATOMIC_RELEASE);
}

static inline void add64(int64_t *p, int64_t v, int one)
{
    if (one)
        __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
/* *p + v, stored in *p. */
static inline int64_t add_get64(int64_t *p, int64_t v, int one)
{
    if (!one)
        return __atomic_add_fetch(p, v, __ATOMIC_RELAXED);
    int64_t x = __atomic_load_n(p, __ATOMIC_RELAXED) + v;
    __atomic_store_n(p, x, __ATOMIC_RELAXED);
    return x;
}
static inline void max64(int64_t *p, int64_t v, int one)
{
    int64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    if (one) {
        if (v > cur)
            __atomic_store_n(p, v, __ATOMIC_RELAXED);
        return;
    }
    while (v > cur &&
           !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}
static inline void min64(int64_t *p, int64_t v, int one)
{
    int64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    if (one) {
        if (v < cur)
            __atomic_store_n(p, v, __ATOMIC_RELAXED);
        return;
    }
    while (v < cur &&
           !__atomic_compare_exchange_n(p, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}
/* A 128-bit sum of bytes x ticks kept as two 64-bit words. */
static inline void add128(uint64_t *lo, uint64_t *hi, int64_t bytes, int64_t ticks, int one)
{
    if (bytes <= 0 || ticks <= 0)
        return;
    unsigned __int128 x = (unsigned __int128)(uint64_t)bytes * (uint64_t)ticks;
    uint64_t xl = (uint64_t)x, xh = (uint64_t)(x >> 64), old;
    if (one) {
        old = __atomic_load_n(lo, __ATOMIC_RELAXED);
        __atomic_store_n(lo, old + xl, __ATOMIC_RELAXED);
    } else {
        old = __atomic_fetch_add(lo, xl, __ATOMIC_RELAXED);
    }
    xh += old + xl < old; /* the carry */
    if (xh)
        add64((int64_t *)hi, (int64_t)xh, one);
}

static inline int range_of(uint64_t size)
{
    int g = size ? 64 - __builtin_clzll(size) : 0;
    return g < PW_HEAP_RANGES ? g : PW_HEAP_RANGES - 1;
}

static inline uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t h = (a ^ (b * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;
    return h ^ (h >> 31);
}

/* ---- sites ---- */

/* The record's object index of a loaded object's path (added if new); -1: none. */
static int object_index(const char *path)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *c = path; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    h |= 1;
    int n = hdr->nobjects;
    for (int i = 0; i < n; i++)
        if (objects[i].hash == h)
            return i;
    if (n >= MAX_OBJECTS)
        return -1;
    size_t len = strlen(path);
    const char *tail = len >= PW_HEAP_OBJECT_PATH ? path + len - (PW_HEAP_OBJECT_PATH - 1) : path;
    memcpy(objects[n].path, tail, strlen(tail) + 1);
    objects[n].hash = h;
    __atomic_store_n(&hdr->nobjects, n + 1, __ATOMIC_RELEASE);
    return n;
}

/* A new site of path frames[0..depth) with hash h, by_path slot i. Under site_lock. */
static int make_site(int fn, const uintptr_t *frames, int depth, uint64_t h, size_t i)
{
    int n = hdr->nsites;
    if (n >= hdr->max_sites)
        return 0;
    pw_heap_site_rec *r = &sites[n];
    r->fn = fn;
    r->depth = depth;
    for (int k = 0; k < PW_HEAP_DEPTH; k++) {
        uint64_t off = 0;
        int o = k < depth ? pw_object_of(frames[k], &off) : -1;
        r->object[k] = o >= 0 ? object_index(pw_object_path(o)) : -1;
        r->offset[k] = k >= depth ? 0 : r->object[k] >= 0 ? (int64_t)off : (int64_t)frames[k];
    }
    r->min = INT64_MAX;
    r->first_ns = pw_now();
    __atomic_store_n(&r->path_hash, h, __ATOMIC_RELEASE);
    __atomic_store_n(&by_path[i], n + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&hdr->nsites, n + 1, __ATOMIC_RELEASE);
    hdr->ns_per_tick = heap_ns_per_tick();
    return n;
}

/* The site of path frames[0..depth) (site 0 past max_sites): a site made before is found
 * without a lock (its by_path entry is published after its path), a new one made under
 * site_lock. */
static int site_of_path(int fn, const uintptr_t *frames, int depth)
{
    uint64_t h = (uint64_t)fn + 1;
    for (int i = 0; i < depth; i++)
        h = mix(h, frames[i]);
    h |= 1;
    for (int locked = 0;; locked = 1) {
        size_t i = h & path_mask;
        for (;; i = (i + 1) & path_mask) {
            int32_t s = __atomic_load_n(&by_path[i], __ATOMIC_ACQUIRE);
            if (s == 0)
                break;
            if (__atomic_load_n(&sites[s - 1].path_hash, __ATOMIC_RELAXED) == h) {
                if (locked)
                    spin_unlock(&site_lock);
                return s - 1;
            }
        }
        if (locked) {
            int n = make_site(fn, frames, depth, h, i);
            spin_unlock(&site_lock);
            return n;
        }
        spin_lock(&site_lock);
    }
}

/* A new key: its call path unwound, its site found or made, the key cached. */
static inline size_t ra_slot(uintptr_t ra) { return (size_t)mix(ra, 0x2545f491) & (RA_SLOTS - 1); }

/* Where frames[1] lies above fp, remembered for ra (once). */
static void learn_delta(uintptr_t ra, uintptr_t fp, const uintptr_t *frames, int depth)
{
    int64_t delta = 0;
    for (size_t d = 0; depth > 1 && d < MAX_DELTA; d += sizeof(uintptr_t))
        if (*(const uintptr_t *)(fp + d) == frames[1]) {
            delta = (int64_t)d + 1;
            break;
        }
    size_t i = ra_slot(ra);
    for (int p = 0; p < MAX_PROBE; p++, i = (i + 1) & (RA_SLOTS - 1)) {
        uintptr_t zero = 0;
        if (__atomic_compare_exchange_n(&ras[i].ra, &zero, ra, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            __atomic_store_n(&ras[i].delta, delta ? delta : -1, __ATOMIC_RELEASE);
            return;
        }
        if (zero == ra)
            return;
    }
}

/* one: alone()'s answer (the caller records alone: the key cache's slot and the counters
 * are written without atomics). */
static __attribute__((noinline)) int unwind_site(int fn, uintptr_t ra, uintptr_t fp, uint64_t key,
                                                 int learned, int one)
{
    uintptr_t frames[PW_HEAP_DEPTH] = {ra};
    int depth = pw_heap_unwind(ra, fp, frames, PW_HEAP_DEPTH);
    if (depth == 0) { /* the rules could not: libgcc's unwinder */
        void *bt[PW_HEAP_DEPTH + 12];
        int n = backtrace(bt, PW_HEAP_DEPTH + 12), at = -1;
        for (int i = 0; i < n && at < 0; i++)
            if ((uintptr_t)bt[i] == ra)
                at = i;
        depth = 1;
        if (at >= 0)
            for (depth = 0; depth < PW_HEAP_DEPTH && at + depth < n; depth++)
                frames[depth] = (uintptr_t)bt[at + depth];
        add64(&hdr->backtraces, 1, one);
    }
    add64(&hdr->unwinds, 1, one);
    if (!learned)
        learn_delta(ra, fp, frames, depth);
    int site = site_of_path(fn, frames, depth);
    uint64_t tag = key & ~site_bits, entry = tag | (uint64_t)(site + 1);
    size_t i = key & key_mask;
    for (int p = 0; p < MAX_PROBE; p++, i = (i + 1) & key_mask) {
        uint64_t cur = __atomic_load_n(&keys[i], __ATOMIC_RELAXED);
        if (cur == 0 && one) {
            __atomic_store_n(&keys[i], entry, __ATOMIC_RELAXED);
            return site;
        }
        if (cur == 0 && __atomic_compare_exchange_n(&keys[i], &cur, entry, 0, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED))
            return site;
        if ((cur & ~site_bits) == tag)
            return site; /* another thread's */
    }
    add64(&hdr->keys_full, 1, one);
    return site;
}

/* The thread's previous call-path key and its site: a loop allocating from one line finds
 * its site by three compares, no hash (sites.c's rule for the call-site tables). */
typedef struct last_key {
    uintptr_t ra, fp, next; /* next: the return address one frame out (delta > 0) */
    int64_t delta;          /* ras' delta; -1: the key has no third part */
    int fn, site;
} last_key;
static PW_TLS last_key last;

static inline int site_of(int fn, uintptr_t ra, uintptr_t fp, int one)
{
    if (PW_LIKELY(last.ra == ra && last.fp == fp && last.fn == fn) &&
        (last.delta < 0 || *(const uintptr_t *)(fp + (uintptr_t)last.delta - 1) == last.next))
        return last.site;
    uint64_t key = mix(mix((uint64_t)fn + 1, ra), fp);
    int learned = 0;
    int64_t d = 0;
    uintptr_t next = 0;
    for (size_t i = ra_slot(ra), p = 0; p < MAX_PROBE; p++, i = (i + 1) & (RA_SLOTS - 1)) {
        uintptr_t r = __atomic_load_n(&ras[i].ra, __ATOMIC_ACQUIRE);
        if (r == ra) {
            d = __atomic_load_n(&ras[i].delta, __ATOMIC_ACQUIRE);
            learned = d != 0;
            if (d > 0)
                key = mix(key, next = *(const uintptr_t *)(fp + (uintptr_t)d - 1));
            break;
        }
        if (r == 0)
            break;
    }
    uint64_t tag = key & ~site_bits;
    size_t i = key & key_mask;
    for (int p = 0; p < MAX_PROBE; p++, i = (i + 1) & key_mask) {
        uint64_t k = __atomic_load_n(&keys[i], __ATOMIC_RELAXED);
        if (k == 0)
            break;
        if ((k & ~site_bits) == tag) {
            int s = (int)(k & site_bits) - 1;
            if (learned) /* else the key gains its third part later: not kept */
                last = (last_key){ra, fp, next, d > 0 ? d : -1, fn, s};
            return s;
        }
    }
    int site;
    PW_KEEP_ERRNO(site = unwind_site(fn, ra, fp, key, learned, one));
    return site;
}

/* ---- the threads' own records ---- */

/* With several recording threads, no event writes a cache line another thread writes
 * (but the live table's entry, which is the object's):
 * - each thread adds a site's counts, bytes, sizes, frees and byte-ticks (the sums) into
 *   a record of its own: a copy of the site's path (its path_hash: the reader sums a
 *   process's records of one path), made at the thread's first event at that site, and
 *   its size groups' byte-ticks into a heap_thread record of its own (the reader adds them
 *   to the header's). They are records of the mapped file like the sites: SIGKILL keeps
 *   them. Own site records take at most half of max_sites, heap_thread records
 *   MAX_THREADS; past either, a thread's sums go to the shared record, with atomics.
 * - the live bytes of a site, of a size group and of the process (for the peaks and the
 *   site's live span, which need the threads' sum at each moment) change by the thread's
 *   own deltas, kept in its private state and published (an atomic addition, then the
 *   peak) when one reaches PUBLISH_BYTES in magnitude, at once for an allocation or free
 *   of at least PUBLISH_BYTES (so a large array's site and size group stay exact), and at
 *   the thread's exit. A published sum then differs from the true one by the other
 *   threads' unpublished deltas, each under PUBLISH_BYTES: a peak is within recorders x
 *   PUBLISH_BYTES of the true one (header.publish_bytes, header.recorders), and a site's
 *   live span is that of its published live bytes. The dump takes the final live bytes
 *   from the live table. */
#define PUBLISH_BYTES ((int64_t)64 << 10)
#define MAX_THREADS 256

typedef struct own_slot {
    int32_t rec; /* the thread's record of the site + 1; 0: not made yet */
    int32_t unused;
    int64_t pending; /* the site's live bytes changed by this thread, not yet published */
} own_slot;

typedef struct thread_state {
    int64_t pending; /* the process's */
    int64_t range_pending[PW_HEAP_RANGES];
    pw_heap_thread_rec *rec; /* its size groups' byte-ticks; NULL: the header's */
    own_slot site[];         /* max_sites */
} thread_state;
static PW_TLS thread_state *ts;
static PW_TLS int ts_none; /* the thread's state could not be mapped */
static pw_heap_thread_rec *threads;
static pthread_key_t ts_key; /* its destructor publishes at the thread's exit */
static int ts_key_ok;

static __attribute__((noinline)) int make_own(int s)
{
    spin_lock(&site_lock);
    int n = hdr->nsites;
    if (n >= hdr->max_sites / 2) {
        spin_unlock(&site_lock);
        return s;
    }
    pw_heap_site_rec *r = &sites[n];
    const pw_heap_site_rec *from = &sites[s];
    r->fn = from->fn;
    r->depth = from->depth;
    memcpy(r->object, from->object, sizeof r->object);
    memcpy(r->offset, from->offset, sizeof r->offset);
    r->min = INT64_MAX;
    r->first_ns = from->first_ns;
    __atomic_store_n(&r->path_hash, from->path_hash, __ATOMIC_RELEASE);
    __atomic_store_n(&hdr->nsites, n + 1, __ATOMIC_RELEASE);
    spin_unlock(&site_lock);
    return n;
}

static void *private_map(size_t len);

/* The calling thread's heap_thread record (under site_lock); NULL past MAX_THREADS. */
static pw_heap_thread_rec *thread_rec(void)
{
    spin_lock(&site_lock);
    int n = hdr->nthreads;
    pw_heap_thread_rec *r = n < hdr->max_threads ? &threads[n] : NULL;
    if (r) {
        r->tid = syscall(SYS_gettid);
        __atomic_store_n(&hdr->nthreads, n + 1, __ATOMIC_RELEASE);
    }
    spin_unlock(&site_lock);
    return r;
}

static __attribute__((noinline)) thread_state *make_thread_state(void)
{
    if (ts_none)
        return NULL;
    thread_state *t =
        private_map(sizeof *t + sizeof *t->site * (size_t)__atomic_load_n(&hdr->max_sites, 0));
    if (!t) {
        ts_none = 1;
        return NULL;
    }
    t->rec = thread_rec();
    if (ts_key_ok)
        pthread_setspecific(ts_key, t);
    return ts = t;
}

/* The calling thread's state (one of several recording); NULL: none could be made. */
static inline thread_state *thread_of(void)
{
    thread_state *t = ts;
    if (PW_UNLIKELY(!t))
        PW_KEEP_ERRNO(t = make_thread_state());
    return t;
}

/* The record the calling thread (one of several recording) adds site s's sums to; *mine:
 * 1 when it is the thread's own (plain updates), 0 when it is s's (atomics). */
static inline int own_site(thread_state *t, int s, int *mine)
{
    int32_t o = t->site[s].rec;
    if (PW_UNLIKELY(o == 0))
        o = t->site[s].rec = make_own(s) + 1;
    *mine = o - 1 != s;
    return o - 1;
}

/* A published change d of site s's live bytes at `now` (the site's own record): its live
 * span begins where they rise from 0 and ends where they fall back to it. */
static inline void site_live(pw_heap_site_rec *s, int64_t d, int64_t now, int one)
{
    int64_t after = add_get64(&s->live, d, one), before = after - d;
    if (before <= 0 && after > 0) { /* its objects live from now (a race: approximate) */
        __atomic_store_n(&s->live_since, now, __ATOMIC_RELAXED);
        pw_heap_live_open((int)(s - sites), now); /* its timeline: keep at this 0 -> more */
    } else if (before > 0 && after <= 0) {
        int64_t since = __atomic_load_n(&s->live_since, __ATOMIC_RELAXED);
        if (now > since)
            add64(&s->live_ticks, now - since, one);
        pw_heap_live_close((int)(s - sites), since, now); /* its timeline: at this -> 0 */
    }
    if (d > 0)
        max64(&s->peak, after, one);
}

/* A published change d of size group g's and of the process's live bytes. */
static inline void range_live(int g, int64_t d, int one)
{
    int64_t after = add_get64(&hdr->range_live[g], d, one);
    if (d > 0)
        max64(&hdr->range_peak[g], after, one);
}
static inline void process_live(int64_t d, int one)
{
    int64_t after = add_get64(&hdr->live_bytes, d, one);
    if (d > 0)
        max64(&hdr->peak_live_bytes, after, one);
}

/* *p changed by d: what is to be published now (0: nothing, d kept in *p). */
static inline int64_t pend(int64_t *p, int64_t d, int big)
{
    int64_t v = *p + d;
    if (PW_LIKELY(!big && v < PUBLISH_BYTES && v > -PUBLISH_BYTES)) {
        *p = v;
        return 0;
    }
    *p = 0;
    return v;
}

/* A change d of the live bytes of site `site` and size group g by the calling thread
 * (one of several recording: t its state, NULL: published at once). */
static inline void live_change(thread_state *t, int site, int g, int64_t d, int64_t now)
{
    int big = d >= PUBLISH_BYTES || d <= -PUBLISH_BYTES;
    int64_t v;
    if (PW_UNLIKELY(!t)) {
        site_live(&sites[site], d, now, 0);
        range_live(g, d, 0);
        process_live(d, 0);
        return;
    }
    if ((v = pend(&t->site[site].pending, d, big)) != 0)
        site_live(&sites[site], v, now, 0);
    if ((v = pend(&t->range_pending[g], d, big)) != 0)
        range_live(g, v, 0);
    if ((v = pend(&t->pending, d, big)) != 0)
        process_live(v, 0);
}

/* The thread's unpublished changes published (at its exit, and the dumping thread's). */
static void publish_all(thread_state *t, int64_t now)
{
    int n = __atomic_load_n(&hdr->nsites, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (t->site[i].pending) {
            site_live(&sites[i], t->site[i].pending, now, 0);
            t->site[i].pending = 0;
        }
    for (int g = 0; g < PW_HEAP_RANGES; g++)
        if (t->range_pending[g]) {
            range_live(g, t->range_pending[g], 0);
            t->range_pending[g] = 0;
        }
    if (t->pending)
        process_live(t->pending, 0);
    t->pending = 0;
}

/* pthread's destructor of ts_key: the exiting thread's changes published (its state is
 * kept: a later destructor may still free). */
static void thread_done(void *arg)
{
    if (arg == ts && __atomic_load_n(&enabled, __ATOMIC_ACQUIRE) && hdr)
        publish_all(ts, heap_ticks());
}

/* ---- live objects ---- */

static inline size_t live_hash(uintptr_t p) { return (size_t)mix(p, 0x5bd1e995) & live_mask; }

static void live_put(uintptr_t p, int64_t size, int64_t tick, int site, int range, int one)
{
    size_t i = live_hash(p);
    for (int n = 0; n < MAX_PROBE; n++, i = (i + 1) & live_mask) {
        live_entry *e = &live[i];
        uintptr_t cur = __atomic_load_n(&e->ptr, __ATOMIC_RELAXED);
        if (cur != 0 && cur != TOMB)
            continue;
        if (one) { /* the fields first: the dump reads an entry whose ptr is set */
            e->size = size;
            e->tick = tick;
            e->site = site;
            e->range = range;
            __atomic_store_n(&e->ptr, p, __ATOMIC_RELEASE);
            return;
        }
        if (__atomic_compare_exchange_n(&e->ptr, &cur, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            e->size = size;
            e->tick = tick;
            e->site = site;
            e->range = range;
            return;
        }
    }
    add64(&hdr->untracked, 1, one);
}

/* p's entry taken out of the table into *out; 0: p is not in it. */
static int live_take(uintptr_t p, live_entry *out)
{
    size_t i = live_hash(p);
    for (int n = 0; n < MAX_PROBE; n++, i = (i + 1) & live_mask) {
        live_entry *e = &live[i];
        uintptr_t cur = __atomic_load_n(&e->ptr, __ATOMIC_ACQUIRE);
        if (cur == p) {
            *out = *e;
            __atomic_store_n(&e->ptr, TOMB, __ATOMIC_RELEASE);
            return 1;
        }
        if (cur == 0)
            return 0;
    }
    return 0;
}

/* ---- recording ---- */

static uint64_t next_random(void)
{
    if (PW_UNLIKELY(rng == 0))
        rng = mix((uint64_t)(uintptr_t)&rng, (uint64_t)pw_ticks()) | 1;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double uniform(void) { return ((double)(next_random() >> 11) + 0.5) / 9007199254740992.0; }

/* -log(u), u in (0, 1), to about 1e-9 (the runtime does not link libm): u = m 2^e with m in
 * [1, 2), log m = 2 atanh((m - 1) / (m + 1)) by its series. */
static double neg_log(double u)
{
    union {
        double d;
        uint64_t b;
    } x = {.d = u};
    int e = (int)((x.b >> 52) & 0x7ff) - 1023;
    x.b = (x.b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
    double z = (x.d - 1) / (x.d + 1), z2 = z * z, term = z, sum = 0;
    for (int k = 1; k < 30; k += 2, term *= z2)
        sum += term / k;
    return -(e * 0.6931471805599453 + 2 * sum);
}

/* 1 - exp(-x), x >= 0: its series below 1, else from exp(-x) = 2^-k exp(-r). */
static double one_minus_exp_neg(double x)
{
    if (x < 1) {
        double term = x, sum = 0;
        for (int k = 1; k < 25; k++, term *= -x / k)
            sum += term;
        return sum;
    }
    if (x > 700)
        return 1;
    int k = (int)(x / 0.6931471805599453);
    double r = x - k * 0.6931471805599453, term = 1, e = 0;
    for (int i = 1; i < 25; i++, term *= -r / (i - 1))
        e += term;
    for (int i = 0; i < k; i++)
        e *= 0.5;
    return 1 - e;
}

/* Sampling: the number of allocations an allocation of `size` stands for (0: not
 * sampled). Sampled points are a Poisson process over the bytes allocated, one per
 * sample_bytes on average; an allocation of s bytes holds one with chance
 * 1 - exp(-s / sample_bytes), and its weight is the inverse, rounded at random so that
 * the estimate stays unbiased. */
static int64_t sample_weight(size_t size)
{
    if (PW_UNLIKELY(countdown == 0))
        countdown = (int64_t)(neg_log(uniform()) * (double)sample_bytes) + 1;
    countdown -= (int64_t)size;
    if (countdown > 0)
        return 0;
    while (countdown <= 0)
        countdown += (int64_t)(neg_log(uniform()) * (double)sample_bytes) + 1;
    double p = one_minus_exp_neg((double)size / (double)sample_bytes);
    double w = p > 0 ? 1.0 / p : 1.0;
    int64_t whole = (int64_t)w;
    return whole + (uniform() < w - (double)whole);
}

static void record_alloc(void *ptr, size_t size, int fn, uintptr_t ra, uintptr_t sp)
{
    if (!ptr || !hdr)
        return;
    int64_t w = 1;
    if (sample_bytes > 0 && (w = sample_weight(size)) == 0)
        return;
    int one = alone(), site = site_of(fn, ra, sp, one); /* alone() first: the key cache too */
    int g = range_of(size);
    int64_t bytes = (int64_t)size * w, tick = heap_ticks();
    if (PW_LIKELY(one)) {
        pw_heap_site_rec *s = &sites[site];
        add64(&s->hist_count[g], w, 1);
        add64(&s->hist_bytes[g], bytes, 1);
        min64(&s->min, (int64_t)size, 1);
        max64(&s->max, (int64_t)size, 1);
        site_live(s, bytes, tick, 1);
        range_live(g, bytes, 1);
        process_live(bytes, 1);
        live_put((uintptr_t)ptr, bytes, tick, site, g, 1);
        alone_end(1);
        return;
    }
    thread_state *t = thread_of();
    int mine = 0;
    pw_heap_site_rec *a = &sites[t ? own_site(t, site, &mine) : site]; /* the sums' record */
    add64(&a->hist_count[g], w, mine);
    add64(&a->hist_bytes[g], bytes, mine);
    min64(&a->min, (int64_t)size, mine);
    max64(&a->max, (int64_t)size, mine);
    live_change(t, site, g, bytes, tick);
    live_put((uintptr_t)ptr, bytes, tick, site, g, 0);
}

/* The end of an object's life at tick `now`. */
static void end_life(const live_entry *e, int64_t now, int freed)
{
    int64_t dt = now - e->tick;
    int g = e->range;
    if (PW_LIKELY(alone())) {
        pw_heap_site_rec *s = &sites[e->site];
        if (freed)
            add64(&s->frees, 1, 1);
        site_live(s, -e->size, now, 1);
        range_live(g, -e->size, 1);
        process_live(-e->size, 1);
        add128(&s->byte_ticks_lo, &s->byte_ticks_hi, e->size, dt, 1);
        add128(&hdr->range_ticks_lo[g], &hdr->range_ticks_hi[g], e->size, dt, 1);
        alone_end(1);
        return;
    }
    thread_state *t = thread_of();
    int mine = 0;
    pw_heap_site_rec *a = &sites[t ? own_site(t, e->site, &mine) : e->site];
    if (freed)
        add64(&a->frees, 1, mine);
    add128(&a->byte_ticks_lo, &a->byte_ticks_hi, e->size, dt, mine);
    if (t && t->rec)
        add128(&t->rec->range_ticks_lo[g], &t->rec->range_ticks_hi[g], e->size, dt, 1);
    else
        add128(&hdr->range_ticks_lo[g], &hdr->range_ticks_hi[g], e->size, dt, 0);
    live_change(t, e->site, g, -e->size, now);
}

static void record_free(void *ptr)
{
    live_entry e;
    if (!ptr || !hdr)
        return;
    if (live_take((uintptr_t)ptr, &e))
        end_life(&e, heap_ticks(), 1);
    else if (sample_bytes == 0)
        add64(&hdr->unseen_frees, 1, 0);
}

/* ---- the wrappers ---- */

PW_REAL_DECLARE(malloc);
PW_REAL_DECLARE(calloc);
PW_REAL_DECLARE(realloc);
PW_REAL_DECLARE(free);
PW_REAL_DECLARE(posix_memalign);
PW_REAL_DECLARE(aligned_alloc);
PW_REAL_DECLARE(memalign);
PW_REAL_DECLARE(valloc);
PW_REAL_DECLARE(pvalloc);
PW_REAL_DECLARE(malloc_usable_size);

/* The caller's return address and a stack address of this call: the call-path key.
 * errno: record_alloc and record_free call nothing that may set it (the coarse clock's
 * vDSO read does not fail) but on their slow paths (unwinding a new call path, mapping a
 * thread's state), which keep it themselves: the wrappers need not save it on every call
 * (a call of __errno_location each way). */
#define HERE (uintptr_t) __builtin_return_address(0), (uintptr_t)__builtin_frame_address(0)
#define RECORD_ALLOC(p, size, fn)                                                                  \
    do {                                                                                           \
        if (PW_UNLIKELY(enabled) && pw_wrap_enter()) {                                             \
            record_alloc(p, size, fn, HERE);                                                       \
            pw_wrap_leave();                                                                       \
        }                                                                                          \
    } while (0)

/* the site of the allocation at (ra, fp), for --place's rules (between alone() and
 * alone_end(), as record_alloc finds it) */
static int place_site(int fn, uintptr_t ra, uintptr_t fp)
{
    int one = alone(), site = site_of(fn, ra, fp, one);
    alone_end(one);
    return site;
}

/* --place (heap_place.c): n bytes from the arena of the rule that matches the size or the
 * call path, else the default allocator's; recorded as any allocation. */
static __attribute__((noinline)) void *placed_alloc(size_t n, int fn, int zero, uintptr_t ra,
                                                    uintptr_t fp)
{
    void *p = NULL;
    int entered = enabled && pw_wrap_enter();
    if (entered)
        PW_KEEP_ERRNO(p = pw_heap_place_alloc(n, zero, place_site(fn, ra, fp)));
    if (!p)
        p = zero ? real_calloc(1, n) : real_malloc(n);
    if (entered) {
        PW_KEEP_ERRNO(record_alloc(p, n, fn, ra, fp));
        pw_wrap_leave();
    }
    return p;
}

/* realloc under --place: either block may be an arena's; across tiers the bytes are
 * copied (up to the old block's usable size and the new size). */
static __attribute__((noinline)) void *placed_realloc(void *old, size_t n, uintptr_t ra,
                                                      uintptr_t fp)
{
    int from = old && pw_heap_place_owns(old), entered = enabled && pw_wrap_enter(), had = 0;
    size_t keep = from ? pw_heap_place_usable(old) : old ? real_malloc_usable_size(old) : 0;
    live_entry e;
    int64_t now = 0;
    void *p = NULL;
    if (entered && n)
        PW_KEEP_ERRNO(p = pw_heap_place_alloc(n, 0, place_site(FN_REALLOC, ra, fp)));
    if (enabled && old && hdr) {
        had = live_take((uintptr_t)old, &e); /* before: the old address may be reused */
        now = heap_ticks();
    }
    if (p) { /* to an arena */
        if (old) {
            memcpy(p, old, keep < n ? keep : n);
            if (from)
                pw_heap_place_free(old);
            else
                real_free(old);
        }
    } else if (from) { /* from an arena to the default allocator (n == 0: freed, as glibc) */
        p = n ? real_malloc(n) : NULL;
        if (p || !n) {
            if (p)
                memcpy(p, old, keep < n ? keep : n);
            pw_heap_place_free(old);
        }
    } else
        p = real_realloc(old, n);
    if (had && !p && n) /* failed: the old block lives on */
        live_put((uintptr_t)old, e.size, e.tick, e.site, e.range, 0);
    else if (had)
        PW_KEEP_ERRNO(end_life(&e, now, 1));
    if (entered) {
        PW_KEEP_ERRNO(record_alloc(p, n, FN_REALLOC, ra, fp));
        pw_wrap_leave();
    }
    return p;
}

/* --place for the aligned allocators (fn: FN_POSIX_MEMALIGN ... FN_PVALLOC; valloc's and
 * pvalloc's align: the page size): n bytes at an address multiple of align from the arena of the rule that
 * matches n or the call path, else the C library's function, which also judges an
 * alignment the arenas do not take (pw_heap_place_takes): it refuses it as it would
 * without perfweave, or serves it, counted as a fallback for its alignment when a rule
 * matches; recorded as any allocation. *rc: posix_memalign's return code. */
static __attribute__((noinline)) void *placed_aligned(int fn, size_t align, size_t n, int *rc,
                                                      uintptr_t ra, uintptr_t fp)
{
    size_t size;
    int takes = pw_heap_place_takes(align, n, fn == FN_POSIX_MEMALIGN, fn == FN_PVALLOC, &size);
    int entered = enabled && pw_wrap_enter(), site = -1;
    void *p = NULL;
    *rc = 0;
    if (entered) {
        site = place_site(fn, ra, fp);
        if (takes)
            PW_KEEP_ERRNO(p = pw_heap_place_aligned(n, size, align, site));
    }
    if (!p) {
        switch (fn) {
        case FN_POSIX_MEMALIGN:
            *rc = real_posix_memalign(&p, align, n);
            break;
        case FN_ALIGNED_ALLOC:
            p = real_aligned_alloc(align, n);
            break;
        case FN_MEMALIGN:
            p = real_memalign(align, n);
            break;
        case FN_VALLOC:
            p = real_valloc(n);
            break;
        default:
            p = real_pvalloc(n);
        }
        if (*rc)
            p = NULL;
        if (p && entered && !takes)
            PW_KEEP_ERRNO(pw_heap_place_unaligned(n, site));
    }
    if (entered) {
        PW_KEEP_ERRNO(record_alloc(p, n, fn, ra, fp));
        pw_wrap_leave();
    }
    return p;
}

PW_EXPORT void *malloc(size_t n)
{
    if (PW_LIKELY(pass))
        return real_malloc(n);
    if (PW_UNLIKELY(pw_wrap_resolving)) {
        add64(hdr ? &hdr->bootstrap : &(int64_t){0}, 1, 0);
        bootstrapped = 1;
        return pw_wrap_bootstrap_alloc(n);
    }
    PW_REAL_RESOLVE(malloc);
    if (PW_UNLIKELY(pw_heap_placing))
        return placed_alloc(n, FN_MALLOC, 0, HERE);
    void *p = real_malloc(n);
    RECORD_ALLOC(p, n, FN_MALLOC);
    return p;
}

PW_EXPORT void *calloc(size_t n, size_t size)
{
    if (PW_LIKELY(pass))
        return real_calloc(n, size);
    if (PW_UNLIKELY(pw_wrap_resolving)) {
        size_t total;
        bootstrapped = 1;
        return __builtin_mul_overflow(n, size, &total) ? NULL : pw_wrap_bootstrap_alloc(total);
    }
    PW_REAL_RESOLVE(calloc);
    size_t total; /* --place judges a calloc by its total size */
    if (PW_UNLIKELY(pw_heap_placing) && !__builtin_mul_overflow(n, size, &total))
        return placed_alloc(total, FN_CALLOC, 1, HERE);
    void *p = real_calloc(n, size);
    RECORD_ALLOC(p, n * size, FN_CALLOC);
    return p;
}

PW_EXPORT void free(void *p)
{
    if (PW_LIKELY(pass == 1)) {
        real_free(p); /* free(NULL) passes on: it does nothing there either */
        return;
    }
    if (PW_UNLIKELY(!p || (bootstrapped && pw_wrap_bootstrap_owns(p))))
        return;
    if (PW_UNLIKELY(pw_heap_placing) && pw_heap_place_owns(p)) {
        if (PW_UNLIKELY(enabled))
            PW_KEEP_ERRNO(record_free(p));
        pw_heap_place_free(p);
        return;
    }
    PW_REAL_RESOLVE(free);
    if (PW_UNLIKELY(enabled))
        record_free(p); /* before the real free: its address may be reused */
    real_free(p);
}

PW_EXPORT void *realloc(void *old, size_t n)
{
    if (PW_LIKELY(pass == 1))
        return real_realloc(old, n);
    if (PW_UNLIKELY(pw_wrap_resolving || (bootstrapped && pw_wrap_bootstrap_owns(old)))) {
        bootstrapped |= pw_wrap_resolving;
        void *p = pw_wrap_resolving ? pw_wrap_bootstrap_alloc(n) : malloc(n);
        if (p && old) { /* a bootstrap block's size is not kept: copy what may be there */
            size_t room = pw_wrap_bootstrap_room(old);
            memcpy(p, old, room && room < n ? room : n);
        }
        return p;
    }
    PW_REAL_RESOLVE(realloc);
    if (PW_UNLIKELY(pw_heap_placing))
        return placed_realloc(old, n, HERE);
    live_entry e;
    int had = 0;
    int64_t now = 0;
    if (PW_UNLIKELY(enabled) && old && hdr) {
        had = live_take((uintptr_t)old, &e); /* before: the old address may be reused */
        now = heap_ticks();
    }
    void *p = real_realloc(old, n);
    if (had && !p && n) { /* failed: the old block lives on */
        live_put((uintptr_t)old, e.size, e.tick, e.site, e.range, 0);
        return p;
    }
    if (had)
        PW_KEEP_ERRNO(end_life(&e, now, 1));
    RECORD_ALLOC(p, n, FN_REALLOC);
    return p;
}

PW_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    PW_REAL_RESOLVE(posix_memalign);
    if (PW_UNLIKELY(pw_heap_placing)) {
        int rc;
        void *p = placed_aligned(FN_POSIX_MEMALIGN, align, n, &rc, HERE);
        if (rc == 0)
            *out = p;
        return rc;
    }
    int rc = real_posix_memalign(out, align, n);
    if (rc == 0)
        RECORD_ALLOC(*out, n, FN_POSIX_MEMALIGN);
    return rc;
}

PW_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    PW_REAL_RESOLVE(aligned_alloc);
    if (PW_UNLIKELY(pw_heap_placing))
        return placed_aligned(FN_ALIGNED_ALLOC, align, n, &(int){0}, HERE);
    void *p = real_aligned_alloc(align, n);
    RECORD_ALLOC(p, n, FN_ALIGNED_ALLOC);
    return p;
}

PW_EXPORT void *memalign(size_t align, size_t n)
{
    PW_REAL_RESOLVE(memalign);
    if (PW_UNLIKELY(pw_heap_placing))
        return placed_aligned(FN_MEMALIGN, align, n, &(int){0}, HERE);
    void *p = real_memalign(align, n);
    RECORD_ALLOC(p, n, FN_MEMALIGN);
    return p;
}

PW_EXPORT void *valloc(size_t n)
{
    PW_REAL_RESOLVE(valloc);
    if (PW_UNLIKELY(pw_heap_placing))
        return placed_aligned(FN_VALLOC, (size_t)getpagesize(), n, &(int){0}, HERE);
    void *p = real_valloc(n);
    RECORD_ALLOC(p, n, FN_VALLOC);
    return p;
}

PW_EXPORT void *pvalloc(size_t n)
{
    PW_REAL_RESOLVE(pvalloc);
    if (PW_UNLIKELY(pw_heap_placing))
        return placed_aligned(FN_PVALLOC, (size_t)getpagesize(), n, &(int){0}, HERE);
    void *p = real_pvalloc(n);
    RECORD_ALLOC(p, n, FN_PVALLOC);
    return p;
}

PW_EXPORT size_t malloc_usable_size(void *p)
{
    if (PW_UNLIKELY(!p || (bootstrapped && pw_wrap_bootstrap_owns(p))))
        return 0;
    if (PW_UNLIKELY(pw_heap_placing) && pw_heap_place_owns(p))
        return pw_heap_place_usable(p);
    PW_REAL_RESOLVE(malloc_usable_size);
    return real_malloc_usable_size(p);
}

/* ---- the store ---- */

static size_t round_page(size_t n) { return (n + 4095) / 4096 * 4096; }

static void *private_map(size_t len)
{
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

/* heap/HOST.PID.pwheap made and mapped; the parent's sites' paths copied when from. */
static int make_store(int64_t parent, const pw_heap_site_rec *from, int nsites,
                      const pw_heap_object_rec *from_objects, int nobjects, const char *from_place)
{
    char path[4300], pid[24];
    int k = pw_fmt_int(pid, (int64_t)getpid());
    pid[k] = 0;
    if (pw_experiment_path(path, sizeof path, "heap") != 0)
        return -1;
    mkdir(path, 0777);
    if (pw_experiment_path(path, sizeof path, "heap/", pw_hostname, ".", pid, ".pwheap") != 0)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int max_sites = pw_opt.heap_max_sites > 0 ? (int)pw_opt.heap_max_sites : 4096;
    size_t hdr_len = round_page(sizeof(pw_heap_header_rec));
    size_t objects_len = round_page(sizeof(pw_heap_object_rec) * MAX_OBJECTS);
    size_t sites_len = round_page(sizeof(pw_heap_site_rec) * (size_t)max_sites);
    size_t threads_len = round_page(sizeof(pw_heap_thread_rec) * MAX_THREADS);
    size_t place_len = pw_heap_place_len(max_sites);
    size_t len =
        hdr_len + objects_len + sites_len + threads_len + place_len + pw_heap_live_len(max_sites);
    if (ftruncate(fd, (off_t)len) != 0 || pw_reserve_disk(fd, 0, len) != 0) {
        close(fd);
        unlink(path);
        return -1;
    }
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        unlink(path);
        return -1;
    }
    pw_heap_header_rec *h = (pw_heap_header_rec *)m;
    objects = (pw_heap_object_rec *)(m + hdr_len);
    sites = (pw_heap_site_rec *)(m + hdr_len + objects_len);
    threads = (pw_heap_thread_rec *)(m + hdr_len + objects_len + sites_len);
#ifdef MADV_POPULATE_WRITE
    /* the loaded objects' part now (64 KiB): not a page fault of the file at the first site */
    madvise(objects, objects_len, MADV_POPULATE_WRITE);
#endif
    h->version = PW_HEAP_VERSION;
    h->rank = -1;
    h->pid = getpid();
    h->parent_pid = parent;
    h->state = -1;
    h->max_sites = max_sites;
    h->max_objects = MAX_OBJECTS;
    h->live_slots = (int32_t)(live_mask + 1);
    h->sample_bytes = sample_bytes;
    h->t_start = h->t_end = pw_now();
    h->tick_start = heap_ticks();
    h->tick_res_ns = coarse ? tick_res_ns : 0;
    h->ns_per_tick = heap_ns_per_tick();
    h->publish_bytes = PUBLISH_BYTES;
    h->recorders = recorders;
    h->max_threads = MAX_THREADS;
    if (from) { /* the sites keep their indices (the key cache names them), not counts */
        memcpy(objects, from_objects, sizeof *objects * (size_t)nobjects);
        h->nobjects = nobjects;
        for (int i = 0; i < nsites; i++) {
            pw_heap_site_rec *r = &sites[i];
            r->path_hash = from[i].path_hash;
            r->depth = from[i].depth;
            r->fn = from[i].fn;
            memcpy(r->object, from[i].object, sizeof r->object);
            memcpy(r->offset, from[i].offset, sizeof r->offset);
            r->min = INT64_MAX;
            r->first_ns = from[i].first_ns;
        }
        h->nsites = nsites;
    } else {
        sites[0].path_hash = 1; /* site 0: sites past max_sites, no frames */
        sites[0].min = INT64_MAX;
        h->nsites = 1;
    }
    place_part = m + hdr_len + objects_len + sites_len + threads_len;
    pw_heap_place_attach(h, place_part, max_sites, from_place, sites, objects);
    /* buckets no narrower than the lifetimes' clock's tick, nor than 1 ms */
    int64_t ms = coarse ? 1000000 : (int64_t)(1e6 / heap_ns_per_tick());
    pw_heap_live_attach(h, place_part + place_len, max_sites, tick_res_ns > ms ? tick_res_ns : ms,
                        coarse ? tick_res_ns : 0);
    memcpy(store_path, path, strlen(path) + 1);
    map_len = len;
    __atomic_store_n(&h->magic, PW_HEAP_MAGIC_NUMBER, __ATOMIC_RELEASE);
    hdr = h;
    return 0;
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

static void resolve_all(void)
{
    PW_REAL_RESOLVE(malloc);
    PW_REAL_RESOLVE(calloc);
    PW_REAL_RESOLVE(realloc);
    PW_REAL_RESOLVE(free);
    PW_REAL_RESOLVE(posix_memalign);
    PW_REAL_RESOLVE(aligned_alloc);
    PW_REAL_RESOLVE(memalign);
    PW_REAL_RESOLVE(valloc);
    PW_REAL_RESOLVE(pvalloc);
    PW_REAL_RESOLVE(malloc_usable_size);
}

static void start(void)
{
    resolve_all();
    if (!pw_opt.heap || !pw_experiment_dir()) {
        pass = 1 + bootstrapped;
        return;
    }
    sample_bytes = pw_opt.heap_sample_bytes > 0 ? pw_opt.heap_sample_bytes : 0;
    size_t nlive = pow2_at_least(pw_opt.heap_max_live > 0 ? (size_t)pw_opt.heap_max_live : 65536);
    size_t max_sites = pw_opt.heap_max_sites > 0 ? (size_t)pw_opt.heap_max_sites : 4096;
    live_mask = 2 * nlive - 1; /* at most half full */
    key_mask = 4 * max_sites - 1;
    key_mask = pow2_at_least(key_mask + 1) - 1;
    site_bits = pow2_at_least(max_sites + 1) - 1;
    path_mask = pow2_at_least(2 * max_sites) - 1;
    pw_wrap_depth++; /* the module's own calls are not the program's */
    live = private_map(sizeof *live * (live_mask + 1));
    keys = private_map(sizeof *keys * (key_mask + 1));
    by_path = private_map(sizeof *by_path * (path_mask + 1));
    ras = private_map(sizeof *ras * RA_SLOTS);
#ifdef MADV_POPULATE_WRITE
    /* the tables a new call path looks in, their pages now (128 + 32 + 64 KiB by default):
     * not a page fault (1-3 us under KVM) at many a new key, path or return address */
    if (keys)
        madvise(keys, sizeof *keys * (key_mask + 1), MADV_POPULATE_WRITE);
    if (by_path)
        madvise(by_path, sizeof *by_path * (path_mask + 1), MADV_POPULATE_WRITE);
    if (ras)
        madvise(ras, sizeof *ras * RA_SLOTS, MADV_POPULATE_WRITE);
#endif
    ts_key_ok = pthread_key_create(&ts_key, thread_done) == 0;
    void *bt[4];
    backtrace(bt, 4);      /* loads libgcc's unwinder now, not inside the first allocation */
    pw_heap_place_start(); /* what fails there is said, and nothing is placed */
    struct timespec res;
    coarse = clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0 &&
             res.tv_nsec <= PW_HEAP_COARSE_MAX_NS;
    tick_res_ns = coarse ? res.tv_nsec : 0;
    void *vdso = dlopen("linux-vdso.so.1", RTLD_NOLOAD | RTLD_LAZY); /* glibc's name for it */
    if (vdso)
        *(void **)&vdso_gettime = dlsym(vdso, "__vdso_clock_gettime");
    if (vdso_gettime && vdso_gettime(CLOCK_MONOTONIC_COARSE, &res) != 0)
        vdso_gettime = NULL;
    int ok = live && keys && by_path && ras && pw_heap_unwind_init() == 0 &&
             make_store(0, NULL, 0, NULL, 0, NULL) == 0;
    register_fence();
    pw_wrap_depth--;
    if (!ok) {
        pw_log("heap: cannot make the heap record in %s/heap: no heap profile",
               pw_experiment_dir());
        pass = 1 + bootstrapped;
        return;
    }
    __atomic_store_n(&enabled, 1, __ATOMIC_RELEASE);
}

/* In a child of fork: a record of its own with its parent's sites (not their counts); the
 * parent's live objects are the child's too, but not counted. */
static void in_child(void)
{
    if (!enabled)
        return;
    pw_heap_header_rec *old = hdr;
    pw_heap_site_rec *old_sites = sites;
    pw_heap_object_rec *old_objects = objects;
    size_t old_len = map_len;
    hdr = NULL;
    countdown = 0;
    /* one thread now: the one recording thread, if any, is this one */
    recorders = role == 1;
    role = role == 1;
    owner_busy = role_lock = site_lock = 0;
    many = 0;
    ts = NULL; /* the parent's unpublished changes are not the child's (its map stays) */
    register_fence();
    madvise(live, sizeof *live * (live_mask + 1), MADV_DONTNEED); /* zero pages */
    pw_wrap_depth++;
    pw_heap_place_child();
    int ok =
        make_store(old->pid, old_sites, old->nsites, old_objects, old->nobjects, place_part) == 0;
    pw_wrap_depth--;
    munmap(old, old_len);
    if (!ok)
        enabled = 0;
}

/* The process ends: the objects still live are integrated up to now (not counted as
 * freed), the sums written, the header says how it ended. Async-signal-safe. */
static int dump(int state, int in_signal)
{
    if (!enabled || !hdr)
        return 0;
    int64_t now = heap_ticks();
    /* with several recording threads the published live bytes lack their unpublished
     * changes: the live spans end on the published ones, the final bytes are the table's */
    int all = __atomic_load_n(&many, __ATOMIC_RELAXED);
    int64_t dropped = 0;
    for (int s = 0; s < hdr->nsites; s++) {
        pw_heap_site_rec *r = &sites[s];
        if (r->live > 0 && now > r->live_since)
            r->live_ticks += now - r->live_since;
        if (r->live > 0) /* its timeline: the interval open at the end closes here */
            pw_heap_live_end(s, r->live_since, now, in_signal);
        if (all)
            r->live = 0;
        int64_t c = 0, b = 0;
        for (int g = 0; g < PW_HEAP_RANGES; g++) {
            c += r->hist_count[g];
            b += r->hist_bytes[g];
        }
        r->count = c;
        r->bytes = b;
        if (r->depth == 0) /* site 0 and the threads' records of it */
            dropped += c;
    }
    if (all) {
        memset(hdr->range_live, 0, sizeof hdr->range_live);
        hdr->live_bytes = 0;
    }
    for (size_t i = 0; i <= live_mask; i++) {
        live_entry *e = &live[i];
        uintptr_t p = __atomic_load_n(&e->ptr, __ATOMIC_ACQUIRE);
        if (p == 0 || p == TOMB)
            continue;
        live_entry copy = *e;
        add128(&sites[copy.site].byte_ticks_lo, &sites[copy.site].byte_ticks_hi, copy.size,
               now - copy.tick, 0);
        add128(&hdr->range_ticks_lo[copy.range], &hdr->range_ticks_hi[copy.range], copy.size,
               now - copy.tick, 0);
        if (all) {
            site_live(&sites[copy.site], copy.size, now, 0);
            range_live(copy.range, copy.size, 0);
            process_live(copy.size, 0);
        }
    }
    hdr->dropped_sites = dropped;
    pw_heap_place_verify();
    hdr->rank = pw_rank;
    hdr->ns_per_tick = heap_ns_per_tick();
    hdr->t_end = pw_now();
    hdr->state = state;
    enabled = 0; /* what the program does after this is not the run's */
    return 0;
}

const pw_module pw_module_heap = {
    .name = "heap",
    .version = PW_HEAP_VERSION,
    .start = start,
    .dump = dump,
    .fork_child = in_child,
};
