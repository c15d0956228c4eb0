/*
 * The MPI module's interface to its generated wrappers (gen_wrappers.py).
 *
 * Every wrapper: resolve the real function once; if not recording, or already
 * inside a wrapper of this thread (a Fortran binding calling the C one, MPI
 * calling itself), call it and return; otherwise time the one real call, fill a
 * pw_args from the arguments tagged with roles in mpi.spec and hand both to
 * pw_mpi_leave(), which decides what the call means from its ACTION.
 */
#ifndef PW_MODULES_MPI_H
#define PW_MODULES_MPI_H

#include <errno.h>

#include <mpi.h>

#include "core/pw.h"
#include "modules/counters.h"
#include "modules/mpi_loader.h"

#ifdef OPEN_MPI
/* Open MPI's predefined handles (MPI_COMM_WORLD, MPI_BYTE, MPI_COMM_NULL, ...) are
 * addresses of objects in libmpi. The runtime is preloaded into launchers too,
 * which have no libmpi: every such object a module uses is a weak reference. */
#pragma weak ompi_mpi_comm_world
#pragma weak ompi_mpi_comm_null
#pragma weak ompi_mpi_byte
#pragma weak ompi_mpi_int
#pragma weak ompi_mpi_datatype_null
#pragma weak ompi_request_null
#pragma weak ompi_mpi_group_null
#pragma weak ompi_mpi_win_null
#pragma weak ompi_mpi_file_null
#endif
/* Fortran sentinels are data of the MPI library in both implementations. */
#pragma weak MPI_F_STATUS_IGNORE
#pragma weak MPI_F_STATUSES_IGNORE
#ifdef MPICH
#pragma weak MPI_F08_STATUS_IGNORE
#pragma weak MPI_F08_STATUSES_IGNORE
#endif
#ifndef MPI_F_STATUS_SIZE /* MPI-4; a Fortran status is the C one as integers */
#define MPI_F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif

/* Receives whose source the communication matrix learns only at their completion (an
 * MPI_Irecv or persistent receive from MPI_ANY_SOURCE, an MPI_Imrecv) are pending: while
 * any is, the completion calls' wrappers supply a status where the program ignores it. */
extern int pw_mpi_matrix_waits;
MPI_Fint *pw_mpi_matrix_fstatuses(int n, MPI_Fint *ignored);

/* Whether a Fortran status (array) argument is one of the library's "ignore" sentinels. */
static inline int pw_f_status_ignored(const void *st)
{
    if (st == (const void *)MPI_F_STATUS_IGNORE || st == (const void *)MPI_F_STATUSES_IGNORE)
        return 1;
#ifdef MPICH /* use mpi_f08 has sentinels of its own (same status layout) */
    if (st == (const void *)MPI_F08_STATUS_IGNORE || st == (const void *)MPI_F08_STATUSES_IGNORE)
        return 1;
#endif
    return 0;
}

/* Marks a generated wrapper: the core's stub of the same name jumps to it once the
 * core's MPI loader has chosen this library (mpi_loader.c); nobody else sees it
 * (mpi.map exports only the wrapper table). */
#define PW_WRAPPER

/* Actions of mpi.spec (one body each in pw_mpi_leave): PW_MPI_ACTIONS of pw_mpi_fn.h, which
 * gen_wrappers.py writes from its ACTIONS. */
#define PW_ACTION_ENUM(k) PW_ACTION_##k,
enum pw_mpi_action { PW_MPI_ACTIONS(PW_ACTION_ENUM) PW_MPI_NACTIONS };
#undef PW_ACTION_ENUM

/* Values of the role-tagged arguments of one call. Wrappers set `fortran` and the
 * roles their spec line tags, nothing else: an action reads only roles that every
 * function of that action has. In Fortran wrappers the handles are already
 * converted to C; arrays of datatypes (stypes, rtypes) and requests stay Fortran
 * integers, as `fortran` says. */
typedef struct pw_args {
    const void *buf, *rbuf;
    int64_t count; /* MPI_Count of the MPI-4 _c forms */
    int scount, rcount;
    MPI_Datatype type, stype, rtype;
    const int *scounts, *rcounts;
    const void *stypes, *rtypes;
    int peer, source, tag, root, target, nreq, level; /* source: Sendrecv's; tag: also
                                                         the lock type of Win_lock */
    MPI_Comm comm;
    MPI_Win win;
    MPI_File file;
    MPI_Group group;
    MPI_Offset offset;
    const char *path; /* File_open's name: path_len bytes, not NUL-terminated, from Fortran */
    int path_len;     /* -1: NUL-terminated */
    const void *newfile;
    const void *request, *requests, *status, *statuses, *newcomm, *newwin;
    const void *flag, *index, *outcount, *indices; /* outputs of the Wait/Test family */
    const void *message; /* MPI_Message * of the matched probes and receives */
    int fortran;
} pw_args;

typedef struct pw_call {
    int fn;
    int family; /* its function's, or PW_FAMILY_FILE for the completion of MPI-IO requests */
    void *ra;
    int64_t t0; /* ticks */
} pw_call;

extern int pw_mpi_recording;                 /* between MPI_Init and MPI_Finalize, Pcontrol on */
extern PW_TLS int pw_mpi_depth;              /* wrapper nesting of this thread */
extern const signed char pw_mpi_fn_family[]; /* each function's family (PW_FAMILY_*) */

/* The counters module's hook around each recorded call (counters.h), found when MPI_Init
 * returns, before the first call is recorded; NULL without counters. */
extern pw_counters_call_enter_fn *pw_mpi_call_enter;

static inline int pw_mpi_nested(void) { return pw_mpi_depth > 0; }
static inline void pw_mpi_nest(void) { pw_mpi_depth++; }
static inline void pw_mpi_unnest(void) { pw_mpi_depth--; }

/* For a stack walker's frame-pointer walk (pw_want_anchor): the frame of the wrapper
 * this is inlined into. */
static inline __attribute__((always_inline)) void pw_mpi_anchor(void)
{
    if (pw_want_anchor) {
        pw_call_anchor = (uintptr_t)__builtin_frame_address(0);
        pw_call_here = (uintptr_t)pw_code_here();
    }
}

static inline __attribute__((always_inline)) int pw_mpi_enter(pw_call *c, int fn, void *ra)
{
    if (PW_UNLIKELY(!__atomic_load_n(&pw_mpi_recording, __ATOMIC_ACQUIRE)) || pw_mpi_depth) {
        /* recording stopped by a fatal signal's save (pw_dying set before it): the
         * program goes no further than what was saved */
        if (PW_UNLIKELY(__atomic_load_n(&pw_dying, __ATOMIC_ACQUIRE)))
            pw_hold();
        return 0;
    }
    pw_mpi_depth++;
    c->fn = fn;
    c->family = pw_mpi_fn_family[fn];
    c->ra = ra;
    pw_thread_activity = 1 + c->family;
    pw_mpi_anchor();
    if (PW_UNLIKELY(pw_mpi_call_enter != NULL))
        pw_mpi_call_enter(); /* before the clock: e.g. a counter read is not the call's time */
    c->t0 = pw_ticks();
    return 1;
}

/* Bytes of count elements of a datatype; MPI_BYTE of the running MPI. */
int64_t pw_mpi_type_bytes(int64_t count, MPI_Datatype t);
MPI_Datatype pw_mpi_byte(void);

/* Tracing (--trace, runtime/modules/mpi_trace.c). */
extern int pw_trace_on;
MPI_Status *pw_trace_statuses(int n); /* room for statuses the program ignores */
/* Clock offsets to rank 0 (and their errors) at MPI_Init and MPI_Finalize. */
typedef struct pw_trace_clock {
    int64_t offset_init, offset_init_err, offset_fini, offset_fini_err, t_init, t_fini;
} pw_trace_clock;
void pw_trace_start(int rank, int size, MPI_Comm world);
/* The rank's description while it runs; clock->t_init: the application's start. */
void pw_trace_running(const pw_trace_clock *clock);
void pw_trace_before(int action, const pw_args *a);
void pw_trace_call(const pw_call *c, int64_t t1, int action, const pw_args *a, int64_t sent,
                   int64_t recv);
void pw_trace_end(int state, const pw_trace_clock *clock);
void pw_trace_pcontrol(int level, int64_t t); /* a PCONTROL record */

/* Before the real call, for actions whose arguments it changes (Request_free, Wait); a
 * completion of MPI-IO requests becomes c's family file. */
void pw_mpi_before(pw_call *c, int action, const pw_args *a);
/* The status of completion i (the statuses array's) or the single one, as C's; 0 where the
 * program ignores it. */
int pw_mpi_status_at(const pw_args *a, int i, int single, MPI_Status *out);
/* Records the call (errno is preserved); a is NULL for actions without bytes. */
void pw_mpi_leave(pw_call *c, int action, const pw_args *a);

/* Hooks of the control actions. */
void pw_mpi_init_done(int fn, void *ra, int64_t t0, int provided);
void pw_mpi_finalize_begin(int fn, void *ra);
void pw_mpi_finalize_done(void);
void pw_mpi_abort(void *ra);
void pw_mpi_pcontrol(int level);

/* Real functions: PMPI_* of the C binding, and for a Fortran symbol the next
 * definition of the same name (its MPI library's). Abort with a message when
 * the MPI library lacks it. */
void *pw_mpi_real(const char *name);
void *pw_mpi_fortran_real(const char *name, void *self);

/* Fortran handle conversion (macros in MPICH, functions in Open MPI). */
MPI_Comm pw_comm_f2c(MPI_Fint h);
MPI_Datatype pw_type_f2c(MPI_Fint h);
MPI_Win pw_win_f2c(MPI_Fint h);
MPI_File pw_file_f2c(MPI_Fint h);
MPI_Request pw_request_f2c(MPI_Fint h);
MPI_Group pw_group_f2c(MPI_Fint h);

#endif
