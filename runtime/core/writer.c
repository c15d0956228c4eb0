/*
 * Profile files (docs/format.md): one line of JSON header padded to a multiple of
 * 64 bytes, the arrays of format.h back to back, and an 8-byte end marker. The
 * header carries every string table and each array's numpy dtype, offset and
 * count, so numpy.frombuffer reads the arrays without knowing this code.
 *
 * Everything here uses mmap'ed memory and open/write/rename only, so that a rank can
 * save its data from a signal handler.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pw.h"

#define PW_END_MARKER "PWEND\n\n\n"

void pw_buf_free(pw_buf *b)
{
    pw_release(b->data, b->cap);
    b->data = NULL;
    b->len = b->cap = 0;
}

static int grow(pw_buf *b, size_t need)
{
    if (b->failed)
        return 0;
    if (b->len + need <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + need)
        cap *= 2;
    char *p = b->data ? mremap(b->data, b->cap, cap, MREMAP_MAYMOVE) : pw_alloc(cap);
    if (!p || p == MAP_FAILED) {
        b->failed = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void pw_buf_put(pw_buf *b, const void *p, size_t n)
{
    if (grow(b, n)) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
    }
}

/* A field of a record as its numpy dtype entry: [name, code] or [name, code, [length]] */
#define PW_DTYPE_FIELD(ctype, np, name)                                                            \
    pw_json_open(j, NULL, '[');                                                                    \
    pw_json_str(j, NULL, #name);                                                                   \
    pw_json_str(j, NULL, np);                                                                      \
    pw_json_close(j);
#define PW_DTYPE_ARRAY(ctype, np, name, n)                                                         \
    pw_json_open(j, NULL, '[');                                                                    \
    pw_json_str(j, NULL, #name);                                                                   \
    pw_json_str(j, NULL, np);                                                                      \
    pw_json_open(j, NULL, '[');                                                                    \
    pw_json_int(j, NULL, n);                                                                       \
    pw_json_close(j);                                                                              \
    pw_json_close(j);

/* The header's "arrays": each array's offset in the data, count, itemsize and dtype. */
static size_t put_arrays(pw_json *j, const pw_profile *p)
{
    size_t off = 0;
    pw_json_open(j, "arrays", '{');
#define PW_DESC(arr, rec, FIELDS, type)                                                            \
    pw_json_open(j, #arr, '{');                                                                    \
    pw_json_int(j, "offset", (int64_t)off);                                                        \
    pw_json_int(j, "count", (int64_t)p->n##arr);                                                   \
    pw_json_int(j, "itemsize", (int64_t)sizeof(type));                                             \
    pw_json_open(j, "dtype", '[');                                                                 \
    FIELDS(PW_DTYPE_FIELD, PW_DTYPE_ARRAY)                                                         \
    pw_json_close(j);                                                                              \
    pw_json_close(j);                                                                              \
    off += sizeof(type) * p->n##arr;
    PW_PROFILE_ARRAYS(PW_DESC)
#undef PW_DESC
    pw_json_close(j);
    return off;
}

/* ---- experiment files ----
 *
 * Every file of the experiment goes through here. A file written at once is written
 * to NAME.tmp.PID and renamed into place only when every byte was written and the
 * close succeeded, so a name of the format is never a half-written file. A file that
 * could not be written is marked instead: an empty file unwritten.REL.ERR at the top
 * of the experiment (REL: its path in the experiment, '/' and '%' written %2F and
 * %25; ERR: the errno's name), which costs an inode but no data block, so it can be
 * made on a full disk. perfweave run collects the marks into one line and
 * experiment.json; the readers report them. Only open/write/close/rename/unlink:
 * usable in a signal handler. */

/* Copy s to out[*n...] within cap - 1 bytes (cap > 0), keeping it terminated; -1 when
 * not all of it fit. */
static int cat(char *out, size_t cap, size_t *n, const char *s)
{
    while (s && *s && *n + 1 < cap)
        out[(*n)++] = *s++;
    out[*n] = 0;
    return s && *s ? -1 : 0;
}

static const struct {
    int err;
    const char *name, *text;
} errnames[] = {
    {ENOSPC, "ENOSPC", "No space left on device"},
    {EDQUOT, "EDQUOT", "Disk quota exceeded"},
    {EIO, "EIO", "Input/output error"},
    {EFBIG, "EFBIG", "File too large"},
    {EROFS, "EROFS", "Read-only file system"},
    {EACCES, "EACCES", "Permission denied"},
    {EPERM, "EPERM", "Operation not permitted"},
    {ENOENT, "ENOENT", "No such file or directory"},
    {ENOTDIR, "ENOTDIR", "Not a directory"},
    {EISDIR, "EISDIR", "Is a directory"},
    {EMFILE, "EMFILE", "Too many open files"},
    {ENFILE, "ENFILE", "Too many open files in system"},
    {ENOMEM, "ENOMEM", "Cannot allocate memory"},
    {ENAMETOOLONG, "ENAMETOOLONG", "File name too long"},
    {ESTALE, "ESTALE", "Stale file handle"},
};

/* The errno's name ("ENOSPC"), or E<number> for one not in the table. */
static const char *err_name(int err, char *buf)
{
    for (size_t i = 0; i < sizeof errnames / sizeof *errnames; i++)
        if (errnames[i].err == err)
            return errnames[i].name;
    buf[0] = 'E';
    pw_fmt_int(buf + 1, err);
    return buf;
}

static const char *err_text(int err)
{
    for (size_t i = 0; i < sizeof errnames / sizeof *errnames; i++)
        if (errnames[i].err == err)
            return errnames[i].text;
    return "Write error";
}

int pw_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno ? errno : EIO;
        if (w == 0) /* a regular file accepts nothing more: treat as full */
            return ENOSPC;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int pw_reserve_disk(int fd, off_t off, size_t len)
{
    if (fallocate(fd, 0, off, (off_t)len) == 0)
        return 0;
    if (errno != EOPNOTSUPP && errno != ENOSYS)
        return -1;
    static const char zeros[4096];
    for (size_t done = 0; done < len;) {
        ssize_t w = pwrite(fd, zeros, len - done < sizeof zeros ? len - done : sizeof zeros,
                           off + (off_t)done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

/* The mark of path (a file of the experiment) for errno err into mark (4700 bytes); -1
 * when path is not a file of the experiment or the mark's name does not fit. */
static int mark_path(char *mark, const char *path, int err)
{
    const char *exp = pw_experiment_dir();
    size_t elen = exp ? strlen(exp) : 0;
    if (!elen || strncmp(path, exp, elen) != 0 || path[elen] != '/')
        return -1; /* not a file of the experiment: nowhere to mark it */
    char name[4600], num[24];
    size_t n = 0;
    name[0] = 0;
    for (const char *s = path + elen + 1; *s; s++) { /* REL, '/' and '%' escaped */
        char one[2] = {*s, 0};
        cat(name, sizeof name, &n, *s == '/' ? "%2F" : *s == '%' ? "%25" : one);
    }
    return pw_experiment_path(mark, 4700, "unwritten.", name, ".", err_name(err, num));
}

/* The marks this process made (a hash of the path, the errno), so that a file written
 * whole later (a description rewritten at the end, after a full disk got room again)
 * takes its mark back: a mark says the experiment lacks the file. */
#define PW_MARKS 32
static struct {
    uint64_t hash;
    int err;
} marks[PW_MARKS];

static uint64_t path_hash(const char *p)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h ? h : 1;
}

void pw_file_failed(const char *path, int err)
{
    static int logged;
    char mark[4700];
    int made = -1;
    if (mark_path(mark, path, err) == 0) {
        int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) {
            close(fd);
            made = 0;
            uint64_t h = path_hash(path);
            for (int i = 0; i < PW_MARKS; i++) {
                uint64_t none = 0;
                if (__atomic_compare_exchange_n(&marks[i].hash, &none, h, 0, __ATOMIC_ACQ_REL,
                                                __ATOMIC_RELAXED)) {
                    marks[i].err = err;
                    break;
                }
            }
        }
    }
    /* without a mark nobody else can tell: one line per process */
    if (made != 0 && !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
        pw_log("cannot write %s (%s); the experiment is incomplete", path, err_text(err));
}

/* path was written whole: the marks this process made of it go. */
static void unmark(const char *path)
{
    uint64_t h = 0;
    char mark[4700];
    for (int i = 0; i < PW_MARKS; i++) {
        if (!__atomic_load_n(&marks[i].hash, __ATOMIC_ACQUIRE))
            continue;
        if (!h)
            h = path_hash(path);
        if (__atomic_load_n(&marks[i].hash, __ATOMIC_ACQUIRE) == h &&
            mark_path(mark, path, marks[i].err) == 0)
            unlink(mark);
    }
}

int pw_file_open(pw_file *f, const char *path)
{
    size_t n = 0;
    f->err = f->quiet = 0;
    cat(f->path, sizeof f->path, &n, path);
    n = 0;
    cat(f->tmp, sizeof f->tmp, &n, path);
    char num[24];
    pw_fmt_int(num, getpid());
    cat(f->tmp, sizeof f->tmp, &n, ".tmp.");
    cat(f->tmp, sizeof f->tmp, &n, num);
    /* read-write: a caller may map the file before it is renamed (activity pages) */
    f->fd = open(f->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0 && errno == ENOENT) {
        /* its directory is missing: make it, and report why that failed if it did */
        char dir[sizeof f->path];
        memcpy(dir, f->path, sizeof dir);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = 0;
            if (mkdir(dir, 0777) == 0 || errno == EEXIST)
                f->fd = open(f->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        }
    }
    if (f->fd < 0)
        f->err = errno ? errno : EIO;
    return f->err ? -1 : 0;
}

int pw_file_framed_open(pw_file *f, const char *path, pw_buf *h)
{
    while ((h->len + 1) % 64)
        pw_buf_put(h, " ", 1);
    pw_buf_put(h, "\n", 1);
    if (h->failed) {
        pw_file_failed(path, ENOMEM);
        return -1;
    }
    pw_file_open(f, path);
    return pw_file_write(f, h->data, h->len);
}

int pw_file_framed_close(pw_file *f)
{
    pw_file_write(f, PW_END_MARKER, 8);
    return pw_file_close(f);
}

int pw_file_write(pw_file *f, const void *p, size_t n)
{
    if (!f->err && n)
        f->err = pw_write_all(f->fd, p, n);
    return f->err ? -1 : 0;
}

int pw_file_close(pw_file *f)
{
    if (f->fd >= 0) {
        /* NFS and quotas may report the failure of delayed writes only here */
        if (close(f->fd) != 0 && !f->err)
            f->err = errno ? errno : EIO;
        f->fd = -1;
        if (!f->err && rename(f->tmp, f->path) != 0)
            f->err = errno ? errno : EIO;
        if (f->err)
            unlink(f->tmp);
        else
            unmark(f->path);
    }
    if (f->err && !f->quiet)
        pw_file_failed(f->path, f->err);
    return f->err ? -1 : 0;
}

int pw_file_put(const char *path, const void *p, size_t n)
{
    pw_file f;
    if (pw_file_open(&f, path) == 0)
        pw_file_write(&f, p, n);
    return pw_file_close(&f);
}

int pw_buf_to_file(pw_buf *b, const char *path)
{
    int rc = -1;
    if (b->failed)
        pw_file_failed(path, ENOMEM);
    else
        rc = pw_file_put(path, b->data, b->len);
    pw_buf_free(b);
    return rc;
}

int pw_path_in_experiment(char *out, size_t cap, ...)
{
    const char *exp = pw_experiment_dir();
    size_t n = 0;
    int rc = exp && *exp && cap > 0 ? cat(out, cap, &n, exp) : -1;
    if (rc == 0)
        rc = cat(out, cap, &n, "/");
    va_list ap;
    va_start(ap, cap);
    for (const char *s; rc == 0 && (s = va_arg(ap, const char *)) != NULL;)
        rc = cat(out, cap, &n, s);
    va_end(ap);
    if (rc != 0 && cap > 0)
        out[0] = 0; /* never a truncated path */
    return rc;
}

int pw_process_path(char *out, size_t cap, const char *dir, const char *suffix)
{
    char num[24];
    if (pw_rank >= 0) {
        pw_fmt_int(num, pw_rank);
        return pw_experiment_path(out, cap, dir, "/rank-", num, suffix);
    }
    pw_fmt_int(num, getpid());
    return pw_experiment_path(out, cap, dir, "/", pw_hostname, ".", num, suffix);
}

void pw_buf_json_head(pw_json *j, pw_buf *b, const char *format, int version)
{
    pw_json_begin(j, b);
    pw_json_str(j, "format", format);
    pw_json_int(j, "version", version);
    pw_json_int(j, "rank", pw_rank);
    pw_json_int(j, "pid", getpid());
    pw_json_str(j, "host", pw_hostname);
}

const char *pw_state_name(int state)
{
#define PW_NAME(name, value, str) [value] = str,
    static const char *const names[] = {PW_STATES(PW_NAME)};
    return state >= 0 && state < (int)(sizeof names / sizeof *names) ? names[state] : "?";
}

const char *pw_family_name(int family)
{
    static const char *const names[] = {PW_FAMILIES(PW_NAME)};
#undef PW_NAME
    return family >= 0 && family < PW_NFAMILIES ? names[family] : names[PW_FAMILY_OTHER];
}

/* The registry (pw_functions_list) as the header's "modules": one entry per module
 * with its id range and strings, and "functions", "families": the name and family of
 * each id. */
void pw_functions_json(pw_json *j)
{
    int nsets = 0;
    pw_functions *const *sets = pw_functions_list(&nsets);
    pw_json_open(j, "modules", '[');
    for (int i = 0; i < nsets; i++) {
        const pw_functions *f = sets[i];
        pw_json_open(j, NULL, '{');
        pw_json_str(j, "name", f->module);
        pw_json_int(j, "version", f->version);
        pw_json_int(j, "first", f->base);
        pw_json_int(j, "count", f->n);
        for (const char *const *kv = f->strings; kv && kv[0] && kv[1]; kv += 2)
            pw_json_str(j, kv[0], kv[1]);
        pw_json_close(j);
    }
    pw_json_close(j);
    pw_json_open(j, "functions", '[');
    for (int i = 0; i < nsets; i++)
        for (int k = 0; k < sets[i]->n; k++)
            pw_json_str(j, NULL, sets[i]->names[k]);
    pw_json_close(j);
    pw_json_open(j, "families", '[');
    for (int i = 0; i < nsets; i++)
        for (int k = 0; k < sets[i]->n; k++)
            pw_json_str(j, NULL,
                        pw_family_name(sets[i]->families ? sets[i]->families[k] : PW_FAMILY_OTHER));
    pw_json_close(j);
}

int pw_profile_write(const pw_profile *p, const char *path)
{
    pw_buf h = {0};
    pw_json j;
    pw_json_begin(&j, &h);
    pw_json_str(&j, "format", PW_PROFILE_MAGIC);
    pw_json_int(&j, "version", PW_PROFILE_VERSION);
    pw_json_bool(&j, "partial", p->partial);
    pw_json_int(&j, "world_size", p->world_size);
    pw_json_int(&j, "hist_buckets", PW_HIST_BUCKETS);
    pw_json_strs(&j, "hosts", p->hosts, p->nhosts);
    pw_json_strs(&j, "objects", p->objects, p->nobjects);
    pw_json_strs(&j, "buildids", p->buildids, p->nobjects);
    pw_functions_json(&j);
    pw_json_strs(&j, PW_PROFILE_EVENTS_KEY, p->events, p->nevents);
    pw_json_open(&j, "states", '[');
#define PW_STATE_NAME(name, value, str) pw_json_str(&j, NULL, str);
    PW_STATES(PW_STATE_NAME)
#undef PW_STATE_NAME
    pw_json_close(&j);
    size_t data_bytes = put_arrays(&j, p);
    pw_json_int(&j, "data_bytes", (int64_t)data_bytes);
    pw_json_close(&j);
    pw_file f;
    if (pw_file_framed_open(&f, path, &h) != 0 && h.failed) {
        pw_buf_free(&h);
        return -1;
    }
#define PW_WRITE(arr, rec, FIELDS, type) pw_file_write(&f, p->arr, sizeof(type) * p->n##arr);
    PW_PROFILE_ARRAYS(PW_WRITE)
#undef PW_WRITE
    int rc = pw_file_framed_close(&f);
    pw_buf_free(&h);
    return rc;
}

void pw_profile_array_set(pw_profile *p, int array, const void *rows, size_t n)
{
    switch (array) {
#define PW_SET(arr, rec, FIELDS, type)                                                             \
    case PW_ARRAY_##arr:                                                                           \
        p->arr = (type *)rows;                                                                     \
        p->n##arr = rows ? n : 0;                                                                  \
        break;
        PW_PROFILE_ARRAYS(PW_SET)
#undef PW_SET
    }
}

/* ---- this process's rows, from the thread tables ---- */

/* Bytes of [p, p + bytes) resident in memory (mincore): the tables are reserved
 * zero-filled, and only the slots that hashing touched cost anything. */
static size_t resident_bytes(const void *p, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t resident = 0, npages = page > 0 ? (bytes + (size_t)page - 1) / (size_t)page : 0;
    unsigned char vec[4096];
    for (size_t first = 0; first < npages; first += sizeof vec) {
        size_t n = npages - first < sizeof vec ? npages - first : sizeof vec;
        if (mincore((char *)p + first * (size_t)page, n * (size_t)page, vec) != 0)
            break;
        for (size_t k = 0; k < n; k++)
            resident += (vec[k] & 1) ? (size_t)page : 0;
    }
    return resident;
}

int pw_local_build(pw_local *l, const pw_rank_rec *rank)
{
    memset(l, 0, sizeof *l);
    size_t nsites = 0, nframes = 0, nthreads = 0, table_bytes = 0, resident = 0;
    int64_t dropped = 0;
    int nsets = 0, nfunctions = 0;
    pw_functions *const *sets = pw_functions_list(&nsets);
    for (int k = 0; k < nsets; k++)
        nfunctions += sets[k]->n;
    for (pw_sitetab *t = pw_sitetabs(); t; t = t->next) {
        nthreads++;
        table_bytes += t->bytes + t->hist_bytes;
        resident += resident_bytes(t->slots, t->bytes);
        for (int k = 0; k < nsets; k++) {
            const int64_t *h = __atomic_load_n(&t->hist[k], __ATOMIC_ACQUIRE);
            if (h)
                resident += resident_bytes(h, (size_t)sets[k]->n * PW_HIST_BUCKETS * 3 * 8);
        }
        dropped += t->rec->dropped;
        size_t i = 0;
        for (pw_site *s; (s = pw_site_next(t, &i)) != NULL;)
            if (s->count > 0) {
                nsites++;
                nframes += (size_t)s->nframes;
            }
    }
    int nobj = pw_objects_count();
    size_t nhist_cells = (size_t)nfunctions * PW_HIST_BUCKETS;
    size_t bytes = sizeof(pw_site_rec) * (nsites + 1) + sizeof(pw_frame_rec) * (nframes + 1) +
                   sizeof(pw_hist_rec) * (nhist_cells + 1) + sizeof(int64_t) * 3 * nhist_cells +
                   sizeof(pw_count_rec) * (nsites * (size_t)pw_nevents + 1) +
                   sizeof(int) * (size_t)(nobj + 1) + 2 * sizeof(char *) * (size_t)(nobj + 1);
    char *mem = pw_alloc(bytes);
    if (!mem)
        return -1;
    l->mem = mem;
    l->bytes = bytes;
    pw_site_rec *sites = (pw_site_rec *)mem;
    pw_frame_rec *frames = (pw_frame_rec *)(sites + nsites + 1);
    pw_hist_rec *hist = (pw_hist_rec *)(frames + nframes + 1);
    int64_t *cells = (int64_t *)(hist + nhist_cells + 1);
    pw_count_rec *counts = (pw_count_rec *)(cells + 3 * nhist_cells);
    int *objmap = (int *)(counts + nsites * (size_t)pw_nevents + 1);
    const char **objects = (const char **)(objmap + nobj + 1);
    const char **buildids = objects + nobj + 1;
    int nobjects = 0;
    for (int i = 0; i < nobj; i++)
        objmap[i] = -1;

#define PW_OBJECT_OF(addr, off_out, obj_out)                                                       \
    do {                                                                                           \
        uint64_t off_;                                                                             \
        int o_ = pw_object_of((addr), &off_);                                                      \
        if (o_ < 0) {                                                                              \
            obj_out = -1;                                                                          \
            off_out = (int64_t)(addr);                                                             \
        } else {                                                                                   \
            if (objmap[o_] < 0) {                                                                  \
                objmap[o_] = nobjects;                                                             \
                objects[nobjects] = pw_object_path(o_);                                            \
                buildids[nobjects++] = pw_object_buildid(o_);                                      \
            }                                                                                      \
            obj_out = objmap[o_];                                                                  \
            off_out = (int64_t)off_;                                                               \
        }                                                                                          \
    } while (0)

    double ns_per_tick = pw_ns_per_tick();
#define PW_NS(ticks) ((int64_t)((double)(ticks) * ns_per_tick + 0.5))
    size_t si = 0, fi = 0, ci = 0;
    for (pw_sitetab *t = pw_sitetabs(); t; t = t->next) {
        size_t i = 0;
        for (pw_site *s; si < nsites && (s = pw_site_next(t, &i)) != NULL;) {
            if (s->count <= 0)
                continue;
            for (int e = 0; e < pw_nevents; e++) {
                const int64_t *c = pw_site_events(t, s);
                if (c[e] || c[pw_nevents + e])
                    counts[ci++] = (pw_count_rec){.site = (int64_t)si,
                                                  .event = e,
                                                  .inside = c[e],
                                                  .before = c[pw_nevents + e],
                                                  .inside_ns = c[2 * pw_nevents],
                                                  .before_ns = c[2 * pw_nevents + 1]};
            }
            pw_site_rec *r = &sites[si++];
            r->rank = rank->rank;
            r->fn = s->fn;
            r->count = s->count;
            r->total_ns = PW_NS(s->total);
            r->min_ns = PW_NS(s->min);
            r->max_ns = PW_NS(s->max);
            r->bytes_sent = s->bytes_sent;
            r->bytes_recv = s->bytes_recv;
            r->first_frame = -1;
            if (s->ra == 0) { /* overflow site */
                r->object = -1;
                r->offset = 0;
            } else {
                PW_OBJECT_OF(s->ra, r->offset, r->object);
            }
            r->nframes = s->nframes;
            if (s->nframes > 0 && fi + (size_t)s->nframes <= nframes) {
                r->first_frame = (int64_t)fi;
                for (int k = 0; k < s->nframes; k++) {
                    pw_frame_rec *f = &frames[fi++];
                    PW_OBJECT_OF(s->frames[k], f->offset, f->object);
                }
            } else {
                r->nframes = 0;
            }
        }
        for (int k = 0; k < nsets; k++) { /* cells of function base + j: [base + j][b][3] */
            const int64_t *h = __atomic_load_n(&t->hist[k], __ATOMIC_ACQUIRE);
            size_t row = PW_HIST_BUCKETS * 3;
            int64_t *into = cells + (size_t)sets[k]->base * row;
            for (size_t j = 0; h && j < (size_t)sets[k]->n; j++) /* rows in use only */
                if (__atomic_load_n(&t->hist_rows[k][j], __ATOMIC_ACQUIRE))
                    for (size_t c = j * row; c < (j + 1) * row; c++)
                        into[c] += h[c];
        }
    }
    size_t hi = 0;
    for (size_t c = 0; c < nhist_cells; c++) {
        if (cells[3 * c] == 0)
            continue;
        pw_hist_rec *r = &hist[hi++];
        r->rank = rank->rank;
        r->fn = (int32_t)(c / PW_HIST_BUCKETS);
        r->bucket = (int32_t)(c % PW_HIST_BUCKETS);
        r->count = cells[3 * c];
        r->bytes = cells[3 * c + 1];
        r->total_ns = PW_NS(cells[3 * c + 2]);
    }

    l->rank = *rank;
    l->rank.host = 0;
    l->rank.nthreads = (int32_t)nthreads;
    l->rank.sites_dropped = dropped;
    l->rank.table_bytes = (int64_t)table_bytes;
    l->rank.table_resident = (int64_t)resident;
    l->rank.table_capacity = pw_opt.max_callsites;
    static const char *hosts[1];
    hosts[0] = pw_hostname;
    pw_profile *p = &l->prof;
    p->ranks = &l->rank;
    p->nranks = 1;
    p->sites = sites;
    p->nsites = si;
    p->frames = frames;
    p->nframes = fi;
    p->hist = hist;
    p->nhist = hi;
    p->counts = counts;
    p->ncounts = ci;
    p->events = pw_event_names;
    p->nevents = (size_t)pw_nevents;
    p->hosts = hosts;
    p->nhosts = 1;
    p->objects = objects;
    p->buildids = buildids;
    p->nobjects = (size_t)nobjects;
    p->world_size = 1;
    p->partial = 1;
    return 0;
}

void pw_local_free(pw_local *l) { pw_release(l->mem, l->bytes); }
