/*
 * MPI event tracing (--trace; docs/format.md "Traces"): what each wrapped call
 * adds to the rank's trace. A call is one CALL record followed by its messages
 * (SEND, RECV), request posts and completions (IRECV, SEND_DONE, RECV with a
 * request key, COLL_DONE) and the collective it is (COLL). Peers are world ranks; each
 * communicator is defined once, with its members as world ranks, in the rank's
 * JSON file written at the end.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "pw_mpi_fn.h"
#include "modules/pw_mpi.h"

int pw_trace_on;

static struct {
    int (*Comm_group)(MPI_Comm, MPI_Group *);
    int (*Comm_remote_group)(MPI_Comm, MPI_Group *);
    int (*Comm_test_inter)(MPI_Comm, int *);
    int (*Group_size)(MPI_Group, int *);
    int (*Group_translate_ranks)(MPI_Group, int, const int *, MPI_Group, int *);
    int (*Group_free)(MPI_Group *);
    int (*Get_count)(const MPI_Status *, MPI_Datatype, int *);
} pm;

static MPI_Group world_group;
static MPI_Datatype byte_type;
static int my_rank, world_size;
static int lock_word;

static void lock(void)
{
    while (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE))
        ;
}
static void unlock(void) { __atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE); }

/* ---- communicators ---- */

typedef struct tcomm {
    MPI_Comm handle;
    int live;
    int n;        /* local group size */
    int *members; /* local group as world ranks */
    int nremote;  /* intercommunicators: remote group */
    int *remote;
    int parent, seq;
} tcomm;

static tcomm *comms;
static int ncomms, capcomms;

static int *group_to_world(MPI_Group g, int *n)
{
    pm.Group_size(g, n);
    int *in = malloc(sizeof(int) * (size_t)(*n ? *n : 1));
    int *out = malloc(sizeof(int) * (size_t)(*n ? *n : 1));
    if (!in || !out) {
        free(in);
        free(out);
        *n = 0;
        return NULL;
    }
    for (int i = 0; i < *n; i++)
        in[i] = i;
    pm.Group_translate_ranks(g, *n, in, world_group, out);
    free(in);
    return out;
}

static int same_members(const tcomm *a, const int *m, int n, const int *r, int nr)
{
    return a->n == n && a->nremote == nr && !memcmp(a->members, m, sizeof(int) * (size_t)n) &&
           (!nr || !memcmp(a->remote, r, sizeof(int) * (size_t)nr));
}

/* Define a communicator (at its creation, or when first seen). Caller locks. */
static int define_comm(MPI_Comm c, int parent)
{
    if (ncomms == capcomms) {
        int cap = capcomms ? 2 * capcomms : 16;
        tcomm *t = realloc(comms, sizeof *t * (size_t)cap);
        if (!t)
            return -1;
        comms = t;
        capcomms = cap;
    }
    tcomm *t = &comms[ncomms];
    memset(t, 0, sizeof *t);
    MPI_Group g;
    int inter = 0;
    pm.Comm_group(c, &g);
    t->members = group_to_world(g, &t->n);
    pm.Group_free(&g);
    pm.Comm_test_inter(c, &inter);
    if (inter) {
        pm.Comm_remote_group(c, &g);
        t->remote = group_to_world(g, &t->nremote);
        pm.Group_free(&g);
    }
    for (int i = 0; i < ncomms; i++)
        if (same_members(&comms[i], t->members, t->n, t->remote, t->nremote))
            t->seq++;
    t->handle = c;
    t->live = 1;
    t->parent = parent;
    return ncomms++;
}

static int last_comm = -1;

static int comm_id(MPI_Comm c)
{
    int id = __atomic_load_n(&last_comm, __ATOMIC_RELAXED);
    if (id >= 0 && comms[id].live && comms[id].handle == c)
        return id;
    lock();
    id = -1;
    for (int i = ncomms - 1; i >= 0; i--)
        if (comms[i].live && comms[i].handle == c) {
            id = i;
            break;
        }
    if (id < 0)
        id = define_comm(c, -1);
    unlock();
    if (id >= 0)
        __atomic_store_n(&last_comm, id, __ATOMIC_RELAXED);
    return id;
}

/* A peer given as a rank of communicator id (the remote group of an
 * intercommunicator) as a world rank; -2 any source, -1 no process. */
static int to_world(int id, int r)
{
    if (r == MPI_ANY_SOURCE)
        return -2;
    if (r == MPI_PROC_NULL || r < 0 || id < 0)
        return -1;
    const tcomm *t = &comms[id];
    if (t->nremote)
        return r < t->nremote ? t->remote[r] : -1;
    return r < t->n && t->members ? t->members[r] : -1;
}

/* ---- groups (of MPI_Win_post / MPI_Win_start) and windows ---- */

typedef struct tgroup {
    int n;
    int *members; /* world ranks, in group rank order */
} tgroup;

static tgroup *groups;
static int ngroups, capgroups;

/* The id of a group, defined by its members (one id per distinct member list). */
static int group_id(MPI_Group g)
{
    if (g == MPI_GROUP_NULL)
        return -1;
    int n = 0;
    int *m = group_to_world(g, &n);
    if (!m && n)
        return -1;
    lock();
    int id = -1;
    for (int i = 0; i < ngroups && id < 0; i++)
        if (groups[i].n == n && !memcmp(groups[i].members, m, sizeof(int) * (size_t)n))
            id = i;
    if (id < 0 && ngroups == capgroups) {
        int cap = capgroups ? 2 * capgroups : 16;
        tgroup *t = realloc(groups, sizeof *t * (size_t)cap);
        if (t) {
            groups = t;
            capgroups = cap;
        }
    }
    if (id < 0 && ngroups < capgroups) {
        groups[ngroups] = (tgroup){n, m};
        id = ngroups++;
        m = NULL;
    }
    unlock();
    free(m);
    return id;
}

typedef struct twin {
    MPI_Win handle;
    int live;
    int comm; /* communicator id */
    int seq;  /* windows created on the same communicator before this one */
} twin;

static twin *wins;
static int nwins, capwins;

static int define_window(MPI_Win w, int comm)
{
    lock();
    if (nwins == capwins) {
        int cap = capwins ? 2 * capwins : 16;
        twin *t = realloc(wins, sizeof *t * (size_t)cap);
        if (!t) {
            unlock();
            return -1;
        }
        wins = t;
        capwins = cap;
    }
    int seq = 0;
    for (int i = 0; i < nwins; i++)
        seq += wins[i].comm == comm;
    wins[nwins] = (twin){w, 1, comm, seq};
    int id = nwins++;
    unlock();
    return id;
}

static int window_id(MPI_Win w)
{
    int id = -1;
    lock();
    for (int i = nwins - 1; i >= 0; i--)
        if (wins[i].live && wins[i].handle == w) {
            id = i;
            break;
        }
    unlock();
    return id;
}

static MPI_Win win_handle(const void *p, int fortran)
{
    return fortran ? pw_win_f2c(*(const MPI_Fint *)p) : *(const MPI_Win *)p;
}

/* The window being freed by this thread's MPI_Win_free (read before the call). */
static PW_TLS int freeing_window = -1;

/* ---- requests: what was posted, for its completion ---- */

#define PW_TREQ_SLOTS 65536
#define PW_TREQ_FREE UINT64_MAX
typedef struct treq {
    uint64_t key;
    int recv, coll, persistent, comm, peer, tag, flags;
    int64_t bytes;
    int64_t post; /* the number of the request's latest post on this rank */
} treq;
static treq *reqs;
static int64_t posts; /* posts numbered 1, 2, ... on this rank: completions name theirs */

static uint64_t key_of(const void *req, int fortran)
{
    uint64_t k = 0;
    MPI_Request r;
    if (fortran)
        r = pw_request_f2c(*(const MPI_Fint *)req);
    else
        memcpy(&r, req, sizeof r);
    if (r == MPI_REQUEST_NULL)
        return 0;
    memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
    return k;
}

static treq *req_slot(uint64_t key, int create)
{
    if (!reqs || !key)
        return NULL;
    size_t i = (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 48) & (PW_TREQ_SLOTS - 1);
    treq *tomb = NULL;
    for (size_t n = 0; n < PW_TREQ_SLOTS; n++, i = (i + 1) & (PW_TREQ_SLOTS - 1)) {
        if (reqs[i].key == key)
            return &reqs[i];
        if (reqs[i].key == PW_TREQ_FREE && !tomb)
            tomb = &reqs[i];
        if (reqs[i].key == 0)
            return create ? (tomb ? tomb : &reqs[i]) : NULL;
    }
    return create ? tomb : NULL;
}

/* Register a request; returns its post number. */
static int64_t req_post(uint64_t key, const treq *r)
{
    lock();
    treq *s = req_slot(key, 1);
    int64_t id = r->persistent ? 0 : ++posts;
    if (s) {
        *s = *r;
        s->key = key;
        s->post = id;
    }
    unlock();
    return id;
}

/* Look a request up; remove it (when completed and not persistent), or give it a new
 * post number (a persistent request started). */
static int req_take(uint64_t key, treq *out, int remove, int repost)
{
    lock();
    treq *s = req_slot(key, 0);
    int found = s != NULL;
    if (s) {
        if (repost)
            s->post = ++posts;
        *out = *s;
        if (remove && !s->persistent)
            s->key = PW_TREQ_FREE;
    }
    unlock();
    return found;
}

/* ---- statuses and saved request keys of the calling thread ---- */

static PW_TLS MPI_Status *status_buf;
static PW_TLS int status_cap;
static PW_TLS uint64_t *saved_keys;
static PW_TLS int saved_cap, nsaved;

MPI_Status *pw_trace_statuses(int n)
{
    if (n > status_cap) {
        MPI_Status *b = realloc(status_buf, sizeof *b * (size_t)n);
        if (!b)
            return MPI_STATUSES_IGNORE;
        status_buf = b;
        status_cap = n;
    }
    return status_buf;
}

void pw_trace_before(int action, const pw_args *a)
{
    if (action == PW_ACTION_wait) {
        nsaved = 0;
        if (saved_cap < 1) {
            saved_keys = realloc(saved_keys, sizeof *saved_keys * 16);
            saved_cap = saved_keys ? 16 : 0;
        }
        if (saved_cap)
            saved_keys[nsaved++] = key_of(a->request, a->fortran);
    } else if (action == PW_ACTION_waitmulti) {
        nsaved = 0;
        if (a->nreq > saved_cap) {
            uint64_t *k = realloc(saved_keys, sizeof *k * (size_t)a->nreq);
            if (!k)
                return;
            saved_keys = k;
            saved_cap = a->nreq;
        }
        for (int i = 0; i < a->nreq; i++)
            saved_keys[nsaved++] =
                key_of(a->fortran ? (const void *)((const MPI_Fint *)a->requests + i)
                                  : (const void *)((const MPI_Request *)a->requests + i),
                       a->fortran);
    } else if (action == PW_ACTION_win_free) {
        freeing_window = window_id(win_handle(a->newwin, a->fortran));
    } else if (action == PW_ACTION_comm_free) {
        MPI_Comm c =
            a->fortran ? pw_comm_f2c(*(const MPI_Fint *)a->newcomm) : *(const MPI_Comm *)a->newcomm;
        int id = comm_id(c);
        if (id >= 0)
            comms[id].live = 0;
    }
}

static pw_event_rec *ev(pw_event_rec *r, int type)
{
    memset(r, 0, sizeof *r);
    r->type = (uint8_t)type;
    r->peer = r->comm = -1;
    return r;
}

/* A received message as a RECV event, from its status. */
static void recv_event(pw_event_rec *e, int cid, const MPI_Status *st, int have_status,
                       int req_peer, int req_tag, int64_t posted, uint64_t key)
{
    ev(e, PW_EV_RECV);
    e->t0 = (int64_t)key;
    e->comm = cid;
    if (have_status) {
        int n = 0;
        e->peer = to_world(cid, st->MPI_SOURCE);
        e->tag = st->MPI_TAG;
        e->bytes = pm.Get_count(st, byte_type, &n) == MPI_SUCCESS && n >= 0 ? n : posted;
    } else {
        e->peer = to_world(cid, req_peer);
        e->tag = req_tag == MPI_ANY_TAG ? -1 : req_tag;
        e->bytes = posted;
    }
}

/* A nonblocking collective's post number as its COLL record holds it: in the 32-bit tag
 * field, 0 (unknown: linked by request key) when it does not fit. */
static int32_t coll_post_number(int64_t post) { return post <= INT32_MAX ? (int32_t)post : 0; }

/* The completion of request i of this call. */
static int completion(pw_event_rec *e, const pw_args *a, int i, int single)
{
    treq r;
    if (i >= nsaved || !saved_keys[i] || !req_take(saved_keys[i], &r, 1, 0))
        return 0;
    if (r.coll) {
        ev(e, PW_EV_COLL_DONE);
        e->t0 = (int64_t)saved_keys[i];
        e->t1 = coll_post_number(r.post);
        e->comm = r.comm;
        return 1;
    }
    if (!r.recv) {
        ev(e, PW_EV_SEND_DONE);
        e->t0 = (int64_t)saved_keys[i];
        e->t1 = r.post;
        e->comm = r.comm;
        e->peer = r.peer;
        e->tag = r.tag;
        return 1;
    }
    MPI_Status st;
    int have = pw_mpi_status_at(a, i, single, &st);
    recv_event(e, r.comm, &st, have, -3, r.tag, r.bytes, saved_keys[i]);
    e->t1 = r.post;
    if (!have)
        e->peer = r.peer;
    return 1;
}

static int nonblocking_post(const pw_args *a, int recv, int cid, int peer_world, int tag,
                            int64_t bytes, int flags, pw_event_rec *e, int persistent)
{
    uint64_t key = key_of(a->request, a->fortran);
    treq r = {.recv = recv,
              .persistent = persistent,
              .comm = cid,
              .peer = peer_world,
              .tag = tag,
              .flags = flags,
              .bytes = bytes};
    int64_t id = req_post(key, &r);
    if (persistent)
        return 0; /* the events come with each MPI_Start */
    ev(e, recv ? PW_EV_IRECV : PW_EV_SEND);
    e->t0 = (int64_t)key;
    e->t1 = id;
    e->flags = (uint8_t)(flags | PW_EVF_NONBLOCKING);
    e->comm = cid;
    e->peer = peer_world;
    e->tag = recv && tag == MPI_ANY_TAG ? -1 : tag;
    e->bytes = bytes;
    return 1;
}

/* A persistent request started: its post event. */
static int start_event(pw_event_rec *e, const void *req, int fortran)
{
    uint64_t key = key_of(req, fortran);
    treq r;
    if (!req_take(key, &r, 0, 1))
        return 0;
    ev(e, r.recv ? PW_EV_IRECV : PW_EV_SEND);
    e->t0 = (int64_t)key;
    e->t1 = r.post;
    e->flags = (uint8_t)(r.flags | PW_EVF_NONBLOCKING | PW_EVF_PERSISTENT);
    e->comm = r.comm;
    e->peer = r.peer;
    e->tag = r.recv && r.tag == MPI_ANY_TAG ? -1 : r.tag;
    e->bytes = r.bytes;
    return 1;
}

static int is_coll(int action)
{
    return action >= PW_ACTION_barrier && action <= PW_ACTION_neighbor_alltoallw;
}

static int rooted(int action)
{
    return action == PW_ACTION_bcast || action == PW_ACTION_reduce || action == PW_ACTION_gather ||
           action == PW_ACTION_gatherv || action == PW_ACTION_scatter ||
           action == PW_ACTION_scatterv;
}

static int is_rma_op(int action) { return action >= PW_ACTION_put && action <= PW_ACTION_cas; }

/* One-sided operation or window synchronisation on a->win. */
static void window_event(pw_event_rec *e, int type, const pw_args *a, int64_t sent, int64_t recv)
{
    int w = window_id(a->win);
    ev(e, type);
    e->tag = w;
    e->comm = w >= 0 ? wins[w].comm : -1;
    e->peer = w >= 0 && a->target >= 0 ? to_world(wins[w].comm, a->target) : -1;
    if (type == PW_EV_RMA) {
        e->bytes = sent;
        e->t1 = recv;
        if (a->request) {
            e->flags = PW_EVF_NONBLOCKING;
            e->t0 = (int64_t)key_of(a->request, a->fortran);
        }
    } else {
        e->t1 = a->group != MPI_GROUP_NULL ? group_id(a->group) : -1;
        if (a->tag == MPI_LOCK_EXCLUSIVE && a->target >= 0)
            e->flags |= PW_EVF_EXCLUSIVE;
        if (a->flag && *(const int *)a->flag)
            e->flags |= PW_EVF_DONE;
    }
}

/* --filter: the functions the trace leaves out, and whether any rule applies */
static char untraced_fn[PW_MPI_NFN];
static int filtered, path_functions;

void pw_trace_call(const pw_call *c, int64_t t1, int action, const pw_args *a, int64_t sent,
                   int64_t recv)
{
    int max = 1;
    if (a) {
        if (action == PW_ACTION_sendrecv || action == PW_ACTION_sendrecv_replace)
            max = 3;
        else if (action == PW_ACTION_waitmulti || action == PW_ACTION_startall)
            max = 1 + (a->nreq > 0 ? a->nreq : 0);
        else
            max = 2;
    }
    if (PW_UNLIKELY(filtered) &&
        (untraced_fn[c->fn] || (pw_mpi_regions_untraced && pw_mpi_regions_untraced()) ||
         (path_functions && pw_filter_path_excluded_here())))
        return; /* --filter: left out of the trace (still in the profile) */
    pw_event_rec *r = pw_trace_reserve(max);
    if (!r)
        return;
    pw_event_rec *e = ev(r, PW_EV_CALL);
    e->t0 = c->t0;
    e->t1 = t1;
    e->fn = (uint16_t)c->fn;
    e->bytes = (int64_t)(uintptr_t)c->ra;
    int used = 1, sync = pw_mpi_fn_synchronous[c->fn] ? PW_EVF_SYNCHRONOUS : 0;
    if (!a) {
        pw_trace_commit(max - used);
        return;
    }
    int cid;
    switch (action) {
    case PW_ACTION_send:
        if (a->peer == MPI_PROC_NULL)
            break;
        cid = comm_id(a->comm);
        e = ev(r + used++, PW_EV_SEND);
        e->flags = (uint8_t)sync;
        e->comm = cid;
        e->peer = to_world(cid, a->peer);
        e->tag = a->tag;
        e->bytes = sent;
        break;
    case PW_ACTION_isend:
        cid = comm_id(a->comm);
        used +=
            nonblocking_post(a, 0, cid, to_world(cid, a->peer), a->tag, sent, sync, r + used, 0);
        break;
    case PW_ACTION_irecv:
        cid = comm_id(a->comm);
        used += nonblocking_post(a, 1, cid, to_world(cid, a->peer), a->tag, recv, 0, r + used, 0);
        break;
    case PW_ACTION_send_init:
        cid = comm_id(a->comm);
        nonblocking_post(a, 0, cid, to_world(cid, a->peer), a->tag,
                         a->peer == MPI_PROC_NULL ? 0 : pw_mpi_type_bytes(a->count, a->type), sync,
                         NULL, 1);
        break;
    case PW_ACTION_recv_init:
        cid = comm_id(a->comm);
        nonblocking_post(a, 1, cid, to_world(cid, a->peer), a->tag,
                         a->peer == MPI_PROC_NULL ? 0 : pw_mpi_type_bytes(a->count, a->type), 0,
                         NULL, 1);
        break;
    case PW_ACTION_recv: {
        MPI_Status st;
        if (a->peer == MPI_PROC_NULL)
            break;
        cid = comm_id(a->comm);
        int have = pw_mpi_status_at(a, 0, 1, &st);
        recv_event(r + used++, cid, &st, have, a->peer, a->tag, recv, 0);
        break;
    }
    case PW_ACTION_mrecv: {
        MPI_Status st;
        int have = pw_mpi_status_at(a, 0, 1, &st);
        recv_event(r + used++, -1, &st, have, MPI_ANY_SOURCE, MPI_ANY_TAG, recv, 0);
        break;
    }
    case PW_ACTION_sendrecv:
    case PW_ACTION_sendrecv_replace: {
        MPI_Status st;
        cid = comm_id(a->comm);
        if (a->peer != MPI_PROC_NULL) {
            e = ev(r + used++, PW_EV_SEND);
            e->comm = cid;
            e->peer = to_world(cid, a->peer);
            e->tag = a->tag;
            e->bytes = sent;
        }
        if (a->source != MPI_PROC_NULL) {
            int have = pw_mpi_status_at(a, 0, 1, &st);
            recv_event(r + used++, cid, &st, have, a->source, MPI_ANY_TAG, recv, 0);
        }
        break;
    }
    case PW_ACTION_start:
        used += start_event(r + used, a->request, a->fortran);
        break;
    case PW_ACTION_startall:
        for (int i = 0; i < a->nreq; i++)
            used += start_event(r + used,
                                a->fortran ? (const void *)((const MPI_Fint *)a->requests + i)
                                           : (const void *)((const MPI_Request *)a->requests + i),
                                a->fortran);
        break;
    case PW_ACTION_wait:
        if (!a->flag || *(const int *)a->flag)
            used += completion(r + used, a, 0, 1);
        break;
    case PW_ACTION_waitmulti:
        if (a->index) { /* Waitany, Testany */
            int i = *(const int *)a->index;
            if ((!a->flag || *(const int *)a->flag) && i != MPI_UNDEFINED && i >= 0)
                used += completion(r + used, a, a->fortran ? i - 1 : i, 1);
        } else if (a->outcount) { /* Waitsome, Testsome */
            int n = *(const int *)a->outcount;
            const int *idx = a->indices;
            for (int k = 0; n != MPI_UNDEFINED && k < n; k++)
                used += completion(r + used, a, a->fortran ? idx[k] - 1 : idx[k], 0);
        } else if (!a->flag || *(const int *)a->flag) { /* Waitall, Testall */
            for (int i = 0; i < a->nreq; i++)
                used += completion(r + used, a, i, 0);
        }
        break;
    case PW_ACTION_win: {
        MPI_Win w = win_handle(a->newwin, a->fortran);
        if (w == MPI_WIN_NULL)
            break;
        cid = comm_id(a->comm);
        e = ev(r + used++, PW_EV_WIN);
        e->comm = cid;
        e->tag = define_window(w, cid);
        break;
    }
    case PW_ACTION_win_free:
        if (freeing_window < 0)
            break;
        e = ev(r + used++, PW_EV_WIN);
        e->tag = freeing_window;
        e->comm = wins[freeing_window].comm;
        e->flags = PW_EVF_FREE;
        wins[freeing_window].live = 0;
        freeing_window = -1;
        break;
    case PW_ACTION_winsync:
        window_event(r + used++, PW_EV_WSYNC, a, 0, 0);
        break;
    case PW_ACTION_mgmt: /* a new communicator */
        if (a->newcomm) {
            MPI_Comm nc = a->fortran ? pw_comm_f2c(*(const MPI_Fint *)a->newcomm)
                                     : *(const MPI_Comm *)a->newcomm;
            if (nc != MPI_COMM_NULL) {
                int parent = comm_id(a->comm);
                lock();
                define_comm(nc, parent);
                unlock();
            }
        }
        break;
    default:
        if (is_rma_op(action)) {
            window_event(r + used++, PW_EV_RMA, a, sent, recv);
        } else if (is_coll(action)) {
            cid = comm_id(a->comm);
            e = ev(r + used++, PW_EV_COLL);
            e->comm = cid;
            e->peer = rooted(action) && a->root >= 0 ? to_world(cid, a->root) : -1;
            e->bytes = sent;
            e->t1 = recv;
            if (a->request) { /* its completion names it (COLL_DONE) */
                treq q = {.coll = 1, .comm = cid};
                uint64_t key = key_of(a->request, a->fortran);
                e->flags = PW_EVF_NONBLOCKING;
                e->t0 = (int64_t)key;
                e->tag = coll_post_number(req_post(key, &q));
            }
        }
        break;
    }
    pw_trace_commit(max - used);
}

/* ---- start and end ---- */

/* Recorded whatever Pcontrol's state: the levels delimit the region of interest
 * (perfweave pop), also where recording is off. */
void pw_trace_pcontrol(int level, int64_t t)
{
    pw_event_rec *r = pw_trace_reserve(1);
    if (!r)
        return;
    ev(r, PW_EV_PCONTROL)->t0 = t;
    r->tag = level;
    pw_trace_commit(0);
}

static void write_meta(int state, const pw_trace_clock *clock);

void pw_trace_start(int rank, int size, MPI_Comm world)
{
#define PM(name) pm.name = pw_mpi_real("PMPI_" #name)
    PM(Comm_group);
    PM(Comm_remote_group);
    PM(Comm_test_inter);
    PM(Group_size);
    PM(Group_translate_ranks);
    PM(Group_free);
    PM(Get_count);
#undef PM
    my_rank = rank;
    world_size = size;
    byte_type = pw_mpi_byte();
    pm.Comm_group(world, &world_group);
    reqs = calloc(PW_TREQ_SLOTS, sizeof *reqs);
    char dir[4200], path[4200], num[24];
    pw_experiment_path(dir, sizeof dir, "traces");
    mkdir(dir, 0777);
    pw_fmt_int(num, rank);
    pw_experiment_path(path, sizeof path, "traces/rank-", num, ".events");
    if (!reqs) {
        pw_log("no memory for the trace; tracing off on this rank");
        return;
    }
    if (pw_trace_open(path) != 0)
        return; /* marked in the experiment; tracing off on this rank */
    lock();
    define_comm(world, -1); /* id 0 */
    unlock();
    for (int i = 0; i < PW_MPI_NFN; i++)
        filtered |= untraced_fn[i] =
            (char)pw_filter_excluded(PW_FILTER_FUNCTION, pw_mpi_fn_names[i]);
    filtered |= pw_filter_active(PW_FILTER_PATH);
    path_functions = pw_filter_paths_resolve() > 0; /* functions below which nothing is */
    pw_trace_on = 1;
}

/* What a rank killed outright leaves besides its records: its functions, clock and
 * MPI_COMM_WORLD, in state "running" (replaced when the rank ends). */
void pw_trace_running(const pw_trace_clock *clock)
{
    if (pw_trace_on)
        write_meta(-1, clock);
}

void pw_trace_end(int state, const pw_trace_clock *clock)
{
    if (!pw_trace_on)
        return;
    pw_trace_on = 0;
    pw_trace_close();
    write_meta(state, clock);
}

/* rank-R.json, written to a temporary name and renamed. state: a PW_STATES value, or -1
 * while the rank runs. */
static void write_meta(int state, const pw_trace_clock *clock)
{
    int64_t ticks, now;
    pw_clock_pair(&now, &ticks);
    pw_buf b = {0};
    pw_json j;
    pw_json_begin(&j, &b);
    pw_json_str(&j, "format", PW_TRACE_MAGIC);
    pw_json_int(&j, "version", PW_TRACE_VERSION);
    pw_json_int(&j, "rank", my_rank);
    pw_json_int(&j, "world_size", world_size);
    pw_json_str(&j, "host", pw_hostname);
    pw_json_int(&j, "pid", getpid());
    pw_json_str(&j, "state", state < 0 ? "running" : pw_state_name(state));
    pw_json_strs(&j, "functions", pw_mpi_fn_names, PW_MPI_NFN);
    pw_json_open(&j, "families", '[');
    for (int i = 0; i < PW_MPI_NFN; i++)
        pw_json_str(&j, NULL, pw_family_name(pw_mpi_fn_family[i]));
    pw_json_close(&j);
    pw_json_open(&j, "clock", '{');
    pw_json_open(&j, "ticks", '[');
    pw_json_int(&j, NULL, pw_tick_start);
    pw_json_int(&j, NULL, ticks);
    pw_json_close(&j);
    pw_json_open(&j, "ns", '[');
    pw_json_int(&j, NULL, pw_t_start);
    pw_json_int(&j, NULL, now);
    pw_json_close(&j);
    pw_json_int(&j, "offset_init_ns", clock->offset_init);
    pw_json_int(&j, "offset_init_err_ns", clock->offset_init_err);
    pw_json_int(&j, "offset_fini_ns", clock->offset_fini);
    pw_json_int(&j, "offset_fini_err_ns", clock->offset_fini_err);
    pw_json_int(&j, "t_init_ns", clock->t_init);
    pw_json_int(&j, "t_fini_ns", clock->t_fini);
    pw_json_close(&j);
    pw_json_open(&j, "comms", '[');
    for (int i = 0; i < ncomms; i++) {
        const tcomm *t = &comms[i];
        pw_json_open(&j, NULL, '{');
        pw_json_int(&j, "id", i);
        if (i == 0)
            pw_json_str(&j, "name", "MPI_COMM_WORLD");
        pw_json_ints(&j, "ranks", t->members, (size_t)t->n);
        if (t->nremote)
            pw_json_ints(&j, "remote", t->remote, (size_t)t->nremote);
        pw_json_int(&j, "parent", t->parent);
        pw_json_int(&j, "seq", t->seq);
        pw_json_close(&j);
    }
    pw_json_close(&j);
    pw_json_open(&j, "windows", '[');
    for (int i = 0; i < nwins; i++) {
        pw_json_open(&j, NULL, '{');
        pw_json_int(&j, "id", i);
        pw_json_int(&j, "comm", wins[i].comm);
        pw_json_int(&j, "seq", wins[i].seq);
        pw_json_close(&j);
    }
    pw_json_close(&j);
    pw_json_open(&j, "groups", '[');
    for (int i = 0; i < ngroups; i++) {
        pw_json_open(&j, NULL, '{');
        pw_json_int(&j, "id", i);
        pw_json_ints(&j, "ranks", groups[i].members, (size_t)groups[i].n);
        pw_json_close(&j);
    }
    pw_json_close(&j);
    if (pw_mpi_regions_json)
        pw_mpi_regions_json(&j, "regions");
    pw_objects_ranges_json(&j, "objects");
    pw_json_int(&j, "records", pw_trace_written());
    pw_json_int(&j, "lost", pw_trace_lost());
    pw_json_str(&j, "filter", pw_opt.filter);
    pw_json_end(&j);
    char path[4200], num[24];
    pw_fmt_int(num, my_rank);
    if (pw_experiment_path(path, sizeof path, "traces/rank-", num, ".json") == 0)
        pw_buf_to_file(&b, path);
    else
        pw_buf_free(&b);
}
