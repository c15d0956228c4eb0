/*
 * The call-site tables' file (format.h "call-site tables", docs/format.md): the slots and
 * histograms of a process's tables are pages of tables/NAME.pwtab, mapped MAP_SHARED, so
 * the kernel's page cache holds every count the moment it is made and a process that ends
 * without saving (SIGKILL from a launcher, an MPI library's _exit when its launcher is
 * gone) leaves them; tables/NAME.json describes the process (its functions, loaded
 * objects, rank). When the process saves its profile (the reduction at MPI_Finalize, a
 * partial or process profile) the saver calls pw_tables_done, which removes both files:
 * a run that ends normally leaves the experiment as it was.
 *
 * A page of a shared mapping that the file system cannot back is a SIGBUS when touched
 * (on tmpfs even a read), so nothing is touched before it has disk space: each block's
 * record page when the block is made, a histogram whole, the slots' pages one by one
 * when a site is first put there (sites.c keeps a private bitmap of them). What finds no
 * room stays in private memory: the process's own profile still has it, the file does
 * not, and its head counts the pages so.
 *
 * The file is reopened by its path for every change of its size or space: no descriptor
 * of ours stays open, since a program that closes every descriptor, or reuses a number,
 * must not have its own file extended by us. What the runtime does here is not the
 * program's (pw_wrap_depth: the I/O wrappers let it through).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pw.h"
#include "wrap.h"

static struct {
    int state;                /* 0: no file yet, 1: a file, -1: none (failed, or done) */
    int lock;                 /* the file's size, its head, and who makes it */
    pw_tables_head_rec *head; /* mapped: the file's first page */
    pw_rank_rec rank;         /* kept until there is a file, then there too */
    int world_size;
    char path[4300], json[4300];
} tf = {.rank = {.rank = -1, .thread_level = -1}};

#define PAGE PW_TABLES_PAGE

static int describe_gen, describe_lock;

static pw_rank_rec *head_rank(void) { return (pw_rank_rec *)(tf.head + 1); }

static int trylock(void)
{
    /* bounded: a signal handler that records a call while its thread holds the lock (say a
     * program's handler calling a measured function) must not wait for itself */
    for (int i = 0; i < 1000000; i++) {
        if (!__atomic_exchange_n(&tf.lock, 1, __ATOMIC_ACQUIRE))
            return 1;
        pw_cpu_relax();
    }
    return 0;
}

static void unlock(void) { __atomic_store_n(&tf.lock, 0, __ATOMIC_RELEASE); }

static int open_file(void) { return open(tf.path, O_RDWR | O_CLOEXEC); }

int pw_tables_reserve(int64_t off, size_t len)
{
    if (__atomic_load_n(&tf.state, __ATOMIC_ACQUIRE) <= 0)
        return -1; /* no file, or no more */
    pw_wrap_depth++;
    int saved_errno = errno, fd = open_file(), rc = -1;
    if (fd >= 0) {
        rc = pw_reserve_disk(fd, (off_t)off, len);
        close(fd);
    }
    errno = saved_errno;
    pw_wrap_depth--;
    return rc;
}

void pw_tables_page_lost(void)
{
    pw_tables_head_rec *h = tf.head;
    if (h && __atomic_load_n(&tf.state, __ATOMIC_ACQUIRE) > 0)
        __atomic_fetch_add(&h->private_pages, 1, __ATOMIC_RELAXED);
}

/* The description, written whole under a temporary name and renamed: a killed process
 * leaves its last complete one. Not marked when it cannot be written (a full disk): the
 * tables file is a fallback, and the process's own profile may still be written. */
static int describe_now(void)
{
    pw_buf b = {0};
    pw_json j;
    pw_buf_json_head(&j, &b, PW_TABLES_MAGIC, PW_TABLES_VERSION);
    pw_json_int(&j, "world_size", tf.world_size);
    pw_json_int(&j, "hist_buckets", PW_HIST_BUCKETS);
    pw_json_int(&j, "max_callsites", pw_opt.max_callsites);
    pw_functions_json(&j);
    pw_json_strs(&j, PW_PROFILE_EVENTS_KEY, pw_event_names, (size_t)pw_nevents);
    pw_objects_ranges_json(&j, "objects");
    pw_json_end(&j);
    tf.head->ns_per_tick = pw_ns_per_tick();
    int rc = -1;
    if (!b.failed) {
        pw_file f;
        if (pw_file_open(&f, tf.json) == 0)
            pw_file_write(&f, b.data, b.len);
        f.quiet = 1;
        rc = pw_file_close(&f);
    }
    pw_buf_free(&b);
    return rc;
}

/* Create EXP/tables/HOST.PID[.N].pwtab with its head page on disk and mapped (a process
 * of this pid may have made one already: the program it exec'd from). Under the lock. */
static int create_file(void)
{
    char num[24], n[24], dir[4300];
    pw_fmt_int(num, getpid());
    if (pw_experiment_path(dir, sizeof dir, "tables") != 0)
        return -1;
    int fd = -1;
    for (int k = 0, tries = 0; k < 100 && fd < 0; k++) {
        if (k == 0) /* (again, if a process that saved removed it as it became empty) */
            mkdir(dir, 0777);
        pw_fmt_int(n, k);
        const char *dot = k ? "." : "", *kth = k ? n : "";
        if (pw_experiment_path(tf.path, sizeof tf.path, "tables/", pw_hostname, ".", num, dot, kth,
                               ".pwtab") != 0 ||
            pw_experiment_path(tf.json, sizeof tf.json, "tables/", pw_hostname, ".", num, dot, kth,
                               ".json") != 0)
            return -1;
        fd = open(tf.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == ENOENT && tries++ < 3)
            k = -1;
        else if (fd < 0 && errno != EEXIST)
            return -1;
    }
    if (fd < 0)
        return -1;
    void *m = MAP_FAILED;
    if (ftruncate(fd, PAGE) == 0 && pw_reserve_disk(fd, 0, PAGE) == 0)
        m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        unlink(tf.path);
        return -1;
    }
    pw_tables_head_rec *h = m;
    h->version = PW_TABLES_VERSION;
    h->pid = (int32_t)getpid();
    h->state = -1;
    h->bytes = PAGE;
    h->tick_start = pw_tick_start;
    h->t_start = pw_t_start;
    h->ns_per_tick = pw_ns_per_tick();
    size_t entry, events_offset, nslots;
    pw_sitetab_layout(&entry, &events_offset, &nslots);
    h->nslots = (int64_t)nslots;
    h->entry_size = (int32_t)entry;
    h->events_offset = (int32_t)events_offset;
    h->nevents = pw_nevents;
    h->callsite_depth = (int32_t)pw_opt.callsite_depth;
    tf.head = h;
    *head_rank() = tf.rank;
    __atomic_store_n(&h->magic, PW_TABLES_MAGIC_NUMBER, __ATOMIC_RELEASE);
    if (describe_now() != 0) { /* a file nobody could read: none */
        munmap(m, PAGE);
        tf.head = NULL;
        unlink(tf.path);
        return -1;
    }
    return 0;
}

int pw_tables_block(int kind, int thread, int first, int count, size_t bytes, int whole,
                    pw_table_block_rec **rec, char **data, int64_t *data_offset, void **map,
                    size_t *map_len)
{
    if (__atomic_load_n(&tf.state, __ATOMIC_ACQUIRE) < 0 || !pw_experiment_dir())
        return -1;
    size_t len = PAGE + (bytes + PAGE - 1) / PAGE * PAGE;
    void *m = MAP_FAILED;
    pw_wrap_depth++;
    int saved_errno = errno;
    if (!trylock())
        goto out;
    if (tf.state == 0)
        tf.state = create_file() == 0 ? 1 : -1;
    if (tf.state > 0) {
        int fd = open_file();
        off_t off = (off_t)tf.head->bytes;
        if (fd >= 0 && ftruncate(fd, off + (off_t)len) == 0 &&
            pw_reserve_disk(fd, off, whole ? len : PAGE) == 0)
            m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
        if (fd >= 0)
            close(fd);
        if (m != MAP_FAILED) {
            pw_table_block_rec *r = m;
            r->thread = thread;
            r->first = first;
            r->count = count;
            r->bytes = (int64_t)bytes;
            __atomic_store_n(&r->kind, kind, __ATOMIC_RELEASE); /* complete */
            __atomic_store_n(&tf.head->bytes, (int64_t)(off + (off_t)len), __ATOMIC_RELEASE);
            *rec = r;
            *data = (char *)m + PAGE;
            *data_offset = (int64_t)off + PAGE;
            *map = m;
            *map_len = len;
        }
    }
    unlock();
out:
    errno = saved_errno;
    pw_wrap_depth--;
    return m == MAP_FAILED ? -1 : 0;
}

void pw_tables_describe(void)
{
    __atomic_add_fetch(&describe_gen, 1, __ATOMIC_ACQ_REL);
    /* one writer at a time; a change made while another writes is written by it (it
     * writes again until the generation it wrote is the latest) */
    while (__atomic_load_n(&tf.state, __ATOMIC_ACQUIRE) > 0 &&
           !__atomic_exchange_n(&describe_lock, 1, __ATOMIC_ACQUIRE)) {
        int gen;
        pw_wrap_depth++;
        do {
            gen = __atomic_load_n(&describe_gen, __ATOMIC_ACQUIRE);
            if (__atomic_load_n(&tf.state, __ATOMIC_ACQUIRE) > 0)
                describe_now();
        } while (gen != __atomic_load_n(&describe_gen, __ATOMIC_ACQUIRE));
        pw_wrap_depth--;
        __atomic_store_n(&describe_lock, 0, __ATOMIC_RELEASE);
        if (gen == __atomic_load_n(&describe_gen, __ATOMIC_ACQUIRE))
            break;
    }
}

void pw_tables_rank(const pw_rank_rec *r, int world_size)
{
    tf.rank = *r;
    tf.world_size = world_size;
    if (__atomic_load_n(&tf.state, __ATOMIC_ACQUIRE) > 0)
        *head_rank() = *r; /* the job's size reaches the description with its next writing */
}

void pw_tables_done(int state, int saved)
{
    if (!trylock())
        return;
    int had = tf.state > 0;
    __atomic_store_n(&tf.state, -1, __ATOMIC_RELEASE);
    if (had) {
        tf.head->state = state;
        if (saved) {
            /* the process's profile says it all: the file would only repeat it, and its
             * disk space is freed now, for the files still to be written (the tables go on
             * in private memory: a process may record after its profile was saved) */
            pw_wrap_depth++;
            int saved_errno = errno;
            pw_sitetabs_privatize();
            /* the head too (a description being written may still read it) */
            char *keep = pw_alloc(PAGE);
            if (keep) {
                memcpy(keep, tf.head, PAGE);
                if (mmap(tf.head, PAGE, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED)
                    memcpy(tf.head, keep, PAGE);
                pw_release(keep, PAGE);
            }
            unlink(tf.json);
            unlink(tf.path);
            char dir[4300]; /* the last process of a run that ended well leaves no folder */
            if (pw_experiment_path(dir, sizeof dir, "tables") == 0)
                rmdir(dir);
            errno = saved_errno;
            pw_wrap_depth--;
        }
    }
    unlock();
}

void pw_tables_forget(void)
{
    if (tf.head)
        munmap(tf.head, PAGE);
    tf.head = NULL;
    tf.lock = describe_lock = 0;
    tf.state = 0;
    tf.rank = (pw_rank_rec){.rank = -1, .thread_level = -1};
    tf.world_size = 0;
}
