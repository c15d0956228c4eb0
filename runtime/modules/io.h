/*
 * The io module (io.c, --io): POSIX, stdio and MPI-IO calls per file, layer, thread and
 * call site, in a file-backed record store (io_store.c, include/perfweave/format/io.h),
 * and each call's interval with --trace (io_segments.c, io_segments.h). Uses of the
 * core: pw_opt.io*, wrap.h, pw_thread_activity (calls made inside a measured MPI call of
 * another family than MPI-IO, e.g. MPI_Init's, are the MPI library's, not the program's
 * I/O), pw_rank, the loaded-object snapshot, the program's frame of a call
 * (user_frame.h), the experiment directory. Hook it offers (below): pw_io_file_call (the
 * MPI module's MPI_File_* wrappers call it).
 *
 * This header is also the interface of its generated wrappers (runtime/io/gen_io.py):
 * each calls pw_io_enter, pw_io_begin, the real function, then one recording function
 * of its OP, then pw_io_leave.
 */
#ifndef PW_MODULES_IO_H
#define PW_MODULES_IO_H

#include <fcntl.h>
#include <stdio.h>

#include "perfweave/format/io.h"
#include "pw.h"
#include "wrap.h"

extern const pw_module pw_module_io;

/* ---- the hook it offers, in its start when it records (pw.h "hooks") ---- */
/* A file operation of a library with file handles of its own (MPI-IO), for a module
 * that profiles files: what the call did, after it returned. */
enum pw_file_op {
    PW_FILE_OPEN,  /* path: the name; handle: the new handle */
    PW_FILE_CLOSE, /* handle: the one closed */
    PW_FILE_READ,  /* bytes: read (requested, for a nonblocking call or a split collective's
                    * _begin); -1: the completion of an earlier call (_end), time only */
    PW_FILE_WRITE,
    PW_FILE_SEEK,
    PW_FILE_SYNC,
    PW_FILE_OTHER, /* size, info, ... */
    PW_FILE_VIEW   /* MPI_File_set_view */
};
/* The form of a read, write or open (the io format's PW_IO_FORMS: Darshan's MPI-IO split
 * of calls into independent, collective, split collective and nonblocking ones). */
enum pw_file_form { PW_FILE_INDEP, PW_FILE_COLL, PW_FILE_SPLIT, PW_FILE_NB };
typedef struct pw_file_call {
    int op;           /* enum pw_file_op */
    int form;         /* enum pw_file_form: of PW_FILE_OPEN, _READ and _WRITE */
    uintptr_t handle; /* the library's handle of the file */
    const char *path; /* PW_FILE_OPEN only */
    int64_t bytes;
    int64_t offset; /* the first byte's offset in the file; -1: not known */
    int64_t t0, t1; /* ticks */
    uintptr_t ra;   /* the call site */
} pw_file_call;
/* A library's file operation ended (the MPI module's MPI_File_* wrappers call it). */
typedef void pw_io_file_call_fn(const pw_file_call *fc);

typedef struct pw_io_call { /* the header's declarations below use its tag */
    int fn, layer, op,
        first; /* op: PW_IO_OPS; first: 1 this call began a period of I/O of the process,
                * 2 it is the only I/O thread's (pw_io_begin) */
    uintptr_t ra;
    int64_t t0, t1; /* ticks */
} pw_io_call;

extern int pw_io_on;    /* the module records (--io, and its store could be made) */
#define PW_IO_PAGE 4096 /* every part of the module's files is at a multiple of it */

/* The record store (io_store.c), for the module's start, forked child and end: 0 when
 * it was made (a forked child's: a store of its own with the names, not the counts, of
 * its parent's; none, which the parent's header counts, when it cannot be made). */
int pw_io_store_start(void);
int pw_io_store_fork(void);
void pw_io_store_end(int state);
/* The MPI module's MPI_File_* calls: the hook pw_io_file_call, above. */
pw_io_file_call_fn pw_io_file_call;
/* Disk space for len bytes at off of the file at path, before a page of its shared
 * mapping is first written (0, or -1 when there is none). The file is opened for it: no
 * descriptor of ours is kept, since a program that closes every descriptor, or reuses
 * its number, must not have its own file extended by us. */
int pw_io_reserve_in(const char *path, off_t off, size_t len);
/* The process's I/O time with overlapping calls of its threads counted once (docs/io.md
 * "I/O time"). The process's first thread to make an I/O call (pw_io_role 1) adds the
 * time of its calls to *pw_io_solo_ticks, a word of the store only it writes, with no
 * atomic, as long as no other thread has made one (pw_io_shared 0); it publishes the start
 * of its call in flight in pw_io_solo_start. From the first call of a second thread on,
 * every thread counts the calls in flight in the process (pw_io_inflight) and adds each
 * period with one or more, from the start of the first to the end of the last, to
 * *pw_io_busy_ticks: overlaps once, two atomics per call. The second thread, once it has
 * set pw_io_shared, runs membarrier (a full barrier on every thread of the process) and
 * takes the first thread's call in flight, if any, into the in-flight count
 * (pw_io_adopted): that call is then ended as a shared one, never counted twice. */
extern int pw_io_shared;
extern PW_TLS int pw_io_role; /* 0: no call yet, 1: the first I/O thread, 2: another */
extern int64_t pw_io_solo_start;
extern int pw_io_inflight;
extern int64_t pw_io_busy_start;
extern int64_t *pw_io_busy_ticks, *pw_io_solo_ticks;
int pw_io_claim(void); /* the calling thread's role, set at its first call */
void pw_io_begin_shared(struct pw_io_call *c, int solo_began);
void pw_io_leave_shared(struct pw_io_call *c, int solo_began);

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
static inline __attribute__((always_inline)) void pw_io_begin(pw_io_call *c)
{
    int role = pw_io_role;
    if (PW_UNLIKELY(role == 0))
        role = pw_io_claim();
    if (PW_LIKELY(role == 1 && !__atomic_load_n(&pw_io_shared, __ATOMIC_RELAXED))) {
        c->t0 = pw_ticks();
        __atomic_store_n(&pw_io_solo_start, c->t0, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST); /* membarrier orders it on the CPU */
        if (PW_LIKELY(!__atomic_load_n(&pw_io_shared, __ATOMIC_RELAXED))) {
            c->first = 2; /* the only I/O thread: its own sum */
            return;
        }
        pw_io_begin_shared(c, 1);
        return;
    }
    c->t0 = 0;
    pw_io_begin_shared(c, 0);
}
static inline __attribute__((always_inline)) void pw_io_leave(pw_io_call *c)
{
    if (PW_LIKELY(c->first == 2)) {
        __atomic_store_n(&pw_io_solo_start, 0, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (PW_LIKELY(!__atomic_load_n(&pw_io_shared, __ATOMIC_RELAXED))) {
            int64_t *solo = pw_io_solo_ticks;
            if (PW_LIKELY(solo != NULL))
                *solo += c->t1 - c->t0;
        } else {
            pw_io_leave_shared(c, 1);
        }
    } else {
        pw_io_leave_shared(c, 0);
    }
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
void pw_io_open(pw_io_call *c, const char *path, int fd, int append);
void pw_io_fopen(pw_io_call *c, const char *path, FILE *fp, const char *mode);
void pw_io_fdopen(pw_io_call *c, int fd, FILE *fp);

/* Which calls are recorded: those on the files the program opened through the wrappers
 * (and stdin, stdout, stderr), never those on sockets, pipes, event descriptors or
 * anonymous memory (an MPI library's progress threads poll and write their wake-up pipes;
 * malloc maps memory): the generated wrappers ask before the clock starts, and such calls
 * cost a table look-up. */
#define PW_IO_MAX_FDS 65536
typedef struct pw_io_fd_entry {
    int32_t file;        /* + 1; 0: not a file of ours */
    int32_t unknown_pos; /* opened for appending: no offsets */
    int64_t pos;         /* the POSIX position, as our calls moved it */
    int64_t spos;        /* the stdio position */
} pw_io_fd_entry;
extern pw_io_fd_entry *pw_io_fds; /* by descriptor (NULL: the module is off) */
extern int pw_io_nmaps;           /* file mappings alive */

/* the file a descriptor is of; -1 none */
static inline int pw_io_fd_file(int fd)
{
    pw_io_fd_entry *t = pw_io_fds;
    return (unsigned)fd < PW_IO_MAX_FDS && t ? t[fd].file - 1 : -1;
}
/* A call that names a path is the program's I/O, but inside an MPI call one on a shared
 * object (NAME.so, NAME.so.N): the MPI library loading its components (Open MPI stats each
 * mca_*.so before it dlopens it, at the first MPI_File_open), its code, not the program's
 * data. */
int pw_io_shared_object(const char *path);
static inline int pw_io_path_file(const char *path)
{
    return PW_LIKELY(pw_thread_activity == 0) || !pw_io_shared_object(path);
}
/* a stream's descriptor; -1 none */
static inline int pw_io_stream_fd(FILE *fp) { return fp ? fileno_unlocked(fp) : -1; }
/* the file a stream is of; -1 none */
static inline int pw_io_stream_file(FILE *fp) { return pw_io_fd_file(pw_io_stream_fd(fp)); }
/* addr may be a file mapping of ours */
static inline int pw_io_maybe_mapped(const void *addr)
{
    (void)addr;
    return __atomic_load_n(&pw_io_nmaps, __ATOMIC_RELAXED) > 0;
}
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
