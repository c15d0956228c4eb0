/*
 * MPI module: what a wrapped call means (bytes per action, persistent requests),
 * the MPI_Init / MPI_Finalize hooks, clock offsets between ranks, and the
 * reduction of all ranks' call-site tables into one profile file written by
 * rank 0 (docs/format.md). The wrappers themselves are generated from
 * runtime/mpi/mpi.spec.
 *
 * The library is not linked against an MPI library: the core's MPI loader
 * (mpi_loader.c) loads it into a process at its first MPI call when the process's
 * MPI library is of this build's family. PMPI functions are looked up with dlsym,
 * and Open MPI's predefined objects are weak references.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>
#include "pw_mpi_fn.h"
#include "modules/io.h"
#include "keyed.h"
#include "modules/mpi_compact.h"
#include "modules/pw_mpi.h"
#include "modules/regions.h"

#ifndef PW_MPI_FLAVOR
#define PW_MPI_FLAVOR "unknown"
#endif

int pw_mpi_recording;
PW_TLS int pw_mpi_depth;

/* ---- the other modules' hooks it calls (pw.h "hooks") ---- */

/* Found once, when MPI_Init returns (no call is recorded before it): the modules that
 * offer them did so in their start, in the core's constructor. NULL: that module is off. */
pw_counters_call_enter_fn *pw_mpi_call_enter;
static pw_counters_call_leave_fn *call_leave;
static pw_counters_app_begin_fn *app_begin;
static pw_io_file_call_fn *file_call;
/* the regions module's (found at MPI_Init, or at an earlier MPI_Pcontrol) */
static pw_regions_mpi_call_fn *regions_mpi_call;
static pw_regions_pcontrol_fn *regions_pcontrol;
static pw_regions_attach_mpi_fn *regions_attach;
pw_regions_json_fn *pw_mpi_regions_json;
pw_regions_untraced_fn *pw_mpi_regions_untraced;
static pw_regions_trace_begun_fn *regions_trace_begun;
static int regions_found;

static void regions_find(void)
{
    if (regions_found)
        return;
    regions_found = 1;
    regions_mpi_call = PW_HOOK_FIND(pw_regions_mpi_call);
    regions_pcontrol = PW_HOOK_FIND(pw_regions_pcontrol);
    regions_attach = PW_HOOK_FIND(pw_regions_attach_mpi);
    pw_mpi_regions_json = PW_HOOK_FIND(pw_regions_json);
    pw_mpi_regions_untraced = PW_HOOK_FIND(pw_regions_untraced);
    regions_trace_begun = PW_HOOK_FIND(pw_regions_trace_begun);
}

static void hooks_find(void)
{
    pw_mpi_call_enter = PW_HOOK_FIND(pw_counters_call_enter);
    call_leave = PW_HOOK_FIND(pw_counters_call_leave);
    app_begin = PW_HOOK_FIND(pw_counters_app_begin);
    file_call = PW_HOOK_FIND(pw_io_file_call);
    regions_find();
}

static char library_version[MPI_MAX_LIBRARY_VERSION_STRING + 1];

static struct {
    int initialized, finalized, pcontrol_off;
    /* The region of interest: the union of MPI_Pcontrol(L != 0) .. MPI_Pcontrol(0)
     * intervals (docs/pop.md), one open since region_t0 (ns) when region_open. Once the
     * program has called MPI_Pcontrol (pcontrol_seen), recording is on exactly while an
     * interval is open, so the region's MPI time is the recorded MPI time less that of
     * the calls before the first MPI_Pcontrol (mpi_before_ticks): nothing on the calls'
     * path. pcontrol_early: called before MPI_Init, taking effect there. */
    int pcontrol_seen, pcontrol_early, region_open;
    int64_t region_t0, region_ns, region_intervals, mpi_before_ticks;
    int rank, size, thread_level;
    MPI_Comm comm; /* our duplicate of MPI_COMM_WORLD */
    int64_t t_init_enter, t_init_leave, t_fini_enter;
    int64_t offset_init, offset_init_err, offset_fini, offset_fini_err;
} st = {.rank = -1, .thread_level = -1};

/* ---- resolving the real functions ---- */

/* Symbols of the MPI library come from pw_mpi_next (the core's part of this module,
 * mpi_loader.c: the next definition after the preloaded core, also when the library
 * was loaded with RTLD_LOCAL). This library itself is loaded with RTLD_LOCAL and
 * defines no symbol anybody else sees, so it can never find itself. */

void *pw_mpi_real(const char *name)
{
    void *p = pw_mpi_next(name);
    if (!p) {
        pw_log("the MPI library has no %s; was the runtime built for another MPI? "
               "(see perfweave run --mpi)",
               name);
        abort();
    }
    return p;
}

void *pw_mpi_fortran_real(const char *name, void *self)
{
    void *p = pw_mpi_next(name);
    if (!p || p == self) {
        pw_log("no MPI library defines %s", name);
        abort();
    }
    return p;
}

/* PMPI functions the runtime itself calls. */
#define PW_INTERNAL(X)                                                                             \
    X(int, Comm_rank, (MPI_Comm, int *))                                                           \
    X(int, Comm_size, (MPI_Comm, int *))                                                           \
    X(int, Comm_test_inter, (MPI_Comm, int *))                                                     \
    X(int, Comm_remote_size, (MPI_Comm, int *))                                                    \
    X(int, Comm_dup, (MPI_Comm, MPI_Comm *))                                                       \
    X(int, Type_size, (MPI_Datatype, int *))                                                       \
    X(int, Send, (const void *, int, MPI_Datatype, int, int, MPI_Comm))                            \
    X(int, Irecv, (void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *))                  \
    X(int, Test, (MPI_Request *, int *, MPI_Status *))                                             \
    X(int, Gather, (const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm))    \
    X(int, Gatherv,                                                                                \
      (const void *, int, MPI_Datatype, void *, const int *, const int *, MPI_Datatype, int,       \
       MPI_Comm))                                                                                  \
    X(int, Get_library_version, (char *, int *))                                                   \
    X(int, Get_count, (const MPI_Status *, MPI_Datatype, int *))                                   \
    X(int, File_get_byte_offset, (MPI_File, MPI_Offset, MPI_Offset *))                             \
    X(int, Comm_create_keyval,                                                                     \
      (MPI_Comm_copy_attr_function *, MPI_Comm_delete_attr_function *, int *, void *))             \
    X(int, Comm_get_attr, (MPI_Comm, int, void *, int *))                                          \
    X(int, Comm_set_attr, (MPI_Comm, int, void *))                                                 \
    X(int, Comm_group, (MPI_Comm, MPI_Group *))                                                    \
    X(int, Comm_remote_group, (MPI_Comm, MPI_Group *))                                             \
    X(int, Group_size, (MPI_Group, int *))                                                         \
    X(int, Group_translate_ranks, (MPI_Group, int, const int *, MPI_Group, int *))                 \
    X(int, Group_free, (MPI_Group *))                                                              \
    X(int, Win_create_keyval,                                                                      \
      (MPI_Win_copy_attr_function *, MPI_Win_delete_attr_function *, int *, void *))               \
    X(int, Win_get_attr, (MPI_Win, int, void *, int *))                                            \
    X(int, Win_set_attr, (MPI_Win, int, void *))                                                   \
    X(int, Win_get_group, (MPI_Win, MPI_Group *))                                                  \
    X(int, Status_f2c, (const MPI_Fint *, MPI_Status *))

#define PW_INTERNAL_PTR(ret, name, args) ret(*name) args;
static struct {
    PW_INTERNAL(PW_INTERNAL_PTR)
} pmpi;

/* Predefined handles the runtime itself uses. Open MPI's are addresses of objects
 * in libmpi: weak references, NULL when libmpi is not in the global scope, in
 * which case the objects are looked up in the library. */
static struct {
    MPI_Comm world, comm_null;
    MPI_Datatype byte, int_;
} pre;

#ifdef OPEN_MPI
#define PW_PREDEFINED(field, type, object, constant)                                               \
    pre.field = &object ? constant : (type)pw_mpi_next(#object)
#else
#define PW_PREDEFINED(field, type, object, constant) pre.field = constant
#endif

static void resolve_predefined(void)
{
    PW_PREDEFINED(world, MPI_Comm, ompi_mpi_comm_world, MPI_COMM_WORLD);
    PW_PREDEFINED(comm_null, MPI_Comm, ompi_mpi_comm_null, MPI_COMM_NULL);
    PW_PREDEFINED(byte, MPI_Datatype, ompi_mpi_byte, MPI_BYTE);
    PW_PREDEFINED(int_, MPI_Datatype, ompi_mpi_int, MPI_INT);
}

static void resolve_internal(void)
{
    resolve_predefined();
#define PW_INTERNAL_RESOLVE(ret, name, args)                                                       \
    if (!pmpi.name)                                                                                \
        pmpi.name = (ret(*) args)pw_mpi_real("PMPI_" #name);
    PW_INTERNAL(PW_INTERNAL_RESOLVE)
}

#define PW_F2C(fn, type, cname)                                                                    \
    type fn(MPI_Fint h)                                                                            \
    {                                                                                              \
        static type (*real)(MPI_Fint);                                                             \
        if (PW_UNLIKELY(!real))                                                                    \
            real = (type(*)(MPI_Fint))pw_mpi_real("PMPI_" cname);                                  \
        return real(h);                                                                            \
    }
#ifdef MPI_Comm_f2c /* MPICH: handles are integers in both bindings */
MPI_Comm pw_comm_f2c(MPI_Fint h) { return MPI_Comm_f2c(h); }
MPI_Datatype pw_type_f2c(MPI_Fint h) { return MPI_Type_f2c(h); }
MPI_Win pw_win_f2c(MPI_Fint h) { return MPI_Win_f2c(h); }
MPI_Request pw_request_f2c(MPI_Fint h) { return MPI_Request_f2c(h); }
MPI_Group pw_group_f2c(MPI_Fint h) { return MPI_Group_f2c(h); }
static MPI_Message message_f2c(MPI_Fint h) { return MPI_Message_f2c(h); }
#else
PW_F2C(pw_comm_f2c, MPI_Comm, "Comm_f2c")
PW_F2C(pw_type_f2c, MPI_Datatype, "Type_f2c")
PW_F2C(pw_win_f2c, MPI_Win, "Win_f2c")
PW_F2C(pw_request_f2c, MPI_Request, "Request_f2c")
PW_F2C(pw_group_f2c, MPI_Group, "Group_f2c")
static PW_F2C(message_f2c, MPI_Message, "Message_f2c")
#endif
PW_F2C(pw_file_f2c, MPI_File, "File_f2c")

/* ---- bytes of a call ---- */

static int64_t type_bytes(int64_t count, MPI_Datatype t)
{
    int size = 0;
    if (count <= 0 || t == MPI_DATATYPE_NULL) /* NULL handle of either MPI */
        return 0;
    if (pmpi.Type_size(t, &size) != MPI_SUCCESS || size < 0)
        return 0;
    return count * size;
}

int64_t pw_mpi_type_bytes(int64_t count, MPI_Datatype t) { return type_bytes(count, t); }
MPI_Datatype pw_mpi_byte(void) { return pre.byte; }

/* Processes on the other side of a collective: the remote group of an
 * intercommunicator. */
static int peers(MPI_Comm comm)
{
    int inter = 0, n = 0;
    pmpi.Comm_test_inter(comm, &inter);
    if (inter)
        pmpi.Comm_remote_size(comm, &n);
    else
        pmpi.Comm_size(comm, &n);
    return n;
}

static int is_root(const pw_args *a)
{
    if (a->root == MPI_ROOT)
        return 1;
    if (a->root == MPI_PROC_NULL)
        return 0;
    int inter = 0, me = -1;
    pmpi.Comm_test_inter(a->comm, &inter);
    if (inter)
        return 0; /* a non-root member of the root's group passes MPI_PROC_NULL */
    pmpi.Comm_rank(a->comm, &me);
    return me == a->root;
}

static int64_t sum_counts(const int *counts, int n)
{
    int64_t s = 0;
    for (int i = 0; counts && i < n; i++)
        s += counts[i];
    return s;
}

static int64_t sum_w(const int *counts, const void *types, int fortran, int n)
{
    int64_t s = 0;
    for (int i = 0; counts && types && i < n; i++) {
        MPI_Datatype t =
            fortran ? pw_type_f2c(((const MPI_Fint *)types)[i]) : ((const MPI_Datatype *)types)[i];
        s += type_bytes(counts[i], t);
    }
    return s;
}

static int in_place(const pw_args *a) { return !a->fortran && a->buf == MPI_IN_PLACE; }

/* Neighbourhood collectives: number of sources and destinations. */
static void neighbours(MPI_Comm comm, int *in, int *out)
{
    int status = MPI_UNDEFINED;
    *in = *out = 0;
    static int (*topo)(MPI_Comm, int *);
    static int (*cartdim)(MPI_Comm, int *);
    static int (*graphn)(MPI_Comm, int, int *);
    static int (*distn)(MPI_Comm, int *, int *, int *);
    if (!topo) {
        topo = (int (*)(MPI_Comm, int *))pw_mpi_real("PMPI_Topo_test");
        cartdim = (int (*)(MPI_Comm, int *))pw_mpi_real("PMPI_Cartdim_get");
        graphn = (int (*)(MPI_Comm, int, int *))pw_mpi_real("PMPI_Graph_neighbors_count");
        distn =
            (int (*)(MPI_Comm, int *, int *, int *))pw_mpi_real("PMPI_Dist_graph_neighbors_count");
    }
    topo(comm, &status);
    if (status == MPI_CART) {
        int nd = 0;
        cartdim(comm, &nd);
        *in = *out = 2 * nd;
    } else if (status == MPI_GRAPH) {
        int me = 0;
        pmpi.Comm_rank(comm, &me);
        graphn(comm, me, in);
        *out = *in;
    } else if (status == MPI_DIST_GRAPH) {
        int weighted;
        distn(comm, in, out, &weighted);
    }
}

/* Requests the runtime follows: persistent ones (bytes registered at *_init, counted at
 * each Start) and those of nonblocking MPI-IO calls (MPI_File_i*), whose completion
 * (MPI_Wait, MPI_Test, ...) is MPI-IO time, family file, as the call that posted them. */
#define PW_PREQ_SLOTS 4096
struct comm_desc;
static struct preq {
    uint64_t key;
    int64_t sent, recv;
    int file; /* a nonblocking MPI-IO call's request */
    /* the communication matrix's (mx_*): the request's communicator, posting function
     * and peer (world rank, or MPI_ANY_SOURCE); a receive waiting for its completion's
     * status (pending, with its post's ticks); once: forgotten at that completion */
    const struct comm_desc *desc;
    int fn, peer, pending, once;
    int64_t ticks;
} preqs[PW_PREQ_SLOTS];
static int preq_lock;
static int file_requests; /* MPI-IO requests not yet completed: completions look only then */
int pw_mpi_matrix_waits;  /* pending receives of the matrix (pw_mpi.h) */

static uint64_t request_key(const void *req, int fortran)
{
    uint64_t k = 0;
    if (fortran) {
        MPI_Request r = pw_request_f2c(*(const MPI_Fint *)req);
        memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    } else {
        memcpy(&k, req, sizeof(MPI_Request) < sizeof k ? sizeof(MPI_Request) : sizeof k);
    }
    return k;
}

#define PW_PREQ_FREE UINT64_MAX /* tombstone: keeps probe chains intact */

static struct preq *preq_slot(uint64_t key, int create)
{
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 52) & (PW_PREQ_SLOTS - 1);
    struct preq *tomb = NULL;
    for (size_t n = 0; n < PW_PREQ_SLOTS; n++, i = (i + 1) & (PW_PREQ_SLOTS - 1)) {
        if (preqs[i].key == key)
            return &preqs[i];
        if (preqs[i].key == PW_PREQ_FREE && !tomb)
            tomb = &preqs[i];
        if (preqs[i].key == 0)
            return create ? (tomb ? tomb : &preqs[i]) : NULL;
    }
    return create ? tomb : NULL;
}

static int64_t preq_lost; /* registrations that found the table full */

static void mx_unpend(struct preq *p)
{
    p->pending = 0;
    __atomic_fetch_sub(&pw_mpi_matrix_waits, 1, __ATOMIC_RELAXED);
}

enum {
    PREQ_INIT,      /* register (sent, recv) for a new persistent request */
    PREQ_START,     /* add its bytes for a start */
    PREQ_FREE,      /* forget it (MPI_Request_free), whichever kind */
    PREQ_FILE,      /* register the request of a nonblocking MPI-IO call */
    PREQ_FILE_DONE, /* forget it if it is one: completed */
    PREQ_IS_FILE,   /* whether it is one */
};

/* Returns 1 for a request of a nonblocking MPI-IO call (PREQ_FILE_DONE, PREQ_IS_FILE). */
static int preq_op_key(uint64_t key, int op, int64_t *sent, int64_t *recv)
{
    if (!key || key == PW_PREQ_FREE)
        return 0;
    while (__atomic_exchange_n(&preq_lock, 1, __ATOMIC_ACQUIRE))
        ;
    struct preq *p = preq_slot(key, op == PREQ_INIT || op == PREQ_FILE);
    int file = p && p->key == key && p->file;
    if (p && p->key == key && p->pending && op != PREQ_START && op != PREQ_IS_FILE &&
        (op != PREQ_FILE_DONE || file))
        mx_unpend(p);
    if (op == PREQ_INIT || op == PREQ_FILE) {
        if (p) {
            if (file) /* a handle reused while we held it: counted once */
                __atomic_fetch_sub(&file_requests, 1, __ATOMIC_RELAXED);
            p->key = key;
            p->desc = NULL;
            p->file = op == PREQ_FILE;
            p->sent = op == PREQ_INIT ? *sent : 0;
            p->recv = op == PREQ_INIT ? *recv : 0;
            if (p->file)
                __atomic_fetch_add(&file_requests, 1, __ATOMIC_RELAXED);
        } else {
            preq_lost++;
        }
        if (op == PREQ_INIT)
            *sent = *recv = 0;
    } else if (op == PREQ_START && p && !file) {
        *sent += p->sent;
        *recv += p->recv;
    } else if (p && (op == PREQ_FREE || (op == PREQ_FILE_DONE && file))) {
        p->key = PW_PREQ_FREE;
        if (file)
            __atomic_fetch_sub(&file_requests, 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&preq_lock, 0, __ATOMIC_RELEASE);
    return file;
}

static int preq_op(const void *req, int fortran, int op, int64_t *sent, int64_t *recv)
{
    return preq_op_key(request_key(req, fortran), op, sent, recv);
}

/* The requests of a completion call (one for the wait action), i of n. */
static const void *request_at(const pw_args *a, int action, int i)
{
    if (action == PW_ACTION_wait)
        return a->request;
    return a->fortran ? (const void *)((const MPI_Fint *)a->requests + i)
                      : (const void *)((const MPI_Request *)a->requests + i);
}

/* The MPI-IO requests a Test, Waitany, Waitsome, Testall... may leave incomplete: their
 * keys, kept from before the call (which nulls the completed ones) to after it. */
#define FILE_WAIT_KEPT 64
#define MX_WAIT_KEPT 64
/* (and the pending receives among a completion call's requests: mx_wait_before) */
typedef struct wait_sets {
    struct {
        int n;
        int index[FILE_WAIT_KEPT];
        uint64_t key[FILE_WAIT_KEPT];
    } file;
    struct {
        int n;
        int index[MX_WAIT_KEPT];
        uint64_t key[MX_WAIT_KEPT];
    } mx;
} wait_sets;

/* A thread's wait sets, mapped at its first completion call and unmapped at its exit: not
 * thread-local storage, whose static part a flavour library loaded by dlopen (after the
 * program dlopened its MPI) shares with the MPI libraries, about 1.6 KiB in all (glibc:
 * "cannot allocate memory in static TLS block"). No map: one shared set, as good as
 * none (a lost mapping only misattributes those calls). */
static PW_TLS wait_sets *thread_waits;
static wait_sets no_waits;
static pthread_key_t waits_key;
static pthread_once_t waits_once = PTHREAD_ONCE_INIT;

static void waits_unmap(void *w) { munmap(w, sizeof(wait_sets)); }
static void waits_key_make(void) { pthread_key_create(&waits_key, waits_unmap); }

static __attribute__((noinline)) wait_sets *waits_map(void)
{
    void *m =
        mmap(NULL, sizeof(wait_sets), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return &no_waits;
    pthread_once(&waits_once, waits_key_make);
    pthread_setspecific(waits_key, m);
    return thread_waits = m;
}

static inline wait_sets *waits(void)
{
    return PW_LIKELY(thread_waits != NULL) ? thread_waits : waits_map();
}
#define file_wait (waits()->file)
#define mx_wait (waits()->mx)

/* A completion call whose requests include one of a nonblocking MPI-IO call is MPI-IO
 * time (family file). Wait and Waitall complete them all: forgotten now; the others after
 * the call, those it says it completed (file_wait_done). */
static __attribute__((noinline)) void file_wait_before(pw_call *c, int action, const pw_args *a)
{
    int n = action == PW_ACTION_wait ? 1 : a->nreq, all = action == PW_ACTION_wait ? !a->flag : 0;
    if (action == PW_ACTION_waitmulti)
        all = !a->flag && !a->index && !a->outcount; /* Waitall */
    int64_t s = 0, r = 0;
    file_wait.n = 0;
    for (int i = 0; i < n; i++) {
        const void *req = request_at(a, action, i);
        if (!req)
            continue;
        uint64_t key = request_key(req, a->fortran);
        if (!preq_op_key(key, all ? PREQ_FILE_DONE : PREQ_IS_FILE, &s, &r))
            continue;
        c->family = PW_FAMILY_FILE;
        if (!all && file_wait.n < FILE_WAIT_KEPT) {
            file_wait.index[file_wait.n] = i;
            file_wait.key[file_wait.n++] = key;
        }
    }
    if (c->family == PW_FAMILY_FILE)
        pw_thread_activity = 1 + PW_FAMILY_FILE;
}

/* Whether request i of a completion call completed, and where its status is (*at: its
 * index in the statuses array; -1: the single status argument). */
static int completed(int action, const pw_args *a, int i, int *at)
{
    int base = a->fortran ? 1 : 0;
    *at = -1;
    if (a->flag && !*(const int *)a->flag) /* Test, Testall, Testany: none */
        return 0;
    if (action == PW_ACTION_wait) /* Wait, Test: its one request */
        return 1;
    if (a->index) /* Waitany, Testany: the one it completed */
        return *(const int *)a->index - base == i;
    if (a->outcount) { /* Waitsome, Testsome */
        int m = *(const int *)a->outcount;
        for (int j = 0; j < m && m != MPI_UNDEFINED; j++)
            if (((const int *)a->indices)[j] - base == i) {
                *at = j;
                return 1;
            }
        return 0;
    }
    *at = i; /* Waitall, Testall: all */
    return 1;
}

/* After a Test, Waitany, Waitsome, Testall, Testany, Testsome of MPI-IO requests: the
 * requests it completed are forgotten (their handles will be reused). */
static void file_wait_done(int action, const pw_args *a)
{
    int64_t s = 0, r = 0;
    int at;
    for (int k = 0; k < file_wait.n; k++)
        if (completed(action, a, file_wait.index[k], &at))
            preq_op_key(file_wait.key[k], PREQ_FILE_DONE, &s, &r);
    file_wait.n = 0;
}

int pw_mpi_status_at(const pw_args *a, int i, int single, MPI_Status *out)
{
    const void *st = single ? a->status : a->statuses;
    if (!st)
        return 0;
    if (a->fortran) {
        if (pw_f_status_ignored(st))
            return 0;
        pmpi.Status_f2c((const MPI_Fint *)st + (single ? 0 : i * MPI_F_STATUS_SIZE), out);
        return 1;
    }
    if (st == (const void *)MPI_STATUS_IGNORE || st == (const void *)MPI_STATUSES_IGNORE)
        return 0;
    *out = ((const MPI_Status *)st)[single ? 0 : i];
    return 1;
}

MPI_Fint *pw_mpi_matrix_fstatuses(int n, MPI_Fint *ignored)
{
    size_t ints = (size_t)(n > 0 ? n : 1) * MPI_F_STATUS_SIZE;
    MPI_Status *b = pw_trace_statuses(
        (int)((ints * sizeof(MPI_Fint) + sizeof(MPI_Status) - 1) / sizeof(MPI_Status)));
    return b == MPI_STATUSES_IGNORE ? ignored : (MPI_Fint *)b;
}

static void mx_wait_before(int action, const pw_args *a);

/* A matched probe's message (MPI_Message *), as the key of its entry in preqs. */
static uint64_t message_key(const void *m, int fortran)
{
    MPI_Message h = fortran ? message_f2c(*(const MPI_Fint *)m) : *(const MPI_Message *)m;
    uint64_t k = 0;
    memcpy(&k, &h, sizeof h < sizeof k ? sizeof h : sizeof k);
    return k;
}

static PW_TLS uint64_t mrecv_key; /* an Mrecv's or Imrecv's message, before it is consumed */

void pw_mpi_before(pw_call *c, int action, const pw_args *a)
{
    int64_t s = 0, r = 0;
    if (action == PW_ACTION_mrecv)
        mrecv_key = a->message ? message_key(a->message, a->fortran) : 0;
    if (action == PW_ACTION_request_free)
        preq_op(a->request, a->fortran, PREQ_FREE, &s, &r);
    else if ((action == PW_ACTION_wait || action == PW_ACTION_waitmulti) &&
             PW_UNLIKELY(__atomic_load_n(&file_requests, __ATOMIC_RELAXED) > 0))
        file_wait_before(c, action, a);
    if ((action == PW_ACTION_wait || action == PW_ACTION_waitmulti) &&
        PW_UNLIKELY(__atomic_load_n(&pw_mpi_matrix_waits, __ATOMIC_RELAXED) > 0))
        mx_wait_before(action, a);
    if (PW_UNLIKELY(pw_trace_on))
        pw_trace_before(action, a);
}

static void call_bytes(int action, const pw_args *a, int64_t *sent, int64_t *recv)
{
    int64_t s = 0, r = 0;
    int n, in, out;
    switch (action) {
    case PW_ACTION_send:
    case PW_ACTION_isend:
        if (a->peer != MPI_PROC_NULL)
            s = type_bytes(a->count, a->type);
        break;
    case PW_ACTION_put:
    case PW_ACTION_acc:
        if (a->target != MPI_PROC_NULL)
            s = type_bytes(a->count, a->type);
        break;
    case PW_ACTION_recv:
    case PW_ACTION_irecv:
        if (a->peer != MPI_PROC_NULL)
            r = type_bytes(a->count, a->type);
        break;
    case PW_ACTION_mrecv: /* no peer argument: MPI_MESSAGE_NO_PROC counts the posted size too */
        r = type_bytes(a->count, a->type);
        break;
    case PW_ACTION_get:
        if (a->target != MPI_PROC_NULL)
            r = type_bytes(a->count, a->type);
        break;
    case PW_ACTION_send_init:
        if (a->peer != MPI_PROC_NULL)
            s = type_bytes(a->count, a->type);
        preq_op(a->request, a->fortran, PREQ_INIT, &s, &r);
        break;
    case PW_ACTION_recv_init:
        if (a->peer != MPI_PROC_NULL)
            r = type_bytes(a->count, a->type);
        preq_op(a->request, a->fortran, PREQ_INIT, &s, &r);
        break;
    case PW_ACTION_start:
        preq_op(a->request, a->fortran, PREQ_START, &s, &r);
        break;
    case PW_ACTION_startall:
        for (int i = 0; i < a->nreq; i++)
            preq_op(a->fortran ? (const void *)((const MPI_Fint *)a->requests + i)
                               : (const void *)((const MPI_Request *)a->requests + i),
                    a->fortran, PREQ_START, &s, &r);
        break;
    case PW_ACTION_sendrecv:
        if (a->peer != MPI_PROC_NULL)
            s = type_bytes(a->scount, a->stype);
        if (a->source != MPI_PROC_NULL)
            r = type_bytes(a->rcount, a->rtype);
        break;
    case PW_ACTION_sendrecv_replace:
        if (a->peer != MPI_PROC_NULL)
            s = type_bytes(a->count, a->type);
        if (a->source != MPI_PROC_NULL)
            r = type_bytes(a->count, a->type);
        break;
    case PW_ACTION_getacc:
        s = type_bytes(a->count, a->type);
        r = type_bytes(a->rcount, a->rtype);
        break;
    case PW_ACTION_fop:
    case PW_ACTION_cas:
        s = r = type_bytes(1, a->type);
        break;
    case PW_ACTION_bcast:
        if (is_root(a))
            s = type_bytes(a->count, a->type);
        else if (a->root != MPI_PROC_NULL) /* PROC_NULL: a bystander of an intercomm */
            r = type_bytes(a->count, a->type);
        break;
    case PW_ACTION_reduce:
        if (a->root == MPI_ROOT) /* the root of an intercommunicator only receives */
            r = type_bytes(a->count, a->type);
        else if (a->root != MPI_PROC_NULL)
            s = type_bytes(a->count, a->type);
        if (is_root(a) && a->root != MPI_ROOT)
            r = s;
        break;
    case PW_ACTION_allreduce:
    case PW_ACTION_scan:
    case PW_ACTION_exscan:
        s = r = type_bytes(a->count, a->type);
        break;
    case PW_ACTION_reduce_scatter_block:
        r = type_bytes(a->count, a->type);
        s = r * peers(a->comm);
        break;
    case PW_ACTION_reduce_scatter: {
        int me = 0;
        n = peers(a->comm);
        pmpi.Comm_rank(a->comm, &me);
        s = type_bytes(sum_counts(a->rcounts, n), a->type);
        r = a->rcounts ? type_bytes(a->rcounts[me], a->type) : 0;
        break;
    }
    case PW_ACTION_gather:
        if (is_root(a)) {
            r = type_bytes((int64_t)a->rcount * peers(a->comm), a->rtype);
            s = in_place(a) ? type_bytes(a->rcount, a->rtype) : type_bytes(a->scount, a->stype);
        } else if (a->root != MPI_PROC_NULL) {
            s = type_bytes(a->scount, a->stype);
        }
        break;
    case PW_ACTION_gatherv:
        if (is_root(a)) {
            r = type_bytes(sum_counts(a->rcounts, peers(a->comm)), a->rtype);
            if (!in_place(a))
                s = type_bytes(a->scount, a->stype);
        } else if (a->root != MPI_PROC_NULL) {
            s = type_bytes(a->scount, a->stype);
        }
        break;
    case PW_ACTION_scatter:
        if (is_root(a)) {
            s = type_bytes((int64_t)a->scount * peers(a->comm), a->stype);
            if (!(!a->fortran && a->rbuf == MPI_IN_PLACE))
                r = type_bytes(a->rcount, a->rtype);
        } else if (a->root != MPI_PROC_NULL) {
            r = type_bytes(a->rcount, a->rtype);
        }
        break;
    case PW_ACTION_scatterv:
        if (is_root(a)) {
            s = type_bytes(sum_counts(a->scounts, peers(a->comm)), a->stype);
            if (!(!a->fortran && a->rbuf == MPI_IN_PLACE))
                r = type_bytes(a->rcount, a->rtype);
        } else if (a->root != MPI_PROC_NULL) {
            r = type_bytes(a->rcount, a->rtype);
        }
        break;
    case PW_ACTION_allgather:
        n = peers(a->comm);
        r = type_bytes((int64_t)a->rcount * n, a->rtype);
        s = in_place(a) ? type_bytes(a->rcount, a->rtype) : type_bytes(a->scount, a->stype);
        break;
    case PW_ACTION_allgatherv: {
        int me = 0;
        n = peers(a->comm);
        pmpi.Comm_rank(a->comm, &me);
        r = type_bytes(sum_counts(a->rcounts, n), a->rtype);
        s = in_place(a) ? (a->rcounts ? type_bytes(a->rcounts[me], a->rtype) : 0)
                        : type_bytes(a->scount, a->stype);
        break;
    }
    case PW_ACTION_alltoall:
        n = peers(a->comm);
        r = type_bytes((int64_t)a->rcount * n, a->rtype);
        s = in_place(a) ? r : type_bytes((int64_t)a->scount * n, a->stype);
        break;
    case PW_ACTION_alltoallv:
        n = peers(a->comm);
        r = type_bytes(sum_counts(a->rcounts, n), a->rtype);
        s = in_place(a) ? r : type_bytes(sum_counts(a->scounts, n), a->stype);
        break;
    case PW_ACTION_alltoallw:
        n = peers(a->comm);
        r = sum_w(a->rcounts, a->rtypes, a->fortran, n);
        s = in_place(a) ? r : sum_w(a->scounts, a->stypes, a->fortran, n);
        break;
    case PW_ACTION_neighbor_allgather:
        neighbours(a->comm, &in, &out);
        s = type_bytes((int64_t)a->scount * out, a->stype);
        r = type_bytes((int64_t)a->rcount * in, a->rtype);
        break;
    case PW_ACTION_neighbor_allgatherv:
        neighbours(a->comm, &in, &out);
        s = type_bytes((int64_t)a->scount * out, a->stype);
        r = type_bytes(sum_counts(a->rcounts, in), a->rtype);
        break;
    case PW_ACTION_neighbor_alltoall:
        neighbours(a->comm, &in, &out);
        s = type_bytes((int64_t)a->scount * out, a->stype);
        r = type_bytes((int64_t)a->rcount * in, a->rtype);
        break;
    case PW_ACTION_neighbor_alltoallv:
        neighbours(a->comm, &in, &out);
        s = type_bytes(sum_counts(a->scounts, out), a->stype);
        r = type_bytes(sum_counts(a->rcounts, in), a->rtype);
        break;
    case PW_ACTION_neighbor_alltoallw:
        neighbours(a->comm, &in, &out);
        s = sum_w(a->scounts, a->stypes, a->fortran, out);
        r = sum_w(a->rcounts, a->rtypes, a->fortran, in);
        break;
    case PW_ACTION_fread:
        r = type_bytes(a->count, a->type);
        break;
    case PW_ACTION_fwrite:
        s = type_bytes(a->count, a->type);
        break;
    default:
        break;
    }
    *sent = s;
    *recv = r;
}

/* ---- MPI-IO calls, for a module that profiles files (the io module's hook) ---- */

enum { FILE_END = 1, FILE_POSTED = 2, FILE_AT = 4, FILE_NB = 8 };
static signed char file_op[PW_MPI_NFN]; /* enum pw_file_op + 1; 0: not a file call */
static unsigned char file_flags[PW_MPI_NFN];
static unsigned char file_form[PW_MPI_NFN]; /* enum pw_file_form of a read or write */

/* A read's or write's form from its name: _begin/_end split collective, MPI_File_i*
 * nonblocking (MPI_File_iread_all too), _all and _ordered collective, the others (_at,
 * _shared) independent. */
static int file_form_of(const char *n)
{
    if (strstr(n, "_begin") || strstr(n, "_end"))
        return PW_FILE_SPLIT;
    if (!strncmp(n, "MPI_File_i", 10))
        return PW_FILE_NB;
    if (strstr(n, "_all") || strstr(n, "_ordered"))
        return PW_FILE_COLL;
    return PW_FILE_INDEP;
}

/* What each MPI_File_* function is, from its action and its name. */
static void file_ops_init(void)
{
    for (int fn = 0; fn < PW_MPI_NFN; fn++) {
        const char *n = pw_mpi_fn_names[fn];
        int op;
        switch (pw_mpi_fn_actions[fn]) {
        case PW_ACTION_fopen:
            op = PW_FILE_OPEN;
            break;
        case PW_ACTION_fclose:
            op = PW_FILE_CLOSE;
            break;
        case PW_ACTION_fread:
            op = PW_FILE_READ;
            break;
        case PW_ACTION_fwrite:
            op = PW_FILE_WRITE;
            break;
        case PW_ACTION_fother:
            op = strstr(n, "_seek")       ? PW_FILE_SEEK
                 : strstr(n, "_sync")     ? PW_FILE_SYNC
                 : strstr(n, "_set_view") ? PW_FILE_VIEW
                                          : PW_FILE_OTHER;
            break;
        default:
            continue;
        }
        file_op[fn] = (signed char)(op + 1);
        file_form[fn] = (unsigned char)file_form_of(n);
        size_t len = strlen(n);
        if (len > 4 && !strcmp(n + len - 4, "_end"))
            file_flags[fn] |= FILE_END;
        /* the nonblocking forms (MPI_File_iread..., MPI_File_iwrite...), _begin */
        if (!strncmp(n, "MPI_File_i", 10) || strstr(n, "_begin"))
            file_flags[fn] |= FILE_POSTED;
        if (!strncmp(n, "MPI_File_i", 10)) /* a request to complete */
            file_flags[fn] |= FILE_NB;
        if (strstr(n, "_at"))
            file_flags[fn] |= FILE_AT;
    }
}

/* The name of File_open as a C string: a Fortran one has a length and trailing blanks;
 * ROMIO's file-system prefix ("ufs:", "nfs:") is not part of the name. */
static const char *file_name(const pw_args *a, char *buf, size_t size)
{
    const char *p = a->path;
    if (!p)
        return NULL;
    if (a->path_len >= 0) {
        size_t n = (size_t)a->path_len < size - 1 ? (size_t)a->path_len : size - 1;
        while (n > 0 && p[n - 1] == ' ')
            n--;
        memcpy(buf, p, n);
        buf[n] = 0;
        p = buf;
    }
    const char *colon = strchr(p, ':');
    if (colon && colon - p >= 2 && colon - p <= 8) {
        const char *q = p;
        while (q < colon && *q >= 'a' && *q <= 'z')
            q++;
        if (q == colon)
            p = colon + 1;
    }
    return p;
}

/* Bytes of a read or write: what its status says it moved (a short read), else what it
 * asked for (Fortran's statuses, nonblocking calls and split collectives: at the post). */
static int64_t file_bytes(int fn, const pw_args *a)
{
    if (file_flags[fn] & FILE_END)
        return -1;
    int64_t want = type_bytes(a->count, a->type);
    if (a->fortran || !a->status || (file_flags[fn] & FILE_POSTED))
        return want;
    int n = MPI_UNDEFINED;
    if (pmpi.Get_count(a->status, pre.byte, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0 ||
        n > want)
        return want;
    return n;
}

static __attribute__((noinline)) void file_event(const pw_call *c, int64_t t1, const pw_args *a)
{
    int fn = c->fn, op = file_op[fn] - 1;
    char name[4096];
    pw_file_call fc = {.op = op,
                       .handle = (uintptr_t)a->file,
                       .bytes = 0,
                       .offset = -1,
                       .t0 = c->t0,
                       .t1 = t1,
                       .ra = (uintptr_t)c->ra};
    if (op == PW_FILE_OPEN) {
        MPI_File h = MPI_FILE_NULL;
        if (a->fortran) {
            MPI_Fint f = *(const MPI_Fint *)a->newfile;
            if (f != 0) /* MPI_FILE_NULL of the Fortran bindings */
                h = pw_file_f2c(f);
        } else {
            h = *(const MPI_File *)a->newfile;
        }
        if (h == MPI_FILE_NULL) /* the open failed */
            return;
        fc.handle = (uintptr_t)h;
        fc.path = file_name(a, name, sizeof name);
        int n = 0; /* Darshan's rule: an open on one process is an independent one */
        fc.form =
            pmpi.Comm_size(a->comm, &n) == MPI_SUCCESS && n > 1 ? PW_FILE_COLL : PW_FILE_INDEP;
    } else if (op == PW_FILE_READ || op == PW_FILE_WRITE) {
        fc.form = file_form[fn];
        fc.bytes = file_bytes(fn, a);
        MPI_Offset at = -1;
        if ((file_flags[fn] & FILE_AT) && a->offset >= 0 &&
            pmpi.File_get_byte_offset(a->file, a->offset, &at) != MPI_SUCCESS)
            at = -1;
        fc.offset = at;
    }
    file_call(&fc);
}

/* The request a nonblocking MPI-IO call posted is followed until a completion call
 * completes it (file_wait_before, file_wait_done). */
static void file_requests_follow(int action, int fn, const pw_args *a)
{
    int64_t s = 0, r = 0;
    if ((action == PW_ACTION_wait || action == PW_ACTION_waitmulti) && file_wait.n) {
        file_wait_done(action, a);
    } else if ((file_flags[fn] & FILE_NB) && a->request) {
        MPI_Request none = MPI_REQUEST_NULL; /* a failed post's */
        uint64_t key = request_key(a->request, a->fortran);
        if (key != request_key(&none, 0))
            preq_op_key(key, PREQ_FILE, &s, &r);
    }
}

/* ---- recording ---- */

/* Functions whose calls go into the message-size histograms (PW_HIST_FAMILY_MASK). */
static unsigned char in_histogram[PW_MPI_NFN];

/* The MPI functions in the core's registry (ids base + PW_FN_*), with the library's
 * strings for the profile header's "mpi" entry. */
static const char *const mpi_strings[] = {"library", library_version, "flavor", PW_MPI_FLAVOR,
                                          NULL};
static pw_functions mpi_functions = {.module = "mpi",
                                     .version = PW_PROFILE_VERSION,
                                     .n = PW_MPI_NFN,
                                     .names = pw_mpi_fn_names,
                                     .families = pw_mpi_fn_family,
                                     .hist = 1,
                                     .strings = mpi_strings,
                                     .base = -1};

/* --callsite-depth > 1: walk the stack and keep the frames above the wrapper's
 * caller. Out of line, so that the common path needs no stack arrays. */
static __attribute__((noinline)) pw_site *deep_site(pw_sitetab *t, int fn, void *ra)
{
    uintptr_t frames[PW_MAX_DEPTH];
    int nframes = 0;
    void *bt[PW_MAX_DEPTH + 16];
    int n = backtrace(bt, (int)pw_opt.callsite_depth + 16);
    int i = 0;
    while (i < n && bt[i] != ra)
        i++;
    for (i++; i < n && nframes < pw_opt.callsite_depth - 1; i++)
        frames[nframes++] = (uintptr_t)bt[i];
    return pw_site_get(t, fn, (uintptr_t)ra, frames, nframes);
}

/* ---- the communication matrix (format/mpi.h PW_COMM_FIELDS) ----
 *
 * A thread's rows are a keyed table (core/keyed.h) whose "return address" is the
 * communicator's description below (never 0) and whose key is fn << 40 | dir << 32 | the
 * peer's world rank. A communicator is described once, at its first recorded call: its
 * peers' world ranks (MPI_Group_translate_ranks) and the hash of them that names its group
 * alike on every member. The description hangs on the communicator as an MPI attribute, so
 * a later handle of the same value (the communicator freed, another made) is never taken
 * for it; the thread's last communicator is remembered with the attribute generation it
 * was seen in, and a freed communicator's attribute deletion starts a new one. Descriptions
 * are kept to the end (the rows point at them) and shared by communicators of one group. */
typedef struct comm_desc {
    struct comm_desc *next;
    uint64_t hash;
    int size, first;
    int world[]; /* the world rank of each of its ranks (the remote group's: inter) */
} comm_desc;

typedef struct comm_slot {
    pw_keyed_slot head;
    int64_t sent, recv, ticks;
} comm_slot;

static void comm_slot_add(pw_keyed_slot *into, const pw_keyed_slot *from)
{
    comm_slot *d = (comm_slot *)into;
    const comm_slot *f = (const comm_slot *)from;
    d->sent += f->sent;
    d->recv += f->recv;
    d->ticks += f->ticks;
}

static pw_keyed comm_rows = {.slot_size = sizeof(comm_slot),
                             .max_sites = PW_COMM_MAX_ROWS,
                             .families = 3 * PW_MPI_NFN,
                             .family_shift = 32,
                             .add = comm_slot_add};
static PW_TLS pw_keyed_tab *comm_tab;
static int comm_keyval = MPI_KEYVAL_INVALID; /* MPICH's valid ones are negative */
static unsigned comm_gen;                    /* attribute deletions so far */
static comm_desc *comm_all;                  /* every description, for sharing by hash */
static int comm_lock;
static MPI_Group world_group;
static PW_TLS struct {
    MPI_Comm comm;
    unsigned gen;
    comm_desc *desc;
} comm_last;

static int comm_copied(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c, (void)k, (void)extra, (void)in, (void)out;
    *flag = 0; /* a duplicate is described at its own first call (same group: same desc) */
    return MPI_SUCCESS;
}

static int comm_deleted(MPI_Comm c, int k, void *val, void *extra)
{
    (void)c, (void)k, (void)val, (void)extra;
    __atomic_add_fetch(&comm_gen, 1, __ATOMIC_RELEASE);
    return MPI_SUCCESS;
}

/* The description of the peers' group g (freed here): a communicator's, a window's. */
static comm_desc *group_describe(MPI_Group g)
{
    int n = 0;
    pmpi.Group_size(g, &n);
    size_t bytes = sizeof(comm_desc) + (size_t)(n > 0 ? n : 1) * 2 * sizeof(int);
    comm_desc *d = pw_alloc(bytes);
    if (d == NULL) {
        pmpi.Group_free(&g);
        return NULL;
    }
    int *ranks = d->world + n;
    for (int i = 0; i < n; i++)
        ranks[i] = i;
    pmpi.Group_translate_ranks(g, n, ranks, world_group, d->world);
    pmpi.Group_free(&g);
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over the world ranks, in rank order */
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)d->world[i];
        h *= 0x100000001b3ULL;
    }
    d->hash = h ? h : 1;
    d->size = n;
    d->first = n > 0 ? d->world[0] : -1;
    while (__atomic_exchange_n(&comm_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    comm_desc *same = comm_all;
    while (same && (same->hash != d->hash || same->size != n))
        same = same->next;
    if (same == NULL) {
        d->next = comm_all;
        comm_all = d;
    }
    __atomic_store_n(&comm_lock, 0, __ATOMIC_RELEASE);
    if (same != NULL) {
        pw_release(d, bytes);
        d = same;
    }
    return d;
}

static __attribute__((noinline)) comm_desc *comm_describe(MPI_Comm comm)
{
    void *v = NULL;
    int flag = 0;
    if (comm_keyval == MPI_KEYVAL_INVALID ||
        pmpi.Comm_get_attr(comm, comm_keyval, &v, &flag) != MPI_SUCCESS)
        return NULL;
    if (flag)
        return v;
    int inter = 0;
    MPI_Group g;
    pmpi.Comm_test_inter(comm, &inter);
    if ((inter ? pmpi.Comm_remote_group(comm, &g) : pmpi.Comm_group(comm, &g)) != MPI_SUCCESS)
        return NULL;
    comm_desc *d = group_describe(g);
    if (d != NULL)
        pmpi.Comm_set_attr(comm, comm_keyval, d);
    return d;
}

/* A window's peers are its group's: the communicator it was made on, whose rows its
 * one-sided calls join. The description hangs on the window as on a communicator. */
static int win_keyval = MPI_KEYVAL_INVALID;
static PW_TLS struct {
    MPI_Win win;
    unsigned gen;
    comm_desc *desc;
} win_last;

static int win_copied(MPI_Win w, int k, void *extra, void *in, void *out, int *flag)
{
    (void)w, (void)k, (void)extra, (void)in, (void)out;
    *flag = 0;
    return MPI_SUCCESS;
}

static int win_deleted(MPI_Win w, int k, void *val, void *extra)
{
    (void)w, (void)k, (void)val, (void)extra;
    __atomic_add_fetch(&comm_gen, 1, __ATOMIC_RELEASE);
    return MPI_SUCCESS;
}

static __attribute__((noinline)) comm_desc *win_describe(MPI_Win win)
{
    void *v = NULL;
    int flag = 0;
    if (win_keyval == MPI_KEYVAL_INVALID ||
        pmpi.Win_get_attr(win, win_keyval, &v, &flag) != MPI_SUCCESS)
        return NULL;
    if (flag)
        return v;
    MPI_Group g;
    if (pmpi.Win_get_group(win, &g) != MPI_SUCCESS)
        return NULL;
    comm_desc *d = group_describe(g);
    if (d != NULL)
        pmpi.Win_set_attr(win, win_keyval, d);
    return d;
}

static comm_desc *win_desc_of(MPI_Win win)
{
    unsigned gen = __atomic_load_n(&comm_gen, __ATOMIC_ACQUIRE);
    if (PW_LIKELY(win_last.desc != NULL && win_last.win == win && win_last.gen == gen))
        return win_last.desc;
    comm_desc *d = win_describe(win);
    win_last.win = win;
    win_last.gen = gen;
    win_last.desc = d;
    return d;
}

static comm_desc *comm_desc_of(MPI_Comm comm)
{
    unsigned gen = __atomic_load_n(&comm_gen, __ATOMIC_ACQUIRE);
    if (PW_LIKELY(comm_last.desc != NULL && comm_last.comm == comm && comm_last.gen == gen))
        return comm_last.desc;
    comm_desc *d = comm_describe(comm);
    comm_last.comm = comm;
    comm_last.gen = gen;
    comm_last.desc = d;
    return d;
}

static void comm_add(const comm_desc *d, int fn, int dir, int peer, int64_t sent, int64_t recv,
                     int64_t ticks)
{
    if (PW_UNLIKELY(comm_tab == NULL) && (comm_tab = pw_keyed_create(&comm_rows)) == NULL)
        return;
    uint64_t key = (uint64_t)fn << 40 | (uint64_t)dir << 32 | (uint32_t)peer;
    comm_slot *s = (comm_slot *)pw_keyed_find(comm_tab, key, (uintptr_t)d);
    s->head.count++;
    s->sent += sent;
    s->recv += recv;
    s->ticks += ticks;
}

/* A receive's source, by its status where it named MPI_ANY_SOURCE, as a world rank;
 * its bytes, the status' count where the call has a status (the message's, not the
 * buffer's). */
static int recv_peer(const comm_desc *d, int src, const MPI_Status *status, int64_t *bytes)
{
    int n = 0;
    if (status && pmpi.Get_count(status, pre.byte, &n) == MPI_SUCCESS && n >= 0 && n <= *bytes)
        *bytes = n;
    if (src == MPI_ANY_SOURCE)
        src = status ? status->MPI_SOURCE : -1;
    return src >= 0 && src < d->size ? d->world[src] : -2;
}

/* A request's entry in preqs for the matrix: its communicator, posting function, peer
 * (a world rank, or MPI_ANY_SOURCE); pending for its completion's status (with ticks)
 * and forgotten then (once: not persistent). */
static int mx_follow(const void *req, int fortran, const comm_desc *d, int fn, int peer, int once,
                     int64_t recv, int64_t ticks)
{
    MPI_Request none = MPI_REQUEST_NULL; /* a failed post's */
    uint64_t key = request_key(req, fortran);
    if (!key || key == PW_PREQ_FREE || key == request_key(&none, 0))
        return 0;
    int64_t s = 0, r = 0;
    if (once) /* an entry of its own (a persistent one's was made by call_bytes) */
        preq_op_key(key, PREQ_INIT, &s, &r);
    while (__atomic_exchange_n(&preq_lock, 1, __ATOMIC_ACQUIRE))
        ;
    struct preq *p = preq_slot(key, 0);
    int kept = p && p->key == key;
    if (kept) {
        p->desc = d;
        p->fn = fn;
        p->peer = peer;
        p->once = once;
        if (once) {
            p->recv = recv;
            p->ticks = ticks;
            p->pending = 1;
            __atomic_fetch_add(&pw_mpi_matrix_waits, 1, __ATOMIC_RELAXED);
        }
    }
    __atomic_store_n(&preq_lock, 0, __ATOMIC_RELEASE);
    return kept;
}

/* MPI_Start of a persistent request the matrix follows: a row for its send or receive
 * now, or for a receive from MPI_ANY_SOURCE at its completion. */
static void mx_start(const void *req, int fortran, int64_t ticks)
{
    uint64_t key = request_key(req, fortran);
    if (!key || key == PW_PREQ_FREE)
        return;
    while (__atomic_exchange_n(&preq_lock, 1, __ATOMIC_ACQUIRE))
        ;
    struct preq *p = preq_slot(key, 0);
    struct preq e = {0};
    if (p && p->key == key && p->desc && !p->file) {
        e = *p;
        if (p->peer == MPI_ANY_SOURCE && !p->pending) {
            p->pending = 1;
            p->ticks = ticks;
            __atomic_fetch_add(&pw_mpi_matrix_waits, 1, __ATOMIC_RELAXED);
        }
    }
    __atomic_store_n(&preq_lock, 0, __ATOMIC_RELEASE);
    if (e.desc == NULL || e.peer == MPI_ANY_SOURCE)
        return;
    const comm_desc *d = e.desc;
    if (pw_mpi_fn_actions[e.fn] == PW_ACTION_send_init)
        comm_add(d, e.fn, PW_COMM_SEND, e.peer, e.sent, 0, ticks);
    else
        comm_add(d, e.fn, PW_COMM_RECV, e.peer, 0, e.recv, ticks);
}

/* The pending receives among a completion call's requests, kept from before the call
 * (which nulls the completed ones) to after it (mx_wait_done), in the thread's wait_sets. */
static void mx_wait_before(int action, const pw_args *a)
{
    int n = action == PW_ACTION_wait ? 1 : a->nreq;
    mx_wait.n = 0;
    for (int i = 0; i < n && mx_wait.n < MX_WAIT_KEPT; i++) {
        const void *req = request_at(a, action, i);
        uint64_t key = req ? request_key(req, a->fortran) : 0;
        if (!key || key == PW_PREQ_FREE)
            continue;
        while (__atomic_exchange_n(&preq_lock, 1, __ATOMIC_ACQUIRE))
            ;
        struct preq *p = preq_slot(key, 0);
        int pending = p && p->key == key && p->pending;
        __atomic_store_n(&preq_lock, 0, __ATOMIC_RELEASE);
        if (pending) {
            mx_wait.index[mx_wait.n] = i;
            mx_wait.key[mx_wait.n++] = key;
        }
    }
}

/* The pending receives a completion call completed: a row each under the source its
 * status names, with the message's bytes and the post's time. */
static void mx_wait_done(int action, const pw_args *a)
{
    for (int k = 0; k < mx_wait.n; k++) {
        int at;
        if (!completed(action, a, mx_wait.index[k], &at))
            continue;
        MPI_Status st;
        int have = pw_mpi_status_at(a, at < 0 ? 0 : at, at < 0, &st);
        while (__atomic_exchange_n(&preq_lock, 1, __ATOMIC_ACQUIRE))
            ;
        struct preq *p = preq_slot(mx_wait.key[k], 0), e = {0};
        if (p && p->key == mx_wait.key[k] && p->pending) {
            e = *p;
            mx_unpend(p);
            if (p->once)
                p->key = PW_PREQ_FREE;
        }
        __atomic_store_n(&preq_lock, 0, __ATOMIC_RELEASE);
        if (e.desc == NULL)
            continue;
        int64_t bytes = e.recv;
        int peer = recv_peer(e.desc, MPI_ANY_SOURCE, have ? &st : NULL, &bytes);
        comm_add(e.desc, e.fn, PW_COMM_RECV, peer, 0, bytes, e.ticks);
    }
    mx_wait.n = 0;
}

/* A matched probe: its communicator and source (its status') kept under its message
 * until the MPI_Mrecv or MPI_Imrecv that receives it. */
static void mx_probed(const comm_desc *d, const pw_args *a)
{
    MPI_Status st;
    int src = pw_mpi_status_at(a, 0, 1, &st) ? st.MPI_SOURCE : a->peer;
    if (src < 0 || src >= d->size)
        return; /* MPI_MESSAGE_NO_PROC */
    uint64_t key = message_key(a->message, a->fortran);
    int64_t s = 0, r = 0;
    if (!key || key == PW_PREQ_FREE)
        return;
    preq_op_key(key, PREQ_INIT, &s, &r);
    while (__atomic_exchange_n(&preq_lock, 1, __ATOMIC_ACQUIRE))
        ;
    struct preq *p = preq_slot(key, 0);
    if (p && p->key == key) {
        p->desc = d;
        p->peer = d->world[src];
        p->once = 1;
    }
    __atomic_store_n(&preq_lock, 0, __ATOMIC_RELEASE);
}

/* MPI_Mrecv, MPI_Imrecv: a row under the probe's source, with the status' bytes where
 * the call has one (Mrecv), else the posted size; its message is forgotten. */
static void mx_mrecv(int fn, const pw_args *a, int64_t ticks, int64_t recv)
{
    uint64_t key = mrecv_key;
    if (!key || key == PW_PREQ_FREE)
        return;
    while (__atomic_exchange_n(&preq_lock, 1, __ATOMIC_ACQUIRE))
        ;
    struct preq *p = preq_slot(key, 0), e = {0};
    if (p && p->key == key && p->desc && p->once) {
        e = *p;
        p->key = PW_PREQ_FREE;
    }
    __atomic_store_n(&preq_lock, 0, __ATOMIC_RELEASE);
    if (e.desc == NULL)
        return;
    MPI_Status st;
    int n = 0;
    if (pw_mpi_status_at(a, 0, 1, &st) && pmpi.Get_count(&st, pre.byte, &n) == MPI_SUCCESS &&
        n >= 0 && n <= recv)
        recv = n;
    comm_add(e.desc, fn, PW_COMM_RECV, e.peer, 0, recv, ticks);
}

/* One-sided calls: the origin's row names the target; data to the target (Put,
 * Accumulate) is a send, from it (Get) a receive, both for Get_accumulate, Fetch_and_op
 * and Compare_and_swap. */
static void comm_record_rma(int fn, const pw_args *a, int64_t ticks, int64_t sent, int64_t recv)
{
    if (a->target == MPI_PROC_NULL || a->win == MPI_WIN_NULL)
        return;
    comm_desc *d = win_desc_of(a->win);
    if (d == NULL)
        return;
    int peer = a->target >= 0 && a->target < d->size ? d->world[a->target] : -2;
    if (sent || !recv)
        comm_add(d, fn, PW_COMM_SEND, peer, sent, 0, ticks);
    if (recv)
        comm_add(d, fn, PW_COMM_RECV, peer, 0, recv, sent ? 0 : ticks);
}

static void comm_record(int fn, int action, const pw_args *a, int64_t ticks, int64_t sent,
                        int64_t recv)
{
    int family = pw_mpi_fn_family[fn];
    switch (action) {
    case PW_ACTION_send:
    case PW_ACTION_isend:
    case PW_ACTION_recv:
    case PW_ACTION_irecv:
    case PW_ACTION_sendrecv:
    case PW_ACTION_sendrecv_replace:
    case PW_ACTION_send_init:
    case PW_ACTION_recv_init:
        break;
    case PW_ACTION_start:
        mx_start(a->request, a->fortran, ticks);
        return;
    case PW_ACTION_startall:
        for (int i = 0; i < a->nreq; i++)
            mx_start(request_at(a, PW_ACTION_waitmulti, i), a->fortran,
                     i ? 0 : ticks); /* the call's time on its first request */
        return;
    case PW_ACTION_put:
    case PW_ACTION_get:
    case PW_ACTION_acc:
    case PW_ACTION_getacc:
    case PW_ACTION_fop:
    case PW_ACTION_cas:
        comm_record_rma(fn, a, ticks, sent, recv);
        return;
    case PW_ACTION_mrecv:
        mx_mrecv(fn, a, ticks, recv);
        return;
    case PW_ACTION_probe:
        if (a->message && (!a->flag || *(const int *)a->flag))
            break; /* Mprobe, Improbe that matched */
        return;
    default:
        if (family != PW_FAMILY_COLL)
            return;
    }
    /* a call on MPI_COMM_NULL failed (its error handler ran); asking MPI about that
     * handle would raise the error again */
    if (a->comm == pre.comm_null)
        return;
    comm_desc *d = comm_desc_of(a->comm);
    if (d == NULL)
        return;
    if (family == PW_FAMILY_COLL) {
        comm_add(d, fn, PW_COMM_COLL, -1, sent, recv, ticks);
        return;
    }
    if (action == PW_ACTION_probe) {
        mx_probed(d, a);
        return;
    }
    if (action == PW_ACTION_send_init || action == PW_ACTION_recv_init) {
        /* rows at each MPI_Start (mx_start), under the world rank of the peer */
        int peer = a->peer == MPI_ANY_SOURCE           ? MPI_ANY_SOURCE
                   : a->peer >= 0 && a->peer < d->size ? d->world[a->peer]
                                                       : -2;
        if (a->peer != MPI_PROC_NULL)
            mx_follow(a->request, a->fortran, d, fn, peer, 0, 0, 0);
        return;
    }
    /* its source is known at its completion; or never (the table full: preq_lost) */
    if (action == PW_ACTION_irecv && a->peer == MPI_ANY_SOURCE &&
        mx_follow(a->request, a->fortran, d, fn, MPI_ANY_SOURCE, 1, recv, ticks))
        return;
    int sends = action != PW_ACTION_recv && action != PW_ACTION_irecv;
    if (sends && a->peer != MPI_PROC_NULL)
        comm_add(d, fn, PW_COMM_SEND, a->peer >= 0 && a->peer < d->size ? d->world[a->peer] : -2,
                 sent, 0, ticks);
    int src = sends ? a->source : a->peer;
    if (action != PW_ACTION_send && action != PW_ACTION_isend && src != MPI_PROC_NULL) {
        /* an Irecv has no status (a->status unset) */
        MPI_Status st;
        int have = action != PW_ACTION_irecv && pw_mpi_status_at(a, 0, 1, &st);
        int peer = recv_peer(d, src, have ? &st : NULL, &recv);
        /* a Sendrecv's time is its send's and its receive's alike */
        comm_add(d, fn, PW_COMM_RECV, peer, 0, recv, ticks);
    }
}

static void record(int fn, int family, void *ra, int64_t t1, int64_t ticks, int64_t sent,
                   int64_t recv)
{
    pw_sitetab *t = pw_sitetab_self();
    if (PW_UNLIKELY(!t))
        return;
    t->rec->last_tick = t1; /* how far the thread got, should it end without saving */
    int id = mpi_functions.base + fn;
    pw_site *s = PW_LIKELY(pw_opt.callsite_depth == 1) ? pw_site_find(t, id, (uintptr_t)ra)
                                                       : deep_site(t, id, ra);
    pw_site_add(s, ticks, sent, recv);
    pw_act_add(family, ticks);
    if (PW_UNLIKELY(call_leave != NULL))
        call_leave(t, s);
    if (in_histogram[fn])
        pw_hist_add(t, &mpi_functions, fn, sent > recv ? sent : recv, ticks);
}

static void watch_leave(int64_t t1); /* --hang: the call has ended */

void pw_mpi_leave(pw_call *c, int action, const pw_args *a)
{
    int64_t t1 = pw_ticks();
    int64_t sent = 0, recv = 0;
    if (a) {
        int saved_errno = errno; /* the PMPI calls of call_bytes must not leak into it */
        call_bytes(action, a, &sent, &recv);
        errno = saved_errno;
    }
    record(c->fn, c->family, c->ra, t1, t1 - c->t0, sent, recv);
    if (a && (action == PW_ACTION_wait || action == PW_ACTION_waitmulti) && mx_wait.n)
        mx_wait_done(action, a);
    if (a &&
        (c->family == PW_FAMILY_P2P || c->family == PW_FAMILY_COLL || c->family == PW_FAMILY_RMA)) {
        int saved_errno = errno; /* a communicator's first call asks MPI about it */
        comm_record(c->fn, action, a, t1 - c->t0, sent, recv);
        errno = saved_errno;
    }
    if (PW_UNLIKELY(c->family == PW_FAMILY_FILE) && a)
        file_requests_follow(action, c->fn, a);
    if (PW_UNLIKELY(file_call != NULL) && a && file_op[c->fn]) {
        int saved_errno = errno;
        file_event(c, t1, a);
        errno = saved_errno;
    }
    if (PW_UNLIKELY(regions_mpi_call != NULL))
        regions_mpi_call(t1 - c->t0);
    if (PW_UNLIKELY(pw_trace_on))
        pw_trace_call(c, t1, action, a, sent, recv);
    if (PW_UNLIKELY(pw_mpi_watching))
        watch_leave(t1);
    pw_thread_activity = 0;
    pw_call_anchor = 0;
    pw_mpi_depth--;
    pw_hold_if_dying();
}

/* ---- the hang watchdog (--hang N, docs/snapshots.md "Hung ranks") ----
 *
 * Each thread's MPI call is published in a slot of its own, written by that thread only:
 * the call's start (the ticks the wrapper takes anyway) last, with a release store, and 0
 * at its end. A thread of the module's own reads the slots every quarter of N (250 ms at
 * most); a call in progress for N seconds is reported once: a line on stderr and
 * hangs/rank-R-K.json, and hangs/asked is bumped so that every rank's watchdog writes
 * what its threads are doing (hangs/state/rank-R.json) within one period. A slot is read
 * again after its fields: a call that ended meanwhile is not reported. The watchdog
 * makes no MPI call (the communicator's description is the calling thread's, taken
 * before its call). */
int pw_mpi_watching;

#define WATCH_SLOTS 256
typedef struct watch_slot {
    int64_t since;    /* ticks at the call's start; 0 outside a call */
    int64_t last_end; /* ticks at the end of its last call */
    int64_t reported; /* the since of the call last reported */
    int fn, kind, peer, world;
    void *ra;
    const comm_desc *comm;
} watch_slot;
static watch_slot watch_slots[WATCH_SLOTS];
static int watch_n;
static PW_TLS watch_slot *watch_self;
static int64_t watch_answered; /* the last hangs/asked this rank answered */
static int watch_reports;

void pw_mpi_watch(pw_call *c, int kind, int peer, MPI_Comm comm)
{
    watch_slot *w = watch_self;
    if (PW_UNLIKELY(w == NULL)) {
        int i = __atomic_fetch_add(&watch_n, 1, __ATOMIC_ACQ_REL);
        if (i >= WATCH_SLOTS)
            return;
        w = watch_self = &watch_slots[i];
    }
    __atomic_store_n(&w->since, 0, __ATOMIC_RELEASE);
    w->fn = c->fn;
    w->ra = c->ra;
    w->kind = kind;
    w->peer = peer;
    int saved_errno = errno; /* a communicator's first call asks MPI about it */
    w->comm = comm != MPI_COMM_NULL ? comm_desc_of(comm) : NULL;
    errno = saved_errno;
    w->world = comm == pre.world;
    __atomic_store_n(&w->since, c->t0 ? c->t0 : 1, __ATOMIC_RELEASE);
}

static void watch_leave(int64_t t1)
{
    watch_slot *w = watch_self;
    if (w != NULL) {
        __atomic_store_n(&w->since, 0, __ATOMIC_RELEASE);
        w->last_end = t1;
    }
}

static int64_t epoch_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A slot's call as JSON members of j (the slot read whole, or 0) */
static int watch_call_json(pw_json *j, watch_slot *w, int64_t now, double ns_per_tick)
{
    int64_t since = __atomic_load_n(&w->since, __ATOMIC_ACQUIRE);
    if (since == 0)
        return 0;
    watch_slot copy = *w;
    if (__atomic_load_n(&w->since, __ATOMIC_ACQUIRE) != since)
        return 0; /* ended meanwhile */
    pw_json_str(j, "function", pw_mpi_fn_names[copy.fn]);
    pw_json_double(j, "seconds", (double)(now - since) * ns_per_tick / 1e9, 3);
    uint64_t off = 0;
    int o = pw_object_of((uintptr_t)copy.ra, &off);
    pw_json_str(j, "object", o >= 0 ? pw_object_path(o) : "");
    pw_json_str(j, "buildid", o >= 0 ? pw_object_buildid(o) : "");
    pw_json_int(j, "offset", o >= 0 ? (int64_t)off : (int64_t)(uintptr_t)copy.ra);
    const comm_desc *d = copy.comm;
    const char *role = copy.kind == 1 ? "peer" : copy.kind == 2 ? "root" : "";
    pw_json_str(j, "peer_role", role);
    /* the peer as a world rank (MPI_ANY_SOURCE: -1, MPI_PROC_NULL: -2) */
    int peer = copy.peer == MPI_ANY_SOURCE ? -1 : copy.peer == MPI_PROC_NULL ? -2 : copy.peer;
    if (d && peer >= 0 && peer < d->size)
        peer = d->world[peer];
    pw_json_int(j, "peer", copy.kind ? peer : -3);
    pw_json_open(j, "comm", '{');
    pw_json_bool(j, "world", copy.world);
    pw_json_int(j, "size", d ? d->size : 0);
    pw_json_ints(j, "ranks", d ? d->world : NULL,
                 d ? (size_t)(d->size < 4096 ? d->size : 4096) : 0);
    pw_json_close(j);
    return 1;
}

/* hangs/state/rank-R.json: what each of the rank's threads does now */
static void watch_state(int64_t asked)
{
    pw_buf b = {0};
    pw_json j;
    char path[4400], num[24];
    int64_t now = pw_ticks();
    double ns_per_tick = pw_ns_per_tick();
    pw_buf_json_head(&j, &b, "perfweave-hang-state", 1);
    pw_json_int(&j, "asked", asked);
    pw_json_int(&j, "epoch_ms", epoch_ms());
    pw_json_bool(&j, "finalizing", st.t_fini_enter != 0);
    pw_json_open(&j, "threads", '[');
    int n = __atomic_load_n(&watch_n, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n && i < WATCH_SLOTS; i++) {
        watch_slot *w = &watch_slots[i];
        pw_json_open(&j, NULL, '{');
        pw_json_int(&j, "thread", i);
        if (!watch_call_json(&j, w, now, ns_per_tick)) {
            int64_t end = w->last_end;
            pw_json_str(&j, "function", "");
            pw_json_double(&j, "seconds", end ? (double)(now - end) * ns_per_tick / 1e9 : -1, 3);
        }
        pw_json_close(&j);
    }
    pw_json_end(&j);
    pw_fmt_int(num, st.rank);
    if (pw_experiment_path(path, sizeof path, "hangs/state/rank-", num, ".json") == 0)
        pw_buf_to_file(&b, path);
    else
        pw_buf_free(&b);
}

static void watch_report(watch_slot *w, int thread, int64_t now, double ns_per_tick)
{
    pw_buf b = {0};
    pw_json j;
    char path[4400], num[24], k[24], line[64];
    int64_t asked = epoch_ms();
    pw_buf_json_head(&j, &b, "perfweave-hang", 1);
    pw_json_int(&j, "thread", thread);
    pw_json_int(&j, "hang_s", pw_opt.hang);
    pw_json_int(&j, "asked", asked);
    pw_json_int(&j, "epoch_ms", asked);
    pw_json_int(&j, "world_size", st.size);
    if (!watch_call_json(&j, w, now, ns_per_tick)) {
        pw_buf_free(&b);
        return; /* the call ended meanwhile */
    }
    pw_json_end(&j);
    pw_fmt_int(num, st.rank);
    pw_fmt_int(k, ++watch_reports);
    if (pw_experiment_path(path, sizeof path, "hangs/rank-", num, "-", k, ".json") != 0 ||
        pw_buf_to_file(&b, path) != 0)
        return;
    /* every rank's watchdog answers this number with its state */
    int n = pw_fmt_int(line, asked);
    line[n++] = '\n';
    if (pw_experiment_path(path, sizeof path, "hangs/asked") == 0)
        pw_file_put(path, line, (size_t)n); /* whole, renamed into place */
    int64_t secs = (int64_t)((double)(now - w->since) * ns_per_tick / 1e9);
    pw_log("hang: rank %d has been in %s for %ld s (thread %d); what every rank is doing: "
           "perfweave report %s",
           st.rank, pw_mpi_fn_names[w->fn], (long)secs, thread, pw_experiment_dir());
}

static void *watchdog(void *arg)
{
    (void)arg;
    int64_t period_ms = pw_opt.hang * 1000 / 4;
    if (period_ms > 250)
        period_ms = 250;
    if (period_ms < 10)
        period_ms = 10;
    double ns_per_tick = pw_ns_per_tick();
    int64_t hang_ticks = (int64_t)((double)pw_opt.hang * 1e9 / ns_per_tick);
    while (!st.finalized && __atomic_load_n(&pw_mpi_watching, __ATOMIC_ACQUIRE)) {
        struct timespec t = {period_ms / 1000, (period_ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
        int64_t now = pw_ticks();
        int n = __atomic_load_n(&watch_n, __ATOMIC_ACQUIRE);
        for (int i = 0; i < n && i < WATCH_SLOTS; i++) {
            watch_slot *w = &watch_slots[i];
            int64_t since = __atomic_load_n(&w->since, __ATOMIC_ACQUIRE);
            if (since && since != w->reported && now - since >= hang_ticks) {
                w->reported = since;
                watch_report(w, i, now, ns_per_tick);
            }
        }
        int64_t asked = pw_experiment_number("hangs/asked");
        if (asked > watch_answered) {
            watch_answered = asked;
            watch_state(asked);
        }
    }
    return NULL;
}

static void watch_start(void)
{
    if (pw_opt.hang <= 0)
        return;
    /* an earlier run's, in a reused experiment */
    watch_answered = pw_experiment_number("hangs/asked");
    __atomic_store_n(&pw_mpi_watching, 1, __ATOMIC_RELEASE);
    if (pw_runtime_thread(watchdog, "perfweave-hang") != 0) {
        __atomic_store_n(&pw_mpi_watching, 0, __ATOMIC_RELEASE);
        pw_log("--hang disabled: cannot start its thread");
    }
}

/* ---- clock offsets to rank 0 ---- */

/* A receive of the clock exchange that gives the processor away while it waits. MPI
 * libraries spin in a blocking receive (MPICH does not yield even when oversubscribed),
 * so with more busy processes than cores the peer that would answer runs only once the
 * spinning rank's time slice ends: each round trip cost a time slice, 0.2 s of MPICH's
 * trivial 2-rank job on a busy 2-core node (bench/launch_overhead.py). */
static void recv_yielding(void *buf, int count, int src, int tag)
{
    MPI_Request req;
    int done = 0;
    if (pmpi.Irecv(buf, count, pre.byte, src, tag, st.comm, &req) != MPI_SUCCESS)
        return;
    while (pmpi.Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
        sched_yield();
}

/* Cristian's method: rank 0 exchanges `rounds` ping-pongs with each rank in turn
 * and keeps the exchange with the shortest round trip; the offset's error is at
 * most half that round trip. */
static void clock_offsets(int64_t *offset, int64_t *err)
{
    const int tag = 7931;
    *offset = 0;
    *err = 0;
    int rounds = (int)pw_opt.clock_sync_rounds;
    if (rounds <= 0 || st.size < 2)
        return;
    if (st.rank == 0) {
        for (int r = 1; r < st.size; r++) {
            int64_t best = INT64_MAX, best_off = 0, remote, res[2];
            for (int k = 0; k < rounds; k++) {
                int64_t t1 = pw_now();
                pmpi.Send(&t1, 1, pre.byte, r, tag, st.comm);
                recv_yielding(&remote, 8, r, tag);
                int64_t t2 = pw_now();
                if (t2 - t1 < best) {
                    best = t2 - t1;
                    best_off = remote - (t1 + t2) / 2;
                }
            }
            res[0] = best_off;
            res[1] = best / 2;
            pmpi.Send(res, 16, pre.byte, r, tag, st.comm);
        }
    } else {
        int64_t ping, now, res[2];
        for (int k = 0; k < rounds; k++) {
            recv_yielding(&ping, 1, 0, tag);
            now = pw_now();
            pmpi.Send(&now, 8, pre.byte, 0, tag, st.comm);
        }
        recv_yielding(res, 16, 0, tag);
        *offset = res[0];
        *err = res[1];
    }
}

/* ---- Init / Finalize / Abort / Pcontrol ---- */

static void fill_rank(pw_rank_rec *r, int state, int64_t t_fini);
static void region_switch(int on, int64_t t);
static void pcontrol_set(int level);

void pw_mpi_init_done(int fn, void *ra, int64_t t0, int provided)
{
    int64_t t1 = pw_now();
    if (!pw_active || st.initialized)
        return;
    resolve_internal();
    file_ops_init();
    hooks_find();
    st.initialized = 1;
    st.t_init_enter = t0;
    st.t_init_leave = t1;
    st.thread_level = provided;
    pmpi.Comm_rank(pre.world, &st.rank);
    pmpi.Comm_size(pre.world, &st.size);
    /* a collective of every rank: one without perfweave's runtime never comes to it */
    pw_rank_set(PW_ACT_STARTING);
    pmpi.Comm_dup(pre.world, &st.comm);
    pmpi.Comm_group(pre.world, &world_group);
    pmpi.Comm_create_keyval(comm_copied, comm_deleted, &comm_keyval, NULL);
    pmpi.Win_create_keyval(win_copied, win_deleted, &win_keyval, NULL);
    int vlen = 0;
    pmpi.Get_library_version(library_version, &vlen);
    for (char *v = library_version; *v; v++)
        if (*v == '\n' || *v == '\r')
            *v = ' ';
    pw_objects_refresh();
    clock_offsets(&st.offset_init, &st.offset_init_err);
    if (pw_opt.trace)
        pw_trace_start(st.rank, st.size, pre.world);
    if (pw_trace_on && regions_trace_begun) /* regions begun before MPI_Init */
        regions_trace_begun();
    record(fn, pw_mpi_fn_family[fn], ra, pw_ticks(),
           (int64_t)((double)(t1 - t0) / pw_ns_per_tick()), 0, 0);
    /* What the rank leaves should it end without saving (its record in the tables file,
     * the trace's description): their application time starts once the set-up above is
     * done (the clock exchanges: milliseconds), before their own writing (tenths of a
     * millisecond, and the tables' renaming by pw_rank_set). */
    st.t_init_leave = pw_now();
    pw_rank_rec r;
    fill_rank(&r, PW_STATE_KILLED, 0);
    pw_tables_rank(&r, st.size);
    pw_trace_clock clock = {st.offset_init,     st.offset_init_err, st.offset_init,
                            st.offset_init_err, st.t_init_leave,    pw_now()};
    pw_trace_running(&clock);
    pw_rank_set(st.rank);
    st.t_init_leave = pw_now(); /* the application's time starts now, and so do the */
    if (app_begin)              /* modules' baselines (counts "before" the first call) */
        app_begin();
    /* measurement turned off by the program before MPI_Init (perfweave_measure_off) */
    if (regions_attach && !regions_attach(pcontrol_set) && !st.pcontrol_off) {
        st.pcontrol_off = 1;
        st.pcontrol_early = 1;
    }
    if (st.pcontrol_early) {
        st.pcontrol_seen = 1;
        region_switch(!st.pcontrol_off, st.t_init_leave);
    }
    pw_mpi_recording = !st.pcontrol_off;
    watch_start();
    pw_debug("rank %d of %d recording", st.rank, st.size);
}

/* Opens (on) or closes the region's interval at t (ns) where that changes it. */
static void region_switch(int on, int64_t t)
{
    if (on && !st.region_open) {
        st.region_open = 1;
        st.region_t0 = t;
        st.region_intervals++;
    } else if (!on && st.region_open) {
        st.region_open = 0;
        st.region_ns += t - st.region_t0;
    }
}

/* Whether a call site's function (a global function id) counts in the rank's MPI time
 * (mpi_ns): MPI's, MPI_Init and MPI_Finalize excluded; other modules' are not MPI. */
static int in_mpi_time(int fn_id)
{
    int fn = fn_id - mpi_functions.base;
    return fn >= 0 && fn < PW_MPI_NFN && pw_mpi_fn_actions[fn] != PW_ACTION_init &&
           pw_mpi_fn_actions[fn] != PW_ACTION_finalize;
}

/* Ticks of the MPI calls recorded so far (as mpi_ns counts them), every thread's. */
static int64_t mpi_ticks_so_far(void)
{
    int64_t ticks = 0;
    for (pw_sitetab *t = pw_sitetabs(); t; t = t->next) {
        size_t i = 0;
        for (pw_site *s; (s = pw_site_next(t, &i)) != NULL;)
            if (in_mpi_time(s->fn))
                ticks += s->total;
    }
    return ticks;
}

/* MPI_Pcontrol: the region of interest and the recording switch here, the level's
 * meaning for the regions module there (a phase mark, measurement off for samples) */
void pw_mpi_pcontrol(int level)
{
    pcontrol_set(level);
    regions_find();
    if (regions_pcontrol)
        regions_pcontrol(level);
}

/* Recording on (level != 0) or off: MPI_Pcontrol's, and perfweave_measure_on/off's */
static void pcontrol_set(int level)
{
    st.pcontrol_off = level == 0;
    if (!st.initialized)
        st.pcontrol_early = 1;
    if (st.initialized && !st.finalized) {
        if (!st.pcontrol_seen) {
            st.mpi_before_ticks = mpi_ticks_so_far();
            st.pcontrol_seen = 1;
        }
        region_switch(level != 0, pw_now());
        pw_mpi_recording = !st.pcontrol_off;
        if (pw_trace_on)
            pw_trace_pcontrol(level, pw_ticks());
    }
}

static void fill_rank(pw_rank_rec *r, int state, int64_t t_fini)
{
    memset(r, 0, sizeof *r);
    r->rank = st.rank;
    r->pid = (int32_t)getpid();
    r->state = state;
    r->thread_level = st.thread_level;
    r->t_start = pw_t_start;
    r->t_init_enter = st.t_init_enter;
    r->t_init_leave = st.t_init_leave;
    r->t_fini_enter = t_fini;
    r->app_ns = t_fini - st.t_init_leave;
    r->region_intervals = st.region_intervals;
    r->region_ns =
        st.region_ns + (st.region_open && t_fini > st.region_t0 ? t_fini - st.region_t0 : 0);
    r->offset_init_ns = st.offset_init;
    r->offset_init_err_ns = st.offset_init_err;
    r->offset_fini_ns = st.offset_fini;
    r->offset_fini_err_ns = st.offset_fini_err;
}

/* MPI time and calls of this rank: every wrapped call but Init and Finalize. */
static void sum_mpi_time(pw_local *l)
{
    int64_t ns = 0, calls = 0;
    for (size_t i = 0; i < l->prof.nsites; i++) {
        const pw_site_rec *s = &l->prof.sites[i];
        if (!in_mpi_time(s->fn))
            continue;
        ns += s->total_ns;
        calls += s->count;
    }
    l->rank.mpi_ns = ns;
    l->rank.mpi_calls = calls;
    if (st.region_intervals)
        l->rank.region_mpi_ns = ns - (int64_t)((double)st.mpi_before_ticks * pw_ns_per_tick());
}

/* The matrix's rows of this rank (every thread's merged) into l's profile; memory of
 * *bytes at l->prof.comms, released by local_free. */
static size_t comm_rows_add(pw_local *l)
{
    int threads = 0;
    int64_t dropped = 0;
    pw_keyed_tab *m = pw_keyed_merge(&comm_rows, &threads, &dropped);
    if (m == NULL || m->used == 0) {
        pw_keyed_free(m);
        return 0;
    }
    size_t bytes = m->used * sizeof(pw_comm_rec);
    pw_comm_rec *rows = pw_alloc(bytes);
    if (rows == NULL) {
        pw_keyed_free(m);
        return 0;
    }
    double ns_per_tick = pw_ns_per_tick();
    size_t n = 0, i = 0;
    for (const pw_keyed_slot *s; (s = pw_keyed_next(m, &i)) != NULL && n < m->used;) {
        const comm_slot *c = (const comm_slot *)s;
        const comm_desc *d = (const comm_desc *)s->ra;
        pw_comm_rec *r = &rows[n++];
        r->rank = st.rank;
        r->fn = mpi_functions.base + (int32_t)(s->key >> 40);
        r->dir = (int32_t)(s->key >> 32 & 0xff);
        r->peer = d ? (int32_t)(uint32_t)s->key : -2;
        r->comm_size = d ? d->size : 0;
        r->comm_first = d ? d->first : -1;
        r->comm_hash = d ? (int64_t)d->hash : 0;
        r->messages = s->count;
        r->bytes_sent = c->sent;
        r->bytes_recv = c->recv;
        r->total_ns = (int64_t)((double)c->ticks * ns_per_tick + 0.5);
    }
    pw_keyed_free(m);
    pw_profile_array_set(&l->prof, PW_ARRAY_comms, rows, n);
    return bytes;
}

static size_t comm_bytes; /* of the rows of the last build_local */

static void local_free(pw_local *l)
{
    if (l->prof.comms)
        pw_release(l->prof.comms, comm_bytes);
    pw_local_free(l);
}

static int build_local(pw_local *l, int state, int64_t t_fini)
{
    pw_rank_rec r;
    fill_rank(&r, state, t_fini);
    if (pw_local_build(l, &r) != 0)
        return -1;
    comm_bytes = comm_rows_add(l);
    sum_mpi_time(l);
    l->rank.t_end = pw_now();
    l->prof.world_size = st.size;
    return 0;
}

/* This rank's own file, when the job ends without a full MPI_Finalize. */
static void write_partial(int state, int in_signal)
{
    (void)in_signal;
    pw_local l;
    int64_t now = pw_now();
    if (build_local(&l, state, st.t_fini_enter ? st.t_fini_enter : now) != 0) {
        pw_tables_done(state, 0);
        return;
    }
    char path[4200], num[24];
    pw_fmt_int(num, st.rank);
    /* partial/rank-R.pwprof (its folder made by the writer); a failure is marked */
    int rc = pw_experiment_path(path, sizeof path, "partial/rank-", num, ".pwprof");
    pw_tables_done(state, rc == 0 && pw_profile_write(&l.prof, path) == 0);
    local_free(&l);
}

static int dump(int state, int in_signal)
{
    if (!st.initialized)
        return 0; /* not an MPI process: the core writes its process data */
    if (st.finalized)
        return 1; /* already in the reduced profile */
    __atomic_store_n(&pw_mpi_recording, 0, __ATOMIC_RELEASE);
    int partial_state = state == PW_STATE_COMPLETE ? PW_STATE_NO_FINALIZE : state;
    write_partial(partial_state, in_signal);
    pw_trace_clock clock = {st.offset_init,     st.offset_init_err, st.offset_init,
                            st.offset_init_err, st.t_init_leave,    pw_now()};
    pw_trace_end(partial_state, &clock);
    return 1;
}

/* The rank's profile so far, as partial/rank-R.pwprof of the snapshot's folder dir (the
 * core's snapshot thread; the end's writing waits for it, pw_snapshots_stop). */
static int snapshot(const char *dir)
{
    if (!st.initialized || st.finalized)
        return st.initialized; /* a rank past its reduction writes none */
    pw_local l;
    if (build_local(&l, PW_STATE_RUNNING, pw_now()) != 0)
        return 1;
    char path[4200], num[24];
    pw_fmt_int(num, st.rank);
    if (pw_experiment_path(path, sizeof path, dir, "partial/rank-", num, ".pwprof") == 0)
        pw_profile_write(&l.prof, path);
    local_free(&l);
    return 1;
}

void pw_mpi_abort(void *ra)
{
    (void)ra;
    if (pw_active && st.initialized && !st.finalized)
        pw_dump_now(PW_STATE_ABORT);
}

/* ---- the reduction at MPI_Finalize ---- */

/* A rank's contribution: counts, then its rows, then its strings. */
typedef struct blob_head {
    int64_t nsites, nframes, nhist, ncounts, ncomms, nobjects, strings;
} blob_head;

static size_t blob_size(const pw_local *l, size_t strings)
{
    const pw_profile *p = &l->prof;
    return sizeof(blob_head) + sizeof(pw_rank_rec) + p->nsites * sizeof(pw_site_rec) +
           p->nframes * sizeof(pw_frame_rec) + p->nhist * sizeof(pw_hist_rec) +
           p->ncounts * sizeof(pw_count_rec) + p->ncomms * sizeof(pw_comm_rec) + strings;
}

static char *blob_pack(const pw_local *l, size_t *len)
{
    const pw_profile *p = &l->prof;
    size_t strings = strlen(pw_hostname) + 1;
    for (size_t i = 0; i < p->nobjects; i++)
        strings += strlen(p->objects[i]) + strlen(p->buildids[i]) + 2;
    *len = blob_size(l, strings);
    char *b = malloc(*len), *q = b;
    if (!b)
        return NULL;
    blob_head h = {(int64_t)p->nsites, (int64_t)p->nframes,  (int64_t)p->nhist, (int64_t)p->ncounts,
                   (int64_t)p->ncomms, (int64_t)p->nobjects, (int64_t)strings};
#define PUT(ptr, n)                                                                                \
    do {                                                                                           \
        memcpy(q, (ptr), (n));                                                                     \
        q += (n);                                                                                  \
    } while (0)
    PUT(&h, sizeof h);
    PUT(&l->rank, sizeof l->rank);
    PUT(p->sites, p->nsites * sizeof(pw_site_rec));
    PUT(p->frames, p->nframes * sizeof(pw_frame_rec));
    PUT(p->hist, p->nhist * sizeof(pw_hist_rec));
    PUT(p->counts, p->ncounts * sizeof(pw_count_rec));
    PUT(p->comms, p->ncomms * sizeof(pw_comm_rec));
    PUT(pw_hostname, strlen(pw_hostname) + 1);
    for (size_t i = 0; i < p->nobjects; i++) {
        PUT(p->objects[i], strlen(p->objects[i]) + 1);
        PUT(p->buildids[i], strlen(p->buildids[i]) + 1);
    }
#undef PUT
    return b;
}

typedef struct strtab {
    const char **s, **t; /* s: key, t: second key (build-id) or NULL */
    size_t n, cap;
} strtab;

static int strtab_index(strtab *tab, const char *s, const char *t)
{
    for (size_t i = 0; i < tab->n; i++)
        if (strcmp(tab->s[i], s) == 0 && (!t || strcmp(tab->t[i], t) == 0))
            return (int)i;
    if (tab->n == tab->cap) {
        size_t cap = tab->cap ? 2 * tab->cap : 64;
        const char **s2 = realloc(tab->s, cap * sizeof *s2);
        if (s2)
            tab->s = s2;
        const char **t2 = realloc(tab->t, cap * sizeof *t2);
        if (t2)
            tab->t = t2;
        if (!s2 || !t2)
            return -1;
        tab->cap = cap;
    }
    tab->s[tab->n] = s;
    tab->t[tab->n] = t ? t : "";
    return (int)tab->n++;
}

/* profile.pwprof from the ranks' blobs; 0 when written. */
static int write_reduced(char *all, const int *lens, int n)
{
    int rc = -1;
    size_t nsites = 0, nframes = 0, nhist = 0, ncounts = 0, ncomms = 0;
    char *q = all;
    for (int r = 0; r < n; q += lens[r], r++) {
        blob_head h;
        memcpy(&h, q, sizeof h);
        nsites += (size_t)h.nsites;
        nframes += (size_t)h.nframes;
        nhist += (size_t)h.nhist;
        ncounts += (size_t)h.ncounts;
        ncomms += (size_t)h.ncomms;
    }
    pw_profile p;
    memset(&p, 0, sizeof p);
    p.ranks = calloc((size_t)(n > 0 ? n : 1), sizeof *p.ranks);
    p.sites = calloc(nsites + 1, sizeof *p.sites);
    p.frames = calloc(nframes + 1, sizeof *p.frames);
    p.hist = calloc(nhist + 1, sizeof *p.hist);
    p.counts = calloc(ncounts + 1, sizeof *p.counts);
    p.comms = calloc(ncomms + 1, sizeof *p.comms);
    strtab hosts = {0}, objs = {0};
    int *objmap = NULL;
    size_t objmap_cap = 0;
    if (!p.ranks || !p.sites || !p.frames || !p.hist || !p.counts || !p.comms) {
        pw_log("out of memory while reducing the profile");
        goto out;
    }
    q = all;
    for (int r = 0; r < n; q += lens[r], r++) {
        blob_head h;
        char *c = q;
        memcpy(&h, c, sizeof h);
        c += sizeof h;
        pw_rank_rec *rr = &p.ranks[p.nranks++];
        memcpy(rr, c, sizeof *rr);
        c += sizeof *rr;
        pw_site_rec *sites = (pw_site_rec *)c;
        c += (size_t)h.nsites * sizeof(pw_site_rec);
        pw_frame_rec *frames = (pw_frame_rec *)c;
        c += (size_t)h.nframes * sizeof(pw_frame_rec);
        pw_hist_rec *hist = (pw_hist_rec *)c;
        c += (size_t)h.nhist * sizeof(pw_hist_rec);
        pw_count_rec *counts = (pw_count_rec *)c;
        c += (size_t)h.ncounts * sizeof(pw_count_rec);
        memcpy(p.comms + p.ncomms, c, (size_t)h.ncomms * sizeof(pw_comm_rec));
        p.ncomms += (size_t)h.ncomms;
        c += (size_t)h.ncomms * sizeof(pw_comm_rec);
        rr->host = strtab_index(&hosts, c, NULL);
        c += strlen(c) + 1;
        if ((size_t)h.nobjects > objmap_cap) {
            int *m2 = realloc(objmap, (size_t)h.nobjects * sizeof *objmap);
            if (!m2) {
                pw_log("out of memory while reducing the profile");
                goto out;
            }
            objmap = m2;
            objmap_cap = (size_t)h.nobjects;
        }
        for (int64_t m = 0; m < h.nobjects; m++) {
            const char *path = c;
            c += strlen(c) + 1;
            objmap[m] = strtab_index(&objs, path, c);
            c += strlen(c) + 1;
        }
        size_t frame_base = p.nframes, site_base = p.nsites;
        for (int64_t i = 0; i < h.nframes; i++) {
            pw_frame_rec f;
            memcpy(&f, &frames[i], sizeof f);
            if (f.object >= 0)
                f.object = objmap[f.object];
            p.frames[p.nframes++] = f;
        }
        for (int64_t i = 0; i < h.nsites; i++) {
            pw_site_rec s;
            memcpy(&s, &sites[i], sizeof s);
            if (s.object >= 0)
                s.object = objmap[s.object];
            if (s.first_frame >= 0)
                s.first_frame += (int64_t)frame_base;
            p.sites[p.nsites++] = s;
        }
        memcpy(p.hist + p.nhist, hist, (size_t)h.nhist * sizeof(pw_hist_rec));
        p.nhist += (size_t)h.nhist;
        for (int64_t i = 0; i < h.ncounts; i++) {
            pw_count_rec k;
            memcpy(&k, &counts[i], sizeof k);
            k.site += (int64_t)site_base;
            p.counts[p.ncounts++] = k;
        }
    }
    p.hosts = hosts.s;
    p.nhosts = hosts.n;
    p.objects = objs.s;
    p.buildids = objs.t;
    p.nobjects = objs.n;
    p.events = pw_event_names; /* the same events on every rank (one option) */
    p.nevents = (size_t)pw_nevents;
    p.world_size = st.size;
    char path[4200];
    if (pw_experiment_path(path, sizeof path, "profile.pwprof") == 0)
        rc = pw_profile_write(&p, path); /* a failure is marked in the experiment */
out:
    free(p.ranks);
    free(p.sites);
    free(p.frames);
    free(p.hist);
    free(p.counts);
    free(p.comms);
    free(hosts.s);
    free(hosts.t);
    free(objs.s);
    free(objs.t);
    free(objmap);
    return rc;
}

/* pw_job's gather: each rank's bytes to rank 0 on the runtime's duplicate of
 * MPI_COMM_WORLD (no application message can match). A rank without memory for its part
 * contributes nothing rather than leave the others waiting. */
static int gather(const void *mine, size_t n, char **all, int **lens)
{
    int mylen = mine && n <= INT32_MAX ? (int)n : 0, *displs = NULL, ok = 1;
    *all = NULL;
    *lens = NULL;
    if (st.rank == 0) {
        *lens = calloc((size_t)st.size, sizeof **lens);
        displs = calloc((size_t)st.size, sizeof *displs);
    }
    pmpi.Gather(&mylen, 1, pre.int_, *lens, 1, pre.int_, 0, st.comm);
    if (st.rank == 0) {
        size_t total = 0;
        for (int r = 0; r < st.size; r++) {
            displs[r] = (int)total;
            total += (size_t)(*lens)[r];
        }
        *all = malloc(total ? total : 1);
        ok = *all && *lens && displs;
    }
    pmpi.Gatherv(mine, mylen, pre.byte, *all, *lens, displs, pre.byte, 0, st.comm);
    free(displs);
    return ok ? 0 : -1;
}

/* pw_compact_comm's exchanges (mpi_compact.h), on the runtime's communicator: a message's
 * length, the receiver's answer whether it has the memory for it, then its bytes (a
 * receiver out of memory loses that subtree's data, and nobody waits for ever). */
#define COMPACT_TAG 7932

static void compact_send(int to, const void *p, size_t n)
{
    int64_t len = n <= INT32_MAX ? (int64_t)n : 0;
    int32_t room = 0;
    pmpi.Send(&len, 8, pre.byte, to, COMPACT_TAG, st.comm);
    if (!len)
        return;
    recv_yielding(&room, 4, to, COMPACT_TAG);
    if (room)
        pmpi.Send(p, (int)len, pre.byte, to, COMPACT_TAG, st.comm);
}

static void compact_recv(int from, char **buf, size_t *n)
{
    int64_t len = 0;
    recv_yielding(&len, 8, from, COMPACT_TAG);
    *buf = NULL;
    *n = 0;
    if (len <= 0)
        return;
    char *b = malloc((size_t)len);
    int32_t room = b != NULL;
    pmpi.Send(&room, 4, pre.byte, from, COMPACT_TAG, st.comm);
    if (!b)
        return;
    recv_yielding(b, (int)len, from, COMPACT_TAG);
    *buf = b;
    *n = (size_t)len;
}

void pw_mpi_finalize_begin(int fn, void *ra)
{
    (void)fn;
    (void)ra;
    if (!pw_active || !st.initialized || st.finalized)
        return;
    pw_snapshots_stop(); /* the reduction's tables are not a snapshot's */
    __atomic_store_n(&pw_mpi_watching, 0, __ATOMIC_RELEASE);
    st.t_fini_enter = pw_now();
    pw_mpi_recording = 0;
    pw_rank_rec r; /* should it end here, without saving */
    fill_rank(&r, PW_STATE_KILLED, st.t_fini_enter);
    pw_tables_rank(&r, st.size);
    clock_offsets(&st.offset_fini, &st.offset_fini_err);
    pw_objects_refresh(); /* objects dlopen'ed since MPI_Init */
    pw_trace_clock clock = {st.offset_init,     st.offset_init_err, st.offset_fini,
                            st.offset_fini_err, st.t_init_leave,    st.t_fini_enter};
    pw_trace_end(PW_STATE_COMPLETE, &clock);

    pw_job job = {st.rank, st.size, gather};
    pw_modules_reduce(&job); /* the other modules' job-wide files, MPI still up */

    pw_local l;
    size_t len = 0;
    char *blob = NULL;
    /* above --full-profile-ranks ranks rank 0 gathers nobody's call sites: the compact
     * profile, reduced up a tree in bounded memory, is the profile (docs/format.md) */
    int full = (int64_t)st.size <= pw_opt.full_profile_ranks;
    int built = build_local(&l, PW_STATE_COMPLETE, st.t_fini_enter) == 0;
    if (built && full)
        blob = blob_pack(&l, &len);
    /* the rank's data is in its blob, on its way to rank 0: its tables file goes now, so
     * that on a nearly full disk its space is the profile's (before the gather, so that
     * every rank's is free when rank 0 has them all and writes); without a blob (no
     * memory) the file stays, the rank's data */
    pw_tables_done(PW_STATE_COMPLETE, full ? blob != NULL : built);
    char cpath[4200];
    pw_compact_comm cc = {st.rank, st.size, compact_send, compact_recv};
    if (pw_experiment_path(cpath, sizeof cpath, "profile.pwcompact") != 0)
        cpath[0] = 0;
    int64_t t_compact = pw_now();
    pw_compact_reduce(built ? &l : NULL, &cc, cpath);
    if (st.rank == 0)
        pw_debug("compact profile of %d ranks reduced and written in %ld us", st.size,
                 (long)((pw_now() - t_compact) / 1000));
    if (built)
        local_free(&l);
    int *lens = NULL;
    char *all = NULL;
    if (full)
        gather(blob, blob ? len : 0, &all, &lens);
    if (st.rank == 0 && all && lens) {
        /* drop empty contributions (a rank out of memory) */
        int n = 0;
        for (int r = 0; r < st.size; r++)
            if (lens[r] > 0)
                lens[n++] = lens[r];
        write_reduced(all, lens, n);
    }
    free(all);
    free(lens);
    free(blob);
    st.finalized = 1;
}

void pw_mpi_finalize_done(void) {}

/* The child of a fork is no rank (MPI forbids it MPI calls): nothing of its is recorded
 * as MPI, and its end writes the core's process profile of its own calls, not this
 * rank's partial profile. */
static void fork_child(void)
{
    __atomic_store_n(&pw_mpi_recording, 0, __ATOMIC_RELEASE);
    st.initialized = 0;
    pw_keyed_forget(&comm_rows);
    comm_tab = NULL;
}

/* This library's part of the mpi module (the list's is mpi_loader.c): its dump and its
 * fork handler, registered when the library is loaded. */
static const pw_module mpi_late = {
    .name = "mpi", .dump = dump, .fork_child = fork_child, .snapshot = snapshot};

__attribute__((constructor)) static void pw_mpi_module_init(void)
{
    pw_functions_register(&mpi_functions);
    for (int i = 0; i < PW_MPI_NFN; i++)
        in_histogram[i] = (PW_HIST_FAMILY_MASK >> pw_mpi_fn_family[i]) & 1;
    pw_register_module(&mpi_late);
    /* loaded by the core at this process's first MPI call: until MPI_Init returns, the
     * process is one that called MPI and is no rank yet (what perfweave run says of a
     * launch whose MPI start-up failed) */
    pw_rank_set(PW_ACT_JOINING);
}
