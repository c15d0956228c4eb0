/*
 * Per-thread call-site tables: open addressing on (function, return address,
 * hash of deeper frames). A thread only ever writes its own table, so the hot
 * path takes no lock and no atomic. The number of distinct sites is bounded by
 * --max-callsites; beyond it calls are folded into one overflow site per
 * function (return address 0) and counted in `dropped`.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "pw.h"

int pw_nevents;
const char *pw_event_names[PW_MAX_EVENTS + 1];

static pw_sitetab *all_tables;
static int ntables;
PW_TLS pw_sitetab *pw_self_table;

void *pw_alloc(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void pw_release(void *p, size_t n)
{
    if (p)
        munmap(p, n);
}

pw_sitetab *pw_sitetabs(void) { return __atomic_load_n(&all_tables, __ATOMIC_ACQUIRE); }
int pw_sitetabs_count(void) { return __atomic_load_n(&ntables, __ATOMIC_RELAXED); }

void pw_sitetabs_forget(void)
{
    /* the child has one thread: the tables stay mapped (copy-on-write, never touched) */
    __atomic_store_n(&all_tables, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&ntables, 0, __ATOMIC_RELAXED);
    pw_self_table = NULL;
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 64;
    while (p < n)
        p <<= 1;
    return p;
}

pw_sitetab *pw_sitetab_create(void)
{
    size_t entry = sizeof(pw_site) + (size_t)(pw_opt.callsite_depth - 1) * sizeof(uintptr_t);
    entry = (entry + 7) & ~(size_t)7;
    size_t events_offset = entry;
    if (pw_nevents) /* inside and before per event, then the wall time each covers */
        entry += (2 * (size_t)pw_nevents + 2) * sizeof(int64_t);
    /* room for every distinct site up to the bound, plus one overflow site per function
     * (a module may register its functions after this table is made), at most half full */
    size_t nslots = pow2_at_least(2 * ((size_t)pw_opt.max_callsites + PW_MAX_FUNCTIONS));
    size_t bytes = sizeof(pw_sitetab) + nslots * entry;
    char *mem = pw_alloc(bytes); /* zero-filled; untouched pages cost nothing */
    if (!mem)
        return NULL;
    pw_sitetab *t = (pw_sitetab *)mem;
    t->nslots = nslots;
    t->entry_size = entry;
    t->events_offset = events_offset;
    t->bytes = bytes;
    t->slots = mem + sizeof(pw_sitetab);
    t->next = __atomic_load_n(&all_tables, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&all_tables, &t->next, t, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
    __atomic_fetch_add(&ntables, 1, __ATOMIC_RELAXED);
    pw_self_table = t;
    pw_thread_begin(); /* a thread's first recorded call: the modules' per-thread start */
    return t;
}

int64_t *pw_sitetab_hist(pw_sitetab *t, const pw_functions *f)
{
    static int failed; /* once out of memory, not tried on every call */
    if (!pw_opt.histograms || !f->hist || f->n <= 0 || failed)
        return NULL;
    size_t bytes = (size_t)f->n * PW_HIST_BUCKETS * 3 * sizeof(int64_t);
    int64_t *h = pw_alloc(bytes);
    if (!h) {
        failed = 1;
        return NULL;
    }
    t->hist_bytes += bytes;
    __atomic_store_n(&t->hist[f->index], h, __ATOMIC_RELEASE); /* read by the dump */
    return h;
}

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static uint64_t frames_hash(const uintptr_t *frames, int n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < n; i++)
        h = mix(h ^ frames[i]) + (uint64_t)i;
    return h ? h : 1;
}

static pw_site *lookup(pw_sitetab *t, int32_t fn, uintptr_t ra, uint64_t sh, int create)
{
    size_t mask = t->nslots - 1;
    size_t i = (size_t)mix((uint64_t)ra ^ ((uint64_t)fn << 48) ^ sh) & mask;
    for (;;) {
        pw_site *s = pw_site_at(t, i);
        if (!s->used) {
            if (!create)
                return NULL;
            s->used = 1;
            s->fn = fn;
            s->ra = ra;
            s->stack_hash = sh;
            s->min = INT64_MAX;
            t->used++;
            return s;
        }
        if (s->ra == ra && s->fn == fn && s->stack_hash == sh)
            return s;
        i = (i + 1) & mask;
    }
}

pw_site *pw_site_get(pw_sitetab *t, int32_t fn, uintptr_t ra, const uintptr_t *frames, int nframes)
{
    uint64_t sh = nframes > 0 ? frames_hash(frames, nframes) : 0;
    pw_site *s = lookup(t, fn, ra, sh, 0);
    if (PW_LIKELY(s != NULL))
        return s;
    if (t->used >= (size_t)pw_opt.max_callsites) {
        t->dropped++;
        return lookup(t, fn, 0, 0, 1); /* overflow site; slots reserved for these */
    }
    s = lookup(t, fn, ra, sh, 1);
    s->nframes = (int16_t)nframes;
    for (int i = 0; i < nframes; i++)
        s->frames[i] = frames[i];
    return s;
}
