/*
 * Keyed call-site tables (keyed.h): a module's per-thread tables of aggregates keyed by
 * (key, return address), open addressing with linear probing, bounded distinct sites
 * with an overflow slot per key family, and the merge of all threads' tables for a dump.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>

#include "keyed.h"

static size_t pow2_at_least(size_t n)
{
    size_t p = 64;
    while (p < n)
        p <<= 1;
    return p;
}

size_t pw_keyed_slots(size_t sites, size_t families)
{
    /* room for every distinct site up to the bound and the overflow slots, at most half
     * full */
    return pow2_at_least(2 * (sites + families));
}

static pw_keyed_slot *slot_at(const pw_keyed_tab *t, size_t i)
{
    return (pw_keyed_slot *)(t->slots + i * t->set->slot_size);
}

static uintptr_t *ra_of(const pw_keyed_tab *t, pw_keyed_slot *s)
{
    return (uintptr_t *)((char *)s + t->ra_at);
}

static int64_t *count_of(const pw_keyed_tab *t, pw_keyed_slot *s)
{
    return (int64_t *)((char *)s + t->count_at);
}

/* the same, read from a slot not written */
static uintptr_t ra_in(const pw_keyed_tab *t, const pw_keyed_slot *s)
{
    return *(const uintptr_t *)((const char *)s + t->ra_at);
}

static int64_t count_in(const pw_keyed_tab *t, const pw_keyed_slot *s)
{
    return *(const int64_t *)((const char *)s + t->count_at);
}

void pw_keyed_init(pw_keyed_tab *t, const pw_keyed *k, void *slots, size_t nslots)
{
    *t = (pw_keyed_tab){.set = k,
                        .nslots = nslots,
                        .max_used = k->max_sites,
                        .ra_at = k->ra_at ? k->ra_at : offsetof(pw_keyed_slot, ra),
                        .count_at = k->count_at ? k->count_at : offsetof(pw_keyed_slot, count),
                        .slots = slots};
}

/* A zero-filled table of n slots (pw_alloc'ed, not on any list). */
static pw_keyed_tab *table(const pw_keyed *k, size_t n, size_t max_used)
{
    size_t head = (sizeof(pw_keyed_tab) + k->extra_size + 63) & ~(size_t)63;
    size_t bytes = head + n * k->slot_size;
    pw_keyed_tab *t = pw_alloc(bytes);
    if (t == NULL)
        return NULL;
    pw_keyed_init(t, k, (char *)t + head, n);
    t->max_used = max_used;
    t->bytes = bytes;
    return t;
}

pw_keyed_tab *pw_keyed_create(pw_keyed *k)
{
    int saved = errno; /* the wrapped call's */
    pw_keyed_tab *t = table(k, pw_keyed_slots(k->max_sites, k->families), k->max_sites);
    errno = saved;
    if (t == NULL)
        return NULL;
    pw_keyed_tab *head = __atomic_load_n(&k->tabs, __ATOMIC_RELAXED);
    do
        t->next = head;
    while (!__atomic_compare_exchange_n(&k->tabs, &head, t, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    return t;
}

/* The slot of (key, ra); a free one is made when make, else NULL. */
static pw_keyed_slot *probe(pw_keyed_tab *t, uint64_t key, uintptr_t ra, int make)
{
    size_t mask = t->nslots - 1;
    for (size_t i = pw_keyed_hash(key, ra) & mask;; i = (i + 1) & mask) {
        pw_keyed_slot *s = slot_at(t, i);
        if (*count_of(t, s) == 0) {
            if (!make)
                return NULL;
            s->key = key;
            *ra_of(t, s) = ra;
            if (t->set->fresh)
                t->set->fresh(s);
            t->used++;
            return s;
        }
        if (s->key == key && *ra_of(t, s) == ra)
            return s;
    }
}

pw_keyed_slot *pw_keyed_get(pw_keyed_tab *t, uint64_t key, uintptr_t ra)
{
    pw_keyed_slot *s = probe(t, key, ra, t->used < t->max_used);
    if (s != NULL)
        return s;
    t->dropped++;
    if (t->set->families == 0)
        return NULL;
    int shift = t->set->family_shift;
    return probe(t, key >> shift << shift, 0, 1); /* room: 2 x (bound + families) */
}

pw_keyed_tab *pw_keyed_tabs(pw_keyed *k) { return __atomic_load_n(&k->tabs, __ATOMIC_ACQUIRE); }

pw_keyed_slot *pw_keyed_next(const pw_keyed_tab *t, size_t *i)
{
    for (; *i < t->nslots; ++*i) {
        pw_keyed_slot *s = slot_at(t, *i);
        if (*count_of(t, s) != 0)
            return ++*i, s;
    }
    return NULL;
}

pw_keyed_tab *pw_keyed_merge(pw_keyed *k, int *threads, int64_t *dropped)
{
    size_t used = 0;
    for (pw_keyed_tab *t = pw_keyed_tabs(k); t; t = t->next)
        used += t->used;
    size_t n = pow2_at_least(2 * used + 2);
    pw_keyed_tab *m = table(k, n, n);
    if (m == NULL)
        return NULL;
    for (pw_keyed_tab *t = pw_keyed_tabs(k); t; t = t->next) {
        int any = 0;
        size_t i = 0;
        for (const pw_keyed_slot *s; (s = pw_keyed_next(t, &i)) != NULL;) {
            any = 1;
            pw_keyed_slot *d = probe(m, s->key, ra_in(t, s), 1);
            k->add(d, s);
            *count_of(m, d) += count_in(t, s);
        }
        *threads += any;
        *dropped += t->dropped;
    }
    return m;
}

void pw_keyed_free(pw_keyed_tab *t)
{
    if (t && t->bytes)
        pw_release(t, t->bytes);
}

void pw_keyed_forget(pw_keyed *k)
{
    pw_keyed_tab *t = __atomic_exchange_n(&k->tabs, NULL, __ATOMIC_ACQ_REL);
    while (t != NULL) {
        pw_keyed_tab *next = t->next;
        pw_keyed_free(t);
        t = next;
    }
}
