/*
 * The io module's record store (io.h): the program's I/O per (file, layer, thread) with
 * Darshan-comparable counters, the time split of the paper (open, close, read, write,
 * seek, stat, sync, metadata, mappings), call sites, and read/write bytes over time
 * (docs/io.md), and the recording functions that give each wrapped call its file: by
 * descriptor, stream, mapping or MPI-IO handle.
 *
 * The store is a file, io/HOST.PID.pwio (include/perfweave/format/io.h), mapped
 * MAP_SHARED at the module's start: every count is in the file's pages as soon as it is
 * made, so a process killed by SIGKILL leaves what it counted; its end only marks the
 * file complete. Each thread takes a block of its own (one atomic add), so the hot path
 * has no lock: a call finds its file through an array indexed by descriptor, its record
 * at file * PW_IO_NLAYERS + layer of the thread's block, and its call site (the program's
 * frame: core/user_frame.h) through a one-entry cache, else in the block's sites: a
 * table of the core's keyed call-site tables (core/keyed.h) over the store's pages.
 * File names and objects are interned lock-free (a compare-and-swap on a hash slot). A
 * process forked by a measured one gets a store of its own (pw_io_store_fork), never its
 * parent's counts. Each call counted is also a segment of the segment trace when there
 * is one (io_segments.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "io.h"
#include "io_segments.h"
#include "keyed.h"
#include "user_frame.h"

#define PW_IO_BINS 256          /* per thread, read and write bytes over time */
#define PW_IO_BIN_NS 10000000LL /* the first bins' width: 10 ms, doubled as the run grows */
#define MAX_HANDLES 1024        /* MPI-IO handles open at once */
#define MAX_MAPS 1024           /* file mappings alive at once */
#define MAX_OBJECTS 256

/* The per-thread part of a block: its bins (the record io_thread is not declared in the
 * format: the reader takes it as int64 words: tid, bin_ticks, start_tick, then the read
 * bins and the write bins). */
typedef struct io_thread {
    int64_t tid, bin_ticks, start_tick;
    int64_t read_bins[PW_IO_BINS], write_bins[PW_IO_BINS];
} io_thread;

static pw_io_header_rec *hdr;
static pw_io_file_rec *files;
static pw_io_object_rec *objects;
static char *blocks;
static size_t map_len, block_size, recs_offset, sites_offset;
static int max_files, max_threads, max_sites;
/* io_site slots of a block (the header's max_sites): a keyed table bounded to max_sites
 * distinct sites, with no overflow site (calls past it: dropped_sites) */
static size_t site_slots;
static int64_t start_tick;

/* Descriptor -> file + 1 (0: not a file of ours), and its position (io.h pw_io_fd_entry).
 * Private memory: a forked child keeps its copy, as it keeps the descriptors. */
typedef pw_io_fd_entry fd_entry;
pw_io_fd_entry *pw_io_fds;
#define fds pw_io_fds
int pw_io_nmaps; /* file mappings alive */

typedef struct handle_entry {
    uintptr_t handle;
    int file;
} handle_entry;
static handle_entry handles[MAX_HANDLES];

typedef struct map_entry {
    uintptr_t addr;
    size_t len;
    int file;
} map_entry;
static map_entry maps[MAX_MAPS];

static PW_TLS io_thread *my_thread;
static PW_TLS pw_io_rec *my_recs;
static PW_TLS pw_keyed_tab my_sites;
/* The thread's records in use, a bit per (file, layer), in private memory: a record's
 * page is first read once it is on disk (on tmpfs a read of a page the file system
 * cannot back faults too) */
static PW_TLS unsigned char *my_used;
static unsigned char *used_bits; /* max_threads x used_len */
static size_t used_len;
/* the site of the previous call of each op: a loop of open, write, close hits them */
static PW_TLS pw_io_site_rec *last_site[PW_IO_NOPS];
static PW_TLS int my_state; /* 0: no block yet, 1: a block, -1: none to be had */
static PW_TLS int my_index; /* the block's index */
/* The calling thread's current bin and its ticks [bin_lo, bin_hi): most calls fall in the
 * bin of the previous one (no division). */
static PW_TLS int64_t bin_lo, bin_hi;
static PW_TLS int bin_cur;

/* ---- names: files and objects, interned lock-free ---- */

/* The name's hash: 8 bytes a step (an open's cost is mostly here and in the call). */
static uint64_t hash_str(const char *s, size_t *len)
{
    size_t n = strlen(s), i = 0;
    uint64_t h = 1469598103934665603ULL ^ n;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    h = (h ^ w) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
    *len = n;
    return h ? h : 1;
}

/* The file id of path (its slot in the table), made on first sight; -1 when the table
 * is full. */
static int file_id(const char *path)
{
    if (!path)
        return -1;
    size_t len;
    uint64_t h = hash_str(path, &len);
    for (int k = 0; k < max_files; k++) {
        int i = (int)((h + (uint64_t)k) % (uint64_t)max_files);
        uint64_t cur = __atomic_load_n(&files[i].hash, __ATOMIC_ACQUIRE);
        if (cur == h)
            return i;
        if (cur != 0)
            continue;
        uint64_t zero = 0;
        if (!__atomic_compare_exchange_n(&files[i].hash, &zero, h, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE)) {
            if (zero == h)
                return i;
            continue;
        }
        pw_io_file_rec *f = &files[i];
        const char *tail = len < PW_IO_PATH ? path : path + len - (PW_IO_PATH - 1);
        memcpy(f->path, tail, strlen(tail) + 1);
        f->length = (int32_t)len;
        struct statfs sf;
        if (statfs(path, &sf) == 0) {
            f->fs_type = (int64_t)(int32_t)sf.f_type; /* as format.h's codes */
            f->memory = sf.f_type == 0x01021994 || sf.f_type == (typeof(sf.f_type))0x858458f6;
        }
        __atomic_fetch_add(&hdr->nfiles, 1, __ATOMIC_RELAXED);
        return i;
    }
    __atomic_fetch_add(&hdr->dropped_files, 1, __ATOMIC_RELAXED);
    return -1;
}

static int object_slot(int obj)
{
    const char *path = obj >= 0 ? pw_object_path(obj) : NULL;
    if (!path)
        return -1;
    size_t len;
    uint64_t h = hash_str(path, &len);
    for (int k = 0; k < MAX_OBJECTS; k++) {
        int i = (int)((h + (uint64_t)k) % MAX_OBJECTS);
        uint64_t cur = __atomic_load_n(&objects[i].hash, __ATOMIC_ACQUIRE), zero = 0;
        if (cur == h)
            return i;
        if (cur == 0 && __atomic_compare_exchange_n(&objects[i].hash, &zero, h, 0, __ATOMIC_ACQ_REL,
                                                    __ATOMIC_ACQUIRE)) {
            size_t n = len < PW_IO_OBJECT_PATH ? len : PW_IO_OBJECT_PATH - 1;
            memcpy(objects[i].path, path, n);
            objects[i].path[n] = 0;
            return i;
        }
        if (zero == h)
            return i;
    }
    return -1;
}

/* ---- room on disk for the store's pages before they are first written: a page of a
 * shared file mapping that the file system cannot back (a full disk or tmpfs) would
 * kill the program with SIGBUS at its first store; what finds no room is counted as
 * dropped instead ---- */

static unsigned char *reserved; /* a bit per page of the store: on disk */
static size_t reserved_len;
static char store_path[4300];

int pw_io_reserve_in(const char *path, off_t off, size_t len)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = pw_reserve_disk(fd, off, len);
    syscall(SYS_close, fd);
    return rc;
}

static int reserve(const void *p, size_t len)
{
    size_t off = (size_t)((const char *)p - (const char *)hdr);
    size_t first = off / PW_IO_PAGE, last = (off + len - 1) / PW_IO_PAGE, i;
    for (i = first; i <= last; i++)
        if (!(__atomic_load_n(&reserved[i / 8], __ATOMIC_ACQUIRE) & (1u << (i % 8))))
            break;
    if (i > last)
        return 0;
    if (pw_io_reserve_in(store_path, (off_t)(first * PW_IO_PAGE),
                         (last - first + 1) * PW_IO_PAGE) != 0)
        return -1;
    for (i = first; i <= last; i++)
        __atomic_fetch_or(&reserved[i / 8], (unsigned char)(1u << (i % 8)), __ATOMIC_RELEASE);
    return 0;
}

/* ---- call sites: the block's io_site records as a keyed table ---- */

/* A new site's object and offset (its key and ra are set) */
static void site_fresh(pw_keyed_slot *k)
{
    pw_io_site_rec *s = (pw_io_site_rec *)k;
    uint64_t off = 0;
    int obj = pw_object_of((uintptr_t)s->ra, &off);
    s->object = object_slot(obj);
    s->offset = obj >= 0 ? off : s->ra;
}

static pw_keyed io_sites = {.slot_size = sizeof(pw_io_site_rec),
                            .ra_at = offsetof(pw_io_site_rec, ra),
                            .count_at = offsetof(pw_io_site_rec, count),
                            .fresh = site_fresh};

/* ---- the calling thread's block ---- */

static int thread_block(void)
{
    if (PW_LIKELY(my_state == 1))
        return 1;
    if (my_state < 0 || !hdr)
        return 0;
    int i = __atomic_fetch_add(&hdr->nthreads, 1, __ATOMIC_ACQ_REL);
    if (i >= max_threads) {
        my_state = -1;
        return 0;
    }
    my_index = i;
    char *b = blocks + (size_t)i * block_size;
    /* its bins and its call sites (probed by reading them) on disk now; its records
     * when first used (rec_of) */
    if (reserve(b, sizeof(io_thread)) != 0 ||
        reserve(b + sites_offset, sizeof(pw_io_site_rec) * site_slots) != 0) {
        my_state = -1;
        return 0;
    }
    my_used = used_bits + (size_t)i * used_len;
    my_thread = (io_thread *)b;
    my_thread->tid = (int64_t)gettid();
    my_thread->start_tick = start_tick;
    double npt = pw_ns_per_tick();
    my_thread->bin_ticks = (int64_t)((double)PW_IO_BIN_NS / (npt > 0 ? npt : 1.0)) + 1;
    my_recs = (pw_io_rec *)(b + recs_offset);
    pw_keyed_init(&my_sites, &io_sites, b + sites_offset, site_slots);
    memset(last_site, 0, sizeof last_site);
    bin_lo = bin_hi = 0;
    my_state = 1;
    return 1;
}

static pw_io_rec *rec_of(const pw_io_call *c, int file)
{
    if (PW_UNLIKELY(!thread_block())) {
        __atomic_fetch_add(&hdr->dropped_threads, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    int idx = file * PW_IO_NLAYERS + c->layer;
    pw_io_rec *r = &my_recs[idx];
    if (PW_UNLIKELY(!(my_used[idx >> 3] & (1u << (idx & 7))))) {
        if (reserve(r, sizeof *r) != 0) {
            __atomic_fetch_add(&hdr->dropped_files, 1, __ATOMIC_RELAXED);
            return NULL;
        }
        my_used[idx >> 3] |= (unsigned char)(1u << (idx & 7));
        r->file = file;
        r->layer = c->layer;
        r->max_byte_read = r->max_byte_written = -1;
        r->last_end = -1;
        r->last_op = -1;
        r->first_tick = c->t0 ? c->t0 : 1;
    }
    return r;
}

/* The (file, layer, op) of a site as the keyed table's key: the first 8 bytes of its
 * io_site. */
static uint64_t site_key(int file, int layer, int op)
{
    pw_io_site_rec r = {.file = file, .layer = (int16_t)layer, .op = (int16_t)op};
    uint64_t key;
    memcpy(&key, &r, sizeof key);
    return key;
}

static pw_io_site_rec *site_get(const pw_io_call *c, int file)
{
    pw_io_site_rec *s =
        (pw_io_site_rec *)pw_keyed_get(&my_sites, site_key(file, c->layer, c->op), c->ra);
    if (s == NULL)
        __atomic_fetch_add(&hdr->dropped_sites, 1, __ATOMIC_RELAXED);
    return s;
}

static void add_site(pw_io_call *c, int file, int64_t bytes)
{
    c->ra = pw_user_frame(c->ra);
    pw_io_site_rec *s = last_site[c->op];
    if (!(s && s->ra == c->ra && s->file == file && s->layer == c->layer && s->op == c->op)) {
        s = site_get(c, file);
        if (!s)
            return;
        last_site[c->op] = s;
    }
    s->count++;
    s->bytes += bytes;
    s->ticks += c->t1 - c->t0;
}

/* One call of op into r, its site and the segment trace (offset: -1 none). */
static void count(pw_io_call *c, pw_io_rec *r, int file, int64_t bytes, int64_t offset)
{
    int64_t t = c->t1 - c->t0;
    r->ticks[c->op] += t;
    r->calls[c->op]++;
    r->last_tick = c->t1;
    add_site(c, file, bytes);
    if (PW_UNLIKELY(pw_io_segments != NULL))
        pw_io_segment(c, file, bytes, offset, my_index);
}

static int hist_bin(int64_t n)
{
    static const int64_t top[PW_IO_HIST_BINS - 1] = {
        100, 1024, 10240, 102400, 1048576, 4194304, 10485760, 104857600, 1073741824};
    int b = 0;
    while (b < PW_IO_HIST_BINS - 1 && n > top[b])
        b++;
    return b;
}

static void add_bins(int64_t t1, int64_t bytes, int write)
{
    io_thread *th = my_thread;
    if (PW_LIKELY(t1 >= bin_lo && t1 < bin_hi)) {
        (write ? th->write_bins : th->read_bins)[bin_cur] += bytes;
        return;
    }
    int64_t at = t1 - th->start_tick;
    if (at < 0)
        at = 0;
    int64_t bin = at / th->bin_ticks;
    while (PW_UNLIKELY(bin >= PW_IO_BINS)) { /* wider bins: pairs merged, bounded */
        for (int i = 0; i < PW_IO_BINS / 2; i++) {
            th->read_bins[i] = th->read_bins[2 * i] + th->read_bins[2 * i + 1];
            th->write_bins[i] = th->write_bins[2 * i] + th->write_bins[2 * i + 1];
        }
        memset(th->read_bins + PW_IO_BINS / 2, 0, sizeof(int64_t) * PW_IO_BINS / 2);
        memset(th->write_bins + PW_IO_BINS / 2, 0, sizeof(int64_t) * PW_IO_BINS / 2);
        th->bin_ticks *= 2;
        bin = at / th->bin_ticks;
    }
    (write ? th->write_bins : th->read_bins)[bin] += bytes;
    bin_cur = (int)bin;
    bin_lo = th->start_tick + bin * th->bin_ticks;
    bin_hi = bin_lo + th->bin_ticks;
}

/* A read or a write of `bytes` at offset `at` (-1: unknown). */
static void rw_access(pw_io_call *c, pw_io_rec *r, int file, int64_t at, int64_t bytes)
{
    int write = c->op == PW_IO_WRITE;
    if (write) {
        r->writes++;
        r->bytes_written += bytes;
        r->size_write[hist_bin(bytes)]++;
        if (c->t1 - c->t0 > r->max_write_ticks)
            r->max_write_ticks = c->t1 - c->t0;
    } else {
        r->reads++;
        r->bytes_read += bytes;
        r->size_read[hist_bin(bytes)]++;
        if (c->t1 - c->t0 > r->max_read_ticks)
            r->max_read_ticks = c->t1 - c->t0;
    }
    if (at >= 0) {
        if (r->last_end >= 0) {
            if (at == r->last_end)
                (write ? r->consec_writes++ : r->consec_reads++);
            if (at >= r->last_end)
                (write ? r->seq_writes++ : r->seq_reads++);
        }
        r->last_end = at + bytes;
        if (bytes > 0) {
            int64_t *m = write ? &r->max_byte_written : &r->max_byte_read;
            if (at + bytes - 1 > *m)
                *m = at + bytes - 1;
        }
    }
    if (r->last_op >= 0 && r->last_op != c->op)
        r->rw_switches++;
    r->last_op = c->op;
    for (int i = 0; i < PW_IO_COMMON; i++) {
        if (r->access_size[i] == bytes && r->access_count[i] > 0) {
            r->access_count[i]++;
            break;
        }
        if (r->access_count[i] == 0) {
            r->access_size[i] = bytes;
            r->access_count[i] = 1;
            break;
        }
    }
    add_bins(c->t1, bytes, write);
    count(c, r, file, bytes, at);
}

/* The header's values a reader of a killed process's store needs, kept current on the
 * slow paths (opens and closes). */
static int64_t touched_tick; /* the last update's; racy between threads, harmless */

static void touch_header(int64_t tick)
{
    /* the clock and rate at most every ~10 ms of calls (two clock reads and a division:
     * a killed process's wall time reaches its last call through the records'
     * last_tick); the rank as soon as it changes */
    if (hdr->rank != pw_rank)
        hdr->rank = pw_rank;
    if (tick && tick - touched_tick < 20000000 && tick >= touched_tick)
        return;
    touched_tick = tick;
    hdr->t_end = pw_now();
    hdr->ns_per_tick = pw_ns_per_tick();
    if (pw_io_segments)
        pw_io_segments->ns_per_tick = hdr->ns_per_tick;
}

/* ---- the recording functions of the generated wrappers ---- */

static fd_entry *fd_of(int fd) { return (unsigned)fd < PW_IO_MAX_FDS && fds ? &fds[fd] : NULL; }

static void counted_op(pw_io_call *c, int file);

static void opened(pw_io_call *c, int file, int fd, int append)
{
    touch_header(c->t1);
    fd_entry *e = fd_of(fd);
    if (e) {
        e->file = file + 1;
        e->pos = e->spos = 0;
        e->unknown_pos = append;
    }
    counted_op(c, file);
}

void pw_io_open(pw_io_call *c, const char *path, int fd, int append)
{
    if (fd < 0)
        return;
    opened(c, file_id(path), fd, append);
}

void pw_io_fopen(pw_io_call *c, const char *path, FILE *fp, const char *mode)
{
    if (!fp)
        return;
    opened(c, file_id(path), fileno_unlocked(fp), mode && strchr(mode, 'a') != NULL);
}

void pw_io_fdopen(pw_io_call *c, int fd, FILE *fp)
{
    int file = pw_io_fd_file(fd);
    if (fp)
        counted_op(c, file);
}

void pw_io_close(pw_io_call *c, int fd, int file, int rc)
{
    if (file < 0)
        return;
    touch_header(c->t1);
    fd_entry *e = fd_of(fd);
    if (e && rc == 0 && e->file == file + 1)
        e->file = 0;
    counted_op(c, file);
}

void pw_io_dup(pw_io_call *c, int fd, int newfd)
{
    int file = pw_io_fd_file(fd);
    fd_entry *e = fd_of(newfd), *old = fd_of(fd);
    if (e) /* dup2 of a socket or pipe onto a file's descriptor: no longer the file's */
        *e = file >= 0 ? *old : (fd_entry){0};
    if (file >= 0)
        counted_op(c, file);
}

void pw_io_fcntl(pw_io_call *c, int fd, int cmd, int rc)
{
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
        pw_io_dup(c, fd, rc);
    else
        pw_io_fd_op(c, fd);
}

void pw_io_rw(pw_io_call *c, int fd, int64_t bytes, int64_t offset)
{
    fd_entry *e = fd_of(fd);
    int file = e ? e->file - 1 : -1;
    if (file < 0)
        return;
    pw_io_rec *r = rec_of(c, file);
    if (PW_UNLIKELY(!r))
        return;
    int64_t at = offset;
    if (offset < 0 && !e->unknown_pos) {
        at = e->pos;
        e->pos += bytes;
    }
    rw_access(c, r, file, at, bytes);
}

void pw_io_stream_rw(pw_io_call *c, FILE *fp, int64_t bytes)
{
    fd_entry *e = fp ? fd_of(fp->_fileno) : NULL;
    int file = e ? e->file - 1 : -1;
    if (file < 0)
        return;
    pw_io_rec *r = rec_of(c, file);
    if (PW_UNLIKELY(!r))
        return;
    int64_t at = e->unknown_pos ? -1 : e->spos;
    e->spos += bytes;
    rw_access(c, r, file, at, bytes);
}

static void counted_op(pw_io_call *c, int file)
{
    if (file < 0)
        return;
    pw_io_rec *r = rec_of(c, file);
    if (!r)
        return;
    switch (c->op) {
    case PW_IO_OPEN:
        r->opens++;
        break;
    case PW_IO_CLOSE:
        r->closes++;
        break;
    case PW_IO_SEEK:
        r->seeks++;
        break;
    case PW_IO_STAT:
        r->stats++;
        break;
    case PW_IO_SYNC:
        r->syncs++;
        break;
    case PW_IO_MMAP:
        r->mmaps++;
        break;
    default:
        r->metas++;
        break;
    }
    count(c, r, file, 0, -1);
}

void pw_io_seek(pw_io_call *c, int fd, int64_t pos)
{
    fd_entry *e = fd_of(fd);
    if (e && e->file > 0 && pos >= 0)
        e->pos = pos;
    counted_op(c, e ? e->file - 1 : -1);
}

void pw_io_stream_seek(pw_io_call *c, FILE *fp)
{
    fd_entry *e = fp ? fd_of(fp->_fileno) : NULL;
    if (!e || e->file <= 0)
        return;
    long pos = ftell(fp); /* not recorded: this thread is in a wrapper */
    if (pos >= 0)
        e->spos = pos;
    counted_op(c, e->file - 1);
}

void pw_io_path_op(pw_io_call *c, const char *path) { counted_op(c, file_id(path)); }

int pw_io_shared_object(const char *path)
{
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    for (const char *so = base ? strstr(base, ".so") : NULL; so; so = strstr(so + 1, ".so"))
        if (so[3] == 0 || (so[3] == '.' && so[4] >= '0' && so[4] <= '9'))
            return 1;
    return 0;
}

void pw_io_fd_op(pw_io_call *c, int fd) { counted_op(c, pw_io_fd_file(fd)); }

/* ---- mapped files: the bytes touched are estimated from the mapping's resident pages
 * (mincore) when it is unmapped, or at the end ---- */

static int64_t resident_bytes(uintptr_t addr, size_t len)
{
    unsigned char vec[1024];
    long page = sysconf(_SC_PAGESIZE);
    int64_t n = 0;
    uintptr_t a = addr & ~(uintptr_t)(page - 1);
    uintptr_t end = addr + len;
    while (a < end) {
        size_t chunk = (size_t)page * sizeof vec;
        if (chunk > end - a)
            chunk = end - a;
        if (mincore((void *)a, chunk, vec) != 0)
            return n;
        size_t pages = (chunk + (size_t)page - 1) / (size_t)page;
        for (size_t i = 0; i < pages; i++)
            n += vec[i] & 1;
        a += chunk;
    }
    hdr->mmap_estimated = 1;
    return n * page;
}

void pw_io_mmap(pw_io_call *c, int fd, void *addr, size_t len, int64_t offset)
{
    int file = pw_io_fd_file(fd);
    if (file < 0 || addr == MAP_FAILED)
        return;
    for (int i = 0; i < MAX_MAPS; i++) {
        uintptr_t zero = 0;
        if (__atomic_compare_exchange_n(&maps[i].addr, &zero, (uintptr_t)addr, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            maps[i].len = len;
            maps[i].file = file;
            __atomic_fetch_add(&pw_io_nmaps, 1, __ATOMIC_RELAXED);
            break;
        }
    }
    counted_op(c, file);
}

static PW_TLS int unmap_file;

int64_t pw_io_unmap_begin(void *addr, size_t len)
{
    unmap_file = -1;
    for (int i = 0; i < MAX_MAPS; i++) {
        map_entry *m = &maps[i];
        if (__atomic_load_n(&m->addr, __ATOMIC_ACQUIRE) != (uintptr_t)addr)
            continue;
        unmap_file = m->file;
        int64_t est = resident_bytes((uintptr_t)addr, len < m->len ? len : m->len);
        __atomic_store_n(&m->addr, 0, __ATOMIC_RELEASE);
        __atomic_fetch_sub(&pw_io_nmaps, 1, __ATOMIC_RELAXED);
        return est;
    }
    return 0;
}

void pw_io_munmap(pw_io_call *c, int64_t estimate)
{
    int file = unmap_file;
    if (file < 0)
        return;
    pw_io_rec *r = rec_of(c, file);
    if (r)
        r->mmap_bytes += estimate;
    counted_op(c, file);
}

/* ---- MPI-IO, from the MPI module's wrappers (the hook pw_io_file_call) ---- */

static int handle_file(uintptr_t h, int set, int file)
{
    for (int k = 0; k < MAX_HANDLES; k++) {
        handle_entry *e = &handles[(h / 8 + (uintptr_t)k) % MAX_HANDLES];
        uintptr_t cur = __atomic_load_n(&e->handle, __ATOMIC_ACQUIRE), zero = 0;
        if (cur == h) {
            if (set < 0)
                __atomic_store_n(&e->handle, 0, __ATOMIC_RELEASE); /* a tombstone-free
                 table: a later lookup past this slot may miss; handles are few */
            return e->file;
        }
        if (set > 0 && cur == 0 &&
            __atomic_compare_exchange_n(&e->handle, &zero, h, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            e->file = file;
            return file;
        }
    }
    return -1;
}

void pw_io_file_call(const pw_file_call *fc)
{
    if (!pw_io_on || !pw_wrap_enter())
        return;
    static const int ops[] = {PW_IO_OPEN, PW_IO_CLOSE, PW_IO_READ, PW_IO_WRITE,
                              PW_IO_SEEK, PW_IO_SYNC,  PW_IO_META, PW_IO_META};
    unsigned form = (unsigned)fc->form < PW_IO_NFORMS ? (unsigned)fc->form : PW_IO_INDEP;
    pw_io_call c = {.fn = -1,
                    .layer = PW_IO_MPIIO,
                    .op = ops[fc->op],
                    .ra = fc->ra,
                    .t0 = fc->t0,
                    .t1 = fc->t1};
    int file;
    if (fc->op == PW_FILE_OPEN) {
        touch_header(0);
        file = file_id(fc->path);
        if (file >= 0)
            handle_file(fc->handle, 1, file);
    } else {
        file = handle_file(fc->handle, fc->op == PW_FILE_CLOSE ? -1 : 0, 0);
    }
    if (fc->op != PW_FILE_READ && fc->op != PW_FILE_WRITE) {
        counted_op(&c, file);
        pw_io_rec *r = file >= 0 && (fc->op == PW_FILE_OPEN || fc->op == PW_FILE_VIEW)
                           ? rec_of(&c, file)
                           : NULL;
        if (r && fc->op == PW_FILE_OPEN)
            r->form_opens[form]++;
        else if (r)
            r->views++;
    } else if (file >= 0) {
        pw_io_rec *r = rec_of(&c, file);
        if (r && fc->bytes >= 0) {
            rw_access(&c, r, file, fc->offset, fc->bytes);
            (fc->op == PW_FILE_WRITE ? r->form_writes : r->form_reads)[form]++;
        } else if (r) { /* a split collective's _end: its time, the _begin was the call */
            r->ticks[c.op] += c.t1 - c.t0;
            r->last_tick = c.t1;
            if (pw_io_segments)
                pw_io_segment(&c, file, 0, -1, my_index);
        }
    }
    pw_wrap_leave();
}

/* ---- the store ---- */

static size_t round_page(size_t n) { return (n + PW_IO_PAGE - 1) / PW_IO_PAGE * PW_IO_PAGE; }

/* Create and map this process's store (a new name if a process of this pid already made
 * one: an exec'd child of a fork). 0 on success. */
/* A store the disk has no room for is marked unwritten, as every file of the experiment
 * (pw_file_failed): -2, and no line of the module's own. -1 for any other failure. */
static int disk_failed(const char *path, int err)
{
    if (err != ENOSPC && err != EDQUOT)
        return -1;
    pw_file_failed(path, err);
    return -2;
}

static int make_store(int64_t parent)
{
    char path[4300], base[64];
    int fd = -1;
    for (int n = 0; n < 100 && fd < 0; n++) {
        char num[24];
        int k = pw_fmt_int(num, n);
        num[k] = 0;
        memcpy(base, n ? "." : "", n ? 2 : 1);
        if (n)
            strcat(base, num);
        strcat(base, ".pwio");
        if (pw_experiment_path(path, sizeof path, "io") != 0)
            return -1;
        mkdir(path, 0777);
        /* HOST.PID is the process's name before it has a rank */
        char name[64];
        int m = pw_fmt_int(name, (int64_t)getpid());
        name[m] = 0;
        if (pw_experiment_path(path, sizeof path, "io/", pw_hostname, ".", name, base) != 0)
            return -1;
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    }
    if (fd < 0)
        return disk_failed(path, errno);
    size_t hdr_len = round_page(sizeof(pw_io_header_rec));
    size_t files_len = round_page(sizeof(pw_io_file_rec) * (size_t)max_files);
    size_t objects_len = round_page(sizeof(pw_io_object_rec) * MAX_OBJECTS);
    recs_offset = round_page(sizeof(io_thread));
    sites_offset = recs_offset + round_page(sizeof(pw_io_rec) * (size_t)max_files * PW_IO_NLAYERS);
    block_size = sites_offset + round_page(sizeof(pw_io_site_rec) * site_slots);
    map_len = hdr_len + files_len + objects_len + block_size * (size_t)max_threads;
    /* the header, the files' and the objects' tables on disk now (a child copies its
     * parent's whole); the thread blocks' pages when first written (reserve) */
    size_t page_bits = (map_len / PW_IO_PAGE + 7) / 8;
    size_t nused = ((size_t)max_files * PW_IO_NLAYERS + 7) / 8;
    size_t bits_len = page_bits + nused * (size_t)max_threads; /* reserved, used_bits */
    unsigned char *bits =
        mmap(NULL, bits_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bits == MAP_FAILED || ftruncate(fd, (off_t)map_len) != 0 ||
        pw_reserve_disk(fd, 0, hdr_len + files_len + objects_len) != 0) {
        int err = errno;
        if (bits != MAP_FAILED)
            munmap(bits, bits_len);
        close(fd);
        unlink(path);
        return bits == MAP_FAILED ? -1 : disk_failed(path, err);
    }
    char *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        munmap(bits, bits_len);
        unlink(path);
        return -1;
    }
    /* no readahead: the store is touched a page here and there, and a fault on its
     * reserved (unwritten) blocks otherwise reads ahead, zero-filling up to hundreds of
     * KiB of page cache: ~3 ms of CPU in every process's start (perf, ext4) */
    madvise(m, map_len, MADV_RANDOM);
    if (reserved) /* a forked child's: the parent's store's */
        munmap(reserved, reserved_len);
    reserved = bits;
    reserved_len = bits_len;
    used_bits = bits + page_bits;
    used_len = nused;
    memcpy(store_path, path, strlen(path) + 1);
    hdr = (pw_io_header_rec *)m;
    files = (pw_io_file_rec *)(m + hdr_len);
    objects = (pw_io_object_rec *)(m + hdr_len + files_len);
    blocks = m + hdr_len + files_len + objects_len;
    hdr->version = PW_IO_VERSION;
    hdr->rank = pw_rank;
    hdr->pid = getpid();
    hdr->parent_pid = parent;
    hdr->max_files = max_files;
    hdr->max_threads = max_threads;
    hdr->max_sites = (int32_t)site_slots;
    hdr->max_objects = MAX_OBJECTS;
    hdr->state = -1;
    hdr->t_start = pw_now();
    hdr->t_end = hdr->t_start;
    hdr->ns_per_tick = pw_ns_per_tick();
    pw_io_busy_ticks = &hdr->busy_ticks;
    pw_io_solo_ticks = &hdr->solo_ticks;
    touched_tick = pw_ticks();
    __atomic_store_n(&hdr->magic, PW_IO_MAGIC_NUMBER, __ATOMIC_RELEASE);
    pw_io_segments_make(store_path, hdr->pid);
    return 0;
}

/* The standard streams are files of the program's too (formatted output to stdout). */
static void std_files(void)
{
    static const char *const names[] = {"<stdin>", "<stdout>", "<stderr>"};
    for (int fd = 0; fd < 3; fd++) {
        int file = file_id(names[fd]);
        if (file >= 0)
            fds[fd] = (fd_entry){.file = file + 1, .unknown_pos = 1};
    }
}

int pw_io_store_start(void)
{
    max_files = pw_opt.io_max_files > 0 ? (int)pw_opt.io_max_files : 1024;
    max_threads = pw_opt.io_max_threads > 0 ? (int)pw_opt.io_max_threads : 16;
    max_sites = pw_opt.io_max_sites > 0 ? (int)pw_opt.io_max_sites : 512;
    io_sites.max_sites = (size_t)max_sites;
    site_slots = pw_keyed_slots((size_t)max_sites, 0);
    start_tick = pw_ticks();
    fds = mmap(NULL, sizeof(fd_entry) * PW_IO_MAX_FDS, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fds == MAP_FAILED) {
        fds = NULL;
        return -1;
    }
    pw_wrap_depth++; /* the store's own calls are not the program's */
    int made = make_store(0);
    pw_wrap_depth--;
    if (made == -2) /* marked unwritten: perfweave run says it with the other files */
        return -1;
    if (made != 0) {
        pw_log("io: cannot make the I/O record store in %s/io: no I/O profile",
               pw_experiment_dir());
        return -1;
    }
    std_files();
    return 0;
}

int pw_io_store_fork(void)
{
    pw_io_header_rec *old = hdr;
    pw_io_file_rec *old_files = files;
    pw_io_object_rec *old_objects = objects;
    size_t old_len = map_len;
    int64_t parent = old->pid;
    my_state = 0;
    my_thread = NULL;
    memset(last_site, 0, sizeof last_site);
    bin_lo = bin_hi = 0;
    start_tick = pw_ticks(); /* its bins count from its own start, as its t_start */
    pw_io_segments_fork_begin();
    if (make_store(parent) != 0) {
        pw_io_segments_fork_end(0);
        __atomic_fetch_add(&old->forks_dropped, 1, __ATOMIC_RELAXED);
        munmap(old, old_len);
        return -1;
    }
    memcpy(files, old_files, sizeof(pw_io_file_rec) * (size_t)max_files);
    memcpy(objects, old_objects, sizeof(pw_io_object_rec) * MAX_OBJECTS);
    hdr->nfiles = old->nfiles;
    munmap(old, old_len);
    pw_io_segments_fork_end(1);
    return 0;
}

/* Mappings still alive are estimated, the header says how the process ended. The counts
 * are in the file already. */
void pw_io_store_end(int state)
{
    if (!hdr)
        return;
    pw_io_call c = {.fn = -1, .layer = PW_IO_POSIX, .op = PW_IO_MMAP};
    for (int i = 0; i < MAX_MAPS; i++) {
        map_entry *m = &maps[i];
        uintptr_t a = __atomic_load_n(&m->addr, __ATOMIC_ACQUIRE);
        if (!a)
            continue;
        c.t0 = c.t1 = pw_ticks();
        pw_io_rec *r = rec_of(&c, m->file);
        if (r)
            r->mmap_bytes += resident_bytes(a, m->len);
    }
    touch_header(0);
    hdr->state = state;
}
