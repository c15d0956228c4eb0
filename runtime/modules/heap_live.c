/*
 * Each heap site's live timeline (heap_live.h; docs/heap.md "When a site's objects were
 * live"; the layout: format/heap.h heap_live). Bucket j of every site covers the ticks
 * [tick_start + j 2^L, tick_start + (j + 1) 2^L) of the lifetimes' clock, L the header's
 * live_log2: the narrowest power of two of at least the clock's tick (or 1 ms) at the
 * start, one more at each fold. A mark past the last bucket folds every site's bitmap,
 * bucket j of the new width being buckets 2j and 2j + 1 of the old, until it fits: a run of
 * any length keeps PW_HEAP_LIVE_BUCKETS buckets, its buckets the narrowest power of two
 * that holds it.
 *
 * Marks and folds are made under one lock, on the mapped record (SIGKILL keeps what was
 * marked): bits are set only where a bucket is not yet marked, which the site's `known`
 * word (a run of base buckets surely marked) tells without the lock, so the lock is taken
 * once per new bucket of a site, not per transition. A record killed while folding has
 * some sites folded and some not: header.live_folding says so and the reader drops them.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "heap_live.h"

uint64_t *pw_heap_live_known;
int64_t pw_heap_live_t0, pw_heap_live_slack;
int pw_heap_live_base;

static pw_heap_header_rec *hdr;
static pw_heap_live_rec *bits;
static int lock;

#define WORDS (PW_HEAP_LIVE_BUCKETS / 64)

size_t pw_heap_live_len(int max_sites)
{
    return (sizeof(pw_heap_live_rec) * (size_t)max_sites + 4095) / 4096 * 4096;
}

void pw_heap_live_attach(pw_heap_header_rec *h, char *at, int max_sites, int64_t min_ticks,
                         int64_t slack)
{
    size_t known_len = sizeof *pw_heap_live_known * (size_t)max_sites;
    if (!pw_heap_live_known) {
        void *m = mmap(NULL, known_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return; /* no timelines: header.live_at stays 0 */
        pw_heap_live_known = m;
    } else /* a forked child: its own record, empty */
        memset(pw_heap_live_known, 0, known_len);
    lock = 0;
    hdr = h;
    bits = (pw_heap_live_rec *)at;
    int base = 0;
    while (base < 62 && ((int64_t)1 << base) < min_ticks)
        base++;
    pw_heap_live_base = base;
    pw_heap_live_t0 = h->tick_start;
    pw_heap_live_slack = slack;
    h->live_at = at - (char *)h;
    h->live_buckets = PW_HEAP_LIVE_BUCKETS;
    h->live_log2 = base;
    h->live_slack = slack;
}

/* The bits of pairs of buckets ORed, packed into the low half. */
static uint64_t fold_word(uint64_t x)
{
    x = (x | (x >> 1)) & 0x5555555555555555ULL;
    x = (x | (x >> 1)) & 0x3333333333333333ULL;
    x = (x | (x >> 2)) & 0x0F0F0F0F0F0F0F0FULL;
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FFULL;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFULL;
    return (x | (x >> 16)) & 0x00000000FFFFFFFFULL;
}

/* Every site's buckets twice as wide. Under the lock. */
static void fold(void)
{
    __atomic_store_n(&hdr->live_folding, 1, __ATOMIC_RELEASE);
    int n = __atomic_load_n(&hdr->nsites, __ATOMIC_ACQUIRE);
    for (int s = 0; s < n; s++) {
        uint64_t *w = bits[s].bits;
        for (int k = 0; k < WORDS / 2; k++)
            w[k] = fold_word(w[2 * k]) | fold_word(w[2 * k + 1]) << 32;
        memset(w + WORDS / 2, 0, sizeof *w * (WORDS / 2));
    }
    __atomic_store_n(&hdr->live_log2, hdr->live_log2 + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&hdr->live_folding, 0, __ATOMIC_RELEASE);
}

static int take_lock(int in_signal)
{
    /* in a signal handler the holder may be the interrupted thread itself: bounded */
    for (long tries = 0; __atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE); tries++)
        if (in_signal && tries > 1000000)
            return 0;
    return 1;
}

void pw_heap_live_mark(int s, int64_t from, int64_t to, int in_signal)
{
    if (!take_lock(in_signal)) {
        __atomic_fetch_add(&hdr->live_unclosed, 1, __ATOMIC_RELAXED);
        return;
    }
    int level = hdr->live_log2;
    uint64_t a = (uint64_t)(from > pw_heap_live_t0 ? from - pw_heap_live_t0 : 0) >> level;
    uint64_t b = (uint64_t)(to > pw_heap_live_t0 ? to - pw_heap_live_t0 : 0) >> level;
    for (; b >= PW_HEAP_LIVE_BUCKETS && level < 62; level++, a >>= 1, b >>= 1)
        fold();
    uint64_t *w = bits[s].bits;
    for (uint64_t k = a / 64; k <= b / 64 && k < WORDS; k++) {
        uint64_t m = ~0ULL;
        if (k == a / 64)
            m &= ~0ULL << (a % 64);
        if (k == b / 64)
            m &= ~0ULL >> (63 - b % 64);
        w[k] |= m;
    }
    /* the run of base buckets now known marked, joined to the one known before when they
     * touch (all of it stays marked: bits are never cleared, a fold only widens them) */
    int up = level - pw_heap_live_base;
    uint64_t lo = up < 32 ? a << up : UINT32_MAX, hi = up < 32 ? (b + 1) << up : UINT32_MAX;
    uint64_t old = pw_heap_live_known[s];
    uint64_t olo = old >> 32, ohi = (uint32_t)old;
    if (olo < ohi && lo <= ohi && hi >= olo) {
        lo = lo < olo ? lo : olo;
        hi = hi > ohi ? hi : ohi;
    }
    if (hi < UINT32_MAX)
        __atomic_store_n(&pw_heap_live_known[s], lo << 32 | hi, __ATOMIC_RELAXED);
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}
