/*
 * Each heap site's live timeline (heap_live.c; docs/heap.md "When a site's objects were
 * live"): a bitmap of PW_HEAP_LIVE_BUCKETS fixed-width time buckets per site in the mapped
 * record (format/heap.h heap_live), a bucket marked when some of the site's objects may
 * have been live during it. heap.c calls these where a site's live bytes go from 0 to more
 * (pw_heap_live_open) and back to 0 (pw_heap_live_close), and at the dump for the sites
 * still live (pw_heap_live_end); nothing else of heap.c knows the timelines.
 *
 * The calls cost only at those transitions, and a transition inside buckets already marked
 * is a read: the thread-shared `known` word of the site (a run of base buckets known to be
 * marked, never wrong: bits are never cleared and a fold only widens them) answers it with
 * two compares; only a mark that sets bits (once per bucket and site) takes the lock.
 */
#ifndef PW_MODULES_HEAP_LIVE_H
#define PW_MODULES_HEAP_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "perfweave/format/heap.h"

/* Per site: base buckets lo (high 32 bits) .. hi (low 32 bits, excluded) known marked. */
extern uint64_t *pw_heap_live_known;
extern int64_t pw_heap_live_t0;    /* the lifetimes' clock at bucket 0 (header tick_start) */
extern int64_t pw_heap_live_slack; /* ticks a close is extended by (the coarse clock's tick) */
extern int pw_heap_live_base;      /* log2 of a base bucket's ticks */

/* Bytes the timeline part adds to a record of max_sites sites. */
size_t pw_heap_live_len(int max_sites);
/* The timeline part at `at` (a multiple of 4096 bytes into the record) of a new record
 * (also a forked child's: its timelines start empty). min_ticks: the narrowest bucket worth
 * having (the lifetimes' clock's tick, or 1 ms); slack: the clock's tick in ticks (0 for a
 * clock read exactly). */
void pw_heap_live_attach(pw_heap_header_rec *h, char *at, int max_sites, int64_t min_ticks,
                         int64_t slack);
/* Marks buckets from..to of site s (ticks of the lifetimes' clock) under the lock; in a
 * signal handler a lock held elsewhere is waited for briefly, then the mark is counted in
 * header.live_unclosed instead. */
void pw_heap_live_mark(int s, int64_t from, int64_t to, int in_signal);

static inline uint32_t pw_heap_live_index(int64_t t)
{
    int64_t b = (t - pw_heap_live_t0) >> pw_heap_live_base;
    return b < 0 ? 0 : b >= (int64_t)UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)b;
}

/* 1: base buckets of from..to are all marked for site s (a read of one word). */
static inline int pw_heap_live_marked(int s, int64_t from, int64_t to)
{
    uint64_t k = __atomic_load_n(&pw_heap_live_known[s], __ATOMIC_RELAXED);
    return (uint32_t)(k >> 32) <= pw_heap_live_index(from) && pw_heap_live_index(to) < (uint32_t)k;
}

/* Site s's live bytes rose from 0 at tick `now`: its bucket marked (so that a process
 * killed before the close keeps when the interval opened). */
static inline void pw_heap_live_open(int s, int64_t now)
{
    if (pw_heap_live_known && !pw_heap_live_marked(s, now, now))
        pw_heap_live_mark(s, now, now, 0);
}

/* Site s's live bytes fell to 0 at tick `now`, having risen at `since`: every bucket from
 * since's to the one of now + the clock's tick (a coarse time is the last tick before the
 * event) marked. */
static inline void pw_heap_live_close(int s, int64_t since, int64_t now)
{
    int64_t to = now + pw_heap_live_slack;
    if (since <= 0 || since > now) /* an opening not yet published (a race): from now */
        since = now;
    if (pw_heap_live_known && !pw_heap_live_marked(s, since, to))
        pw_heap_live_mark(s, since, to, 0);
}

/* At the dump: site s, live since `since`, closed at `now` (the process's end). */
static inline void pw_heap_live_end(int s, int64_t since, int64_t now, int in_signal)
{
    if (pw_heap_live_known)
        pw_heap_live_mark(s, since, now + pw_heap_live_slack, in_signal);
}

#endif
