/*
 * Per-thread call-site tables: open addressing on (function, return address,
 * hash of deeper frames). A thread only ever writes its own table, so the hot
 * path takes no lock and no atomic. The number of distinct sites is bounded by
 * --max-callsites; beyond it calls are folded into one overflow site per
 * function (return address 0) and counted in `dropped`.
 *
 * The slots and histograms are blocks of the process's tables file (tables.c), so that
 * a process that ends without saving leaves its counts: a slot's page is given disk
 * space before it is first touched (a bit per page in private memory, `ready`); a page
 * that finds none is replaced by private memory, so the process's own profile still
 * has what the file could not.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "keyed.h"
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
    /* The child has one thread. Its parent's tables are blocks of the parent's file,
     * mapped shared: unmapped, so the child never writes into them (the private ones stay
     * mapped, copy-on-write, never touched). */
    for (pw_sitetab *t = __atomic_load_n(&all_tables, __ATOMIC_ACQUIRE); t; t = t->next) {
        if (t->map)
            munmap(t->map, t->map_len);
        for (int k = 0; k < PW_MAX_FUNCTION_SETS; k++)
            if (t->hist_map[k])
                munmap(t->hist_map[k], t->hist_map_len[k]);
    }
    pw_tables_forget();
    __atomic_store_n(&all_tables, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&ntables, 0, __ATOMIC_RELAXED);
    pw_self_table = NULL;
}

/* The usable pages (bits; NULL: all) of a block's data mapped at data, the block's map of
 * len bytes from its record's page, moved into private memory with their contents: copied
 * out, the whole mapping replaced by anonymous memory, copied back. 0 when done. */
static int privatize(void *map, size_t len, char *data, const unsigned char *bits)
{
    size_t pages = (len - (size_t)(data - (char *)map)) / PW_TABLES_PAGE, n = 0;
    for (size_t p = 0; p < pages; p++)
        n += !bits || (bits[p / 8] >> (p % 8) & 1);
    char *keep = pw_alloc(n * PW_TABLES_PAGE + 1);
    if (!keep)
        return -1;
    for (size_t p = 0, k = 0; p < pages; p++)
        if (!bits || (bits[p / 8] >> (p % 8) & 1))
            memcpy(keep + k++ * PW_TABLES_PAGE, data + p * PW_TABLES_PAGE, PW_TABLES_PAGE);
    int rc = mmap(map, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                  0) == MAP_FAILED
                 ? -1
                 : 0;
    for (size_t p = 0, k = 0; rc == 0 && p < pages; p++)
        if (!bits || (bits[p / 8] >> (p % 8) & 1))
            memcpy(data + p * PW_TABLES_PAGE, keep + k++ * PW_TABLES_PAGE, PW_TABLES_PAGE);
    pw_release(keep, n * PW_TABLES_PAGE + 1);
    return rc;
}

void pw_sitetabs_privatize(void)
{
    for (pw_sitetab *t = __atomic_load_n(&all_tables, __ATOMIC_ACQUIRE); t; t = t->next) {
        if (t->map) {
            t->own_rec = *t->rec;
            if (privatize(t->map, t->map_len, t->slots, t->ready) == 0) {
                t->rec = &t->own_rec;
                __atomic_store_n(&t->ready, NULL, __ATOMIC_RELEASE);
                t->map = NULL;
            }
        }
        for (int k = 0; k < PW_MAX_FUNCTION_SETS; k++)
            if (t->hist_map[k] && privatize(t->hist_map[k], t->hist_map_len[k], (char *)t->hist[k],
                                            t->hist_pages[k]) == 0) {
                __atomic_store_n(&t->hist_pages[k], NULL, __ATOMIC_RELEASE);
                t->hist_map[k] = NULL;
            }
    }
}

void pw_sitetab_layout(size_t *entry, size_t *events_offset, size_t *nslots)
{
    size_t e = sizeof(pw_site) + (size_t)(pw_opt.callsite_depth - 1) * sizeof(uintptr_t);
    e = (e + 7) & ~(size_t)7;
    *events_offset = e;
    if (pw_nevents) /* inside and before per event, then the wall time each covers */
        e += (2 * (size_t)pw_nevents + 2) * sizeof(int64_t);
    *entry = e;
    /* one overflow site per function: a module may register its functions after this
     * table is made */
    *nslots = pw_keyed_slots((size_t)pw_opt.max_callsites, PW_MAX_FUNCTIONS);
}

pw_sitetab *pw_sitetab_create(void)
{
    size_t entry, events_offset, nslots;
    pw_sitetab_layout(&entry, &events_offset, &nslots);
    size_t bytes = nslots * entry, pages = (bytes + PW_TABLES_PAGE - 1) / PW_TABLES_PAGE;
    size_t own = (sizeof(pw_sitetab) + 63) & ~(size_t)63;
    pw_sitetab *t = pw_alloc(own + (pages + 7) / 8); /* zero-filled, with its page bits */
    if (!t)
        return NULL;
    t->nslots = nslots;
    t->entry_size = entry;
    t->events_offset = events_offset;
    t->bytes = bytes;
    int thread = __atomic_fetch_add(&ntables, 1, __ATOMIC_RELAXED);
    t->rec = &t->own_rec;
    t->own_rec.thread = thread;
    pw_table_block_rec *rec;
    char *data;
    if (pw_tables_block(PW_TABLE_SITES, thread, 0, 0, bytes, 0, &rec, &data, &t->slots_offset,
                        &t->map, &t->map_len) == 0) {
        t->rec = rec;
        t->slots = data;
        t->ready = (unsigned char *)t + own;
    } else {
        t->slots = pw_alloc(bytes); /* zero-filled; untouched pages cost nothing */
        if (!t->slots) {
            pw_release(t, own + (pages + 7) / 8);
            __atomic_fetch_sub(&ntables, 1, __ATOMIC_RELAXED);
            return NULL;
        }
    }
    t->next = __atomic_load_n(&all_tables, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&all_tables, &t->next, t, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
    pw_self_table = t;
    pw_thread_begin(); /* a thread's first recorded call: the modules' per-thread start */
    return t;
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

/* Bytes [off, off + len) of a block (mapped at base, at file_off in the file) usable: its
 * pages given disk space, or, when the disk has none, private memory in their place (a page
 * not yet usable holds nothing: no slot or row on it was ever touched). bits: a bit per
 * page, set once usable. 0 only when neither could be had. Out of line: a thread makes
 * each page usable once. */
static __attribute__((noinline)) int pages_ready(char *base, int64_t file_off, unsigned char *bits,
                                                 size_t off, size_t len)
{
    if (!bits)
        return 1; /* private memory */
    for (size_t p = off / PW_TABLES_PAGE; p <= (off + len - 1) / PW_TABLES_PAGE; p++) {
        if (bits[p / 8] >> (p % 8) & 1)
            continue;
        if (pw_tables_reserve(file_off + (int64_t)(p * PW_TABLES_PAGE), PW_TABLES_PAGE) != 0) {
            if (mmap(base + p * PW_TABLES_PAGE, PW_TABLES_PAGE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
                return 0;
            pw_tables_page_lost();
        }
        __atomic_fetch_or(&bits[p / 8], (unsigned char)(1u << (p % 8)), __ATOMIC_RELEASE);
    }
    return 1;
}

int64_t *pw_sitetab_hist(pw_sitetab *t, const pw_functions *f)
{
    static int failed; /* once out of memory, not tried on every call */
    if (!pw_opt.histograms || !f->hist || f->n <= 0 || failed)
        return NULL;
    size_t row = PW_HIST_BUCKETS * 3 * sizeof(int64_t), bytes = (size_t)f->n * row;
    size_t pages = (bytes + PW_TABLES_PAGE - 1) / PW_TABLES_PAGE;
    int k = f->index;
    /* a byte per function (its row usable), a bit per page of the block */
    unsigned char *rows = pw_alloc((size_t)f->n + (pages + 7) / 8);
    pw_table_block_rec *rec;
    char *data;
    int64_t *h = NULL;
    if (rows &&
        pw_tables_block(PW_TABLE_HIST, (int)(t->rec->thread), f->base, f->n, bytes, 0, &rec, &data,
                        &t->hist_offset[k], &t->hist_map[k], &t->hist_map_len[k]) == 0) {
        h = (int64_t *)data;
        t->hist_pages[k] = rows + f->n;
    } else if (rows && (h = pw_alloc(bytes)) != NULL) {
        memset(rows, 1, (size_t)f->n); /* private memory: every row usable */
    }
    if (!h) {
        pw_release(rows, (size_t)f->n + (pages + 7) / 8);
        failed = 1;
        return NULL;
    }
    t->hist_bytes += bytes;
    t->hist_rows[k] = rows;
    __atomic_store_n(&t->hist[k], h, __ATOMIC_RELEASE); /* read by the dump */
    return h;
}

int pw_sitetab_hist_row(pw_sitetab *t, const pw_functions *f, int local)
{
    int k = f->index;
    size_t row = PW_HIST_BUCKETS * 3 * sizeof(int64_t);
    if (!pages_ready((char *)t->hist[k], t->hist_offset[k], t->hist_pages[k], (size_t)local * row,
                     row))
        return 0;
    __atomic_store_n(&t->hist_rows[k][local], 1, __ATOMIC_RELEASE); /* read by the dump */
    return 1;
}

static inline __attribute__((always_inline)) pw_site *lookup(pw_sitetab *t, int32_t fn,
                                                             uintptr_t ra, uint64_t sh, int create)
{
    size_t mask = t->nslots - 1;
    size_t i = (size_t)mix((uint64_t)ra ^ ((uint64_t)fn << 48) ^ sh) & mask;
    for (;;) {
        /* a slot on a page never made ready is free: not read */
        pw_site *s = pw_site_at(t, i);
        if (!pw_site_ready(t, s) || !s->used) {
            if (!create ||
                !pages_ready(t->slots, t->slots_offset, t->ready, i * t->entry_size, t->entry_size))
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

/* A site not in the table yet: its slot, or the function's overflow site past the bound.
 * Out of line: a site is new once, found at every other call. */
static __attribute__((noinline)) pw_site *
site_new(pw_sitetab *t, int32_t fn, uintptr_t ra, uint64_t sh, const uintptr_t *frames, int nframes)
{
    pw_site *s;
    if (t->used >= (size_t)pw_opt.max_callsites) {
        t->rec->dropped++;
        s = lookup(t, fn, 0, 0, 1); /* overflow site; slots reserved for these */
    } else if ((s = lookup(t, fn, ra, sh, 1)) != NULL) {
        s->nframes = (int16_t)nframes;
        for (int i = 0; i < nframes; i++)
            s->frames[i] = frames[i];
    }
    /* no memory for the slot's page: the call goes to a site that is never saved */
    return s ? s : (pw_site *)t->lost;
}

pw_site *pw_site_get(pw_sitetab *t, int32_t fn, uintptr_t ra, const uintptr_t *frames, int nframes)
{
    uint64_t sh = nframes > 0 ? frames_hash(frames, nframes) : 0;
    pw_site *s = lookup(t, fn, ra, sh, 0);
    if (PW_LIKELY(s != NULL))
        return s;
    return site_new(t, fn, ra, sh, frames, nframes);
}

pw_site *pw_site_next(const pw_sitetab *t, size_t *i)
{
    for (; *i < t->nslots; ++*i) {
        pw_site *s = pw_site_at(t, *i);
        if (!pw_site_ready(t, s))
            continue;
        __atomic_thread_fence(__ATOMIC_ACQUIRE); /* the page's bit, then the page */
        if (s->used)
            return ++*i, s;
    }
    return NULL;
}
