/*
 * The io module (io.c, --io): POSIX, stdio and MPI-IO calls per file, layer, thread and
 * call site, in a file-backed record store (include/perfweave/format/io.h). Uses of the
 * core: pw_opt.io*, wrap.h, pw_thread_activity (calls made inside a measured MPI call of
 * another family than MPI-IO, e.g. MPI_Init's, are the MPI library's, not the program's
 * I/O), pw_rank, the loaded-object snapshot, the experiment directory. Hook it sets:
 * pw_hooks.file_call (the MPI module's MPI_File_* wrappers call it).
 *
 * This header is also the interface of its generated wrappers (runtime/io/gen_io.py):
 * each calls pw_io_enter, pw_io_begin, the real function, then one recording function
 * of its OP, then pw_io_leave.
 */
#ifndef PW_MODULES_IO_H
#define PW_MODULES_IO_H

#include <stdio.h>

#include "perfweave/format/io.h"
#include "pw.h"
#include "wrap.h"

extern const pw_module pw_module_io;

typedef struct pw_io_call {
    int fn, layer, op,
        first; /* op: PW_IO_OPS; first: this call began a period of I/O of the process */
    uintptr_t ra;
    int64_t t0, t1; /* ticks */
} pw_io_call;

extern int pw_io_on; /* the module records (--io, and its store could be made) */
/* Calls of POSIX and stdio in flight in the process, and the start of the current period
 * with one or more: the process's I/O time with overlapping calls counted once. */
extern int pw_io_inflight;
extern int64_t pw_io_busy_start;
extern int64_t *pw_io_busy_ticks;

/* The real function `name` (NULL when the C library lacks it: its wrapper is disabled). */
void *pw_io_real(const char *name, int *looked);

/* Record this call: the module is on, the process measured, the thread not already in
 * a wrapper, and not inside a measured MPI call other than an MPI-IO one. */
static inline int pw_io_enter(void)
{
    int a = pw_thread_activity;
    if (PW_UNLIKELY(a > 0 && a <= PW_NFAMILIES && a != 1 + PW_FAMILY_FILE))
        return 0;
    return pw_wrap_enter();
}
static inline void pw_io_begin(pw_io_call *c)
{
    c->first = __atomic_fetch_add(&pw_io_inflight, 1, __ATOMIC_ACQ_REL) == 0;
    c->t0 = pw_ticks();
    if (c->first)
        __atomic_store_n(&pw_io_busy_start, c->t0, __ATOMIC_RELAXED);
}
static inline void pw_io_leave(pw_io_call *c)
{
    /* the start read before leaving: a call that begins after this one left starts a
     * new period; one that began before it keeps the count above 0 */
    int64_t start = __atomic_load_n(&pw_io_busy_start, __ATOMIC_RELAXED);
    if (__atomic_sub_fetch(&pw_io_inflight, 1, __ATOMIC_ACQ_REL) == 0 && pw_io_busy_ticks)
        __atomic_fetch_add(pw_io_busy_ticks, c->t1 - start, __ATOMIC_RELAXED);
    pw_wrap_leave();
}

static inline int pw_io_needs_mode(int flags)
{
#ifdef __O_TMPFILE
    return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE;
#else
    return (flags & O_CREAT) != 0;
#endif
}

/* The recording functions, one per OP of io.spec. */
void pw_io_open(pw_io_call *c, const char *path, int fd);
void pw_io_fopen(pw_io_call *c, const char *path, FILE *fp);
void pw_io_fdopen(pw_io_call *c, int fd, FILE *fp);
int pw_io_fd_file(int fd);     /* the file a descriptor is of; -1 none */
int pw_io_stream_fd(FILE *fp); /* a stream's descriptor; -1 none */
void pw_io_close(pw_io_call *c, int fd, int file, int rc);
void pw_io_dup(pw_io_call *c, int fd, int newfd);
void pw_io_fcntl(pw_io_call *c, int fd, int cmd, int rc);
void pw_io_rw(pw_io_call *c, int fd, int64_t bytes, int64_t offset);
void pw_io_stream_rw(pw_io_call *c, FILE *fp, int64_t bytes);
void pw_io_seek(pw_io_call *c, int fd, int64_t pos);
void pw_io_stream_seek(pw_io_call *c, FILE *fp);
void pw_io_path_op(pw_io_call *c, const char *path);
void pw_io_fd_op(pw_io_call *c, int fd);
void pw_io_mmap(pw_io_call *c, int fd, void *addr, size_t len, int64_t offset);
int64_t pw_io_unmap_begin(void *addr, size_t len);
void pw_io_munmap(pw_io_call *c, int64_t estimate);

#endif
