/*
 * The compact profile (include/perfweave/format/mpi.h, docs/format.md "Compact profile"):
 * each rank's call sites summed into a summary, summaries merged up a binomial tree to
 * rank 0, the top nodes' per-rank times gathered, profile.pwcompact written.
 *
 * A summary is one block of memory, laid out as it travels: a head, the rank metrics'
 * statistics, the nodes (sorted by identity), their statistics, their caller frames,
 * their sketch counts (per node and node metric, metric after metric, dense from its first
 * bucket to its last), the matrix's top pairs (format/mpi.h PW_CPAIR_FIELDS, in their
 * order) and the objects' strings (sorted by path, build-id). Merging walks
 * two summaries' sorted nodes at once.
 * python/perfweave/model/compact.py does the same operations in the same order (its
 * tests compare the files byte for byte): keep the two alike.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_compact.h"
#include "perfweave/format/mpi.h"

#define NM PW_COMPACT_NODE_METRICS
#define NR 2 /* rank metrics: app_ns, mpi_ns */
#define SUB PW_COMPACT_SUB_BITS
#define NC PW_COMPACT_RANK_COMM_N
#define KP PW_COMPACT_TOP_PAIRS

typedef struct head {
    int64_t nnodes, nframes, nbuckets, nobjects, strbytes, npairs;
} head;

typedef struct sum {
    char *mem;
    size_t bytes;
    head h;
    pw_cstat_rec *rank; /* [NR] */
    pw_cnode_rec *nodes;
    pw_cstat_rec *stats; /* [nnodes][NM] */
    pw_frame_rec *frames;
    int64_t *counts;
    pw_cpair_rec *pairs;
    char *strings;
    const char **paths, **ids; /* [nobjects], into strings */
} sum;

static size_t layout(const head *h)
{
    return sizeof(head) + NR * sizeof(pw_cstat_rec) + (size_t)h->nnodes * sizeof(pw_cnode_rec) +
           (size_t)h->nnodes * NM * sizeof(pw_cstat_rec) +
           (size_t)h->nframes * sizeof(pw_frame_rec) + (size_t)h->nbuckets * 8 +
           (size_t)h->npairs * sizeof(pw_cpair_rec) + (size_t)h->strbytes;
}

/* s's pointers into mem (bytes long, its head first); -1 when the head does not fit. */
static int view(sum *s, char *mem, size_t bytes)
{
    memset(s, 0, sizeof *s);
    if (!mem || bytes < sizeof(head))
        return -1;
    memcpy(&s->h, mem, sizeof s->h);
    if (s->h.nnodes < 0 || s->h.nframes < 0 || s->h.nbuckets < 0 || s->h.nobjects < 0 ||
        s->h.strbytes < 0 || s->h.npairs < 0 || s->h.npairs > KP || layout(&s->h) != bytes)
        return -1;
    s->mem = mem;
    s->bytes = bytes;
    char *q = mem + sizeof(head);
    s->rank = (pw_cstat_rec *)q;
    q += NR * sizeof(pw_cstat_rec);
    s->nodes = (pw_cnode_rec *)q;
    q += (size_t)s->h.nnodes * sizeof(pw_cnode_rec);
    s->stats = (pw_cstat_rec *)q;
    q += (size_t)s->h.nnodes * NM * sizeof(pw_cstat_rec);
    s->frames = (pw_frame_rec *)q;
    q += (size_t)s->h.nframes * sizeof(pw_frame_rec);
    s->counts = (int64_t *)q;
    q += (size_t)s->h.nbuckets * 8;
    s->pairs = (pw_cpair_rec *)q;
    q += (size_t)s->h.npairs * sizeof(pw_cpair_rec);
    s->strings = q;
    s->paths = calloc((size_t)s->h.nobjects + 1, sizeof *s->paths);
    s->ids = calloc((size_t)s->h.nobjects + 1, sizeof *s->ids);
    if (!s->paths || !s->ids)
        return -1;
    char *end = mem + bytes;
    for (int64_t i = 0; i < s->h.nobjects; i++) {
        for (int k = 0; k < 2; k++) {
            char *z = memchr(q, 0, (size_t)(end - q));
            if (!z)
                return -1;
            (k ? s->ids : s->paths)[i] = q;
            q = z + 1;
        }
    }
    return 0;
}

static void sum_free(sum *s)
{
    free(s->mem);
    free(s->paths);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

/* A summary of head h, its strings those of paths/ids; 0 on success. */
static int sum_alloc(sum *s, head h, const char **paths, const char **ids)
{
    h.strbytes = 0;
    for (int64_t i = 0; i < h.nobjects; i++)
        h.strbytes += (int64_t)(strlen(paths[i]) + strlen(ids[i]) + 2);
    size_t bytes = layout(&h);
    char *mem = calloc(1, bytes);
    if (!mem)
        return -1;
    memcpy(mem, &h, sizeof h);
    char *q = mem + bytes - h.strbytes;
    for (int64_t i = 0; i < h.nobjects; i++) {
        size_t n = strlen(paths[i]) + 1, m = strlen(ids[i]) + 1;
        memcpy(q, paths[i], n);
        memcpy(q + n, ids[i], m);
        q += n + m;
    }
    if (view(s, mem, bytes) != 0) {
        free(mem);
        sum_free(s);
        return -1;
    }
    return 0;
}

/* The sketch bucket of x (format/mpi.h PW_COMPACT_SUB_BITS). */
static int32_t key_of(int64_t x)
{
    if (x < (1 << SUB))
        return (int32_t)(x < 0 ? 0 : x);
    int e = 63 - __builtin_clzll((uint64_t)x);
    return (int32_t)(((int64_t)(e - SUB + 1) << SUB) | ((x >> (e - SUB)) & ((1 << SUB) - 1)));
}

/* ---- identities ---- */

static int cmp64(int64_t a, int64_t b) { return (a > b) - (a < b); }

static int obj_cmp(const char *pa, const char *ia, const char *pb, const char *ib)
{
    int c = strcmp(pa, pb);
    return c ? c : strcmp(ia, ib);
}

/* A summary with a map of its object indices into a common sorted table (NULL: its own). */
typedef struct side {
    const sum *s;
    const int *omap;
} side;

static int64_t obj(const side *d, int32_t o) { return o < 0 ? -1 : d->omap ? d->omap[o] : o; }

/* Nodes' order: fn, object, offset, then the frames' (object, offset) outward, fewer
 * frames first when one path is the other's start. */
static int node_cmp(const side *a, int64_t i, const side *b, int64_t j)
{
    const pw_cnode_rec *x = &a->s->nodes[i], *y = &b->s->nodes[j];
    int c;
    if ((c = cmp64(x->fn, y->fn)) || (c = cmp64(obj(a, x->object), obj(b, y->object))) ||
        (c = cmp64(x->offset, y->offset)))
        return c;
    for (int k = 0; k < x->nframes && k < y->nframes; k++) {
        const pw_frame_rec *f = &a->s->frames[x->first_frame + k];
        const pw_frame_rec *g = &b->s->frames[y->first_frame + k];
        if ((c = cmp64(obj(a, f->object), obj(b, g->object))) || (c = cmp64(f->offset, g->offset)))
            return c;
    }
    return cmp64(x->nframes, y->nframes);
}

/* The sorted union of a's and b's objects (pointers into theirs) and each one's map into
 * it; -1 without memory. */
static int64_t objects_union(const sum *a, const sum *b, int *amap, int *bmap, const char **paths,
                             const char **ids)
{
    int64_t i = 0, j = 0, n = 0;
    while (i < a->h.nobjects || j < b->h.nobjects) {
        int c = i == a->h.nobjects   ? 1
                : j == b->h.nobjects ? -1
                                     : obj_cmp(a->paths[i], a->ids[i], b->paths[j], b->ids[j]);
        paths[n] = c <= 0 ? a->paths[i] : b->paths[j];
        ids[n] = c <= 0 ? a->ids[i] : b->ids[j];
        if (c <= 0)
            amap[i++] = (int)n;
        if (c >= 0)
            bmap[j++] = (int)n;
        n++;
    }
    return n;
}

/* ---- statistics ---- */

static void leaf_stat(pw_cstat_rec *s, int rank, int64_t v)
{
    memset(s, 0, sizeof *s);
    s->n = 1;
    s->argmin = s->argmax = rank;
    s->min = s->max = s->sum = v;
    s->mean = (double)v;
}

/* a's ranks and b's (all above a's): Chan et al.'s mean and m2; a tie in min or max
 * stays a's, the lower rank. */
static void merge_stat(pw_cstat_rec *o, const pw_cstat_rec *a, const pw_cstat_rec *b)
{
    double na = (double)a->n, nb = (double)b->n, nn = na + nb, d = b->mean - a->mean;
    double mean = a->mean + d * nb / nn;
    double m2 = a->m2 + b->m2 + d * d * na * nb / nn;
    pw_cstat_rec r = *a;
    r.n = a->n + b->n;
    if (b->min < a->min) {
        r.min = b->min;
        r.argmin = b->argmin;
    }
    if (b->max > a->max) {
        r.max = b->max;
        r.argmax = b->argmax;
    }
    r.sum = a->sum + b->sum;
    r.mean = mean;
    r.m2 = m2;
    *o = r;
}

/* ---- the matrix's pairs ---- */

/* The pairs' order (format/mpi.h PW_CPAIR_FIELDS): bytes, messages descending, then
 * sender, receiver, group ascending; a total order, so the top is the same whatever the
 * merge order. */
static int pair_cmp(const void *x, const void *y)
{
    const pw_cpair_rec *a = x, *b = y;
    int c;
    if ((c = cmp64(b->bytes, a->bytes)) || (c = cmp64(b->messages, a->messages)) ||
        (c = cmp64(a->sender, b->sender)) || (c = cmp64(a->receiver, b->receiver)))
        return c;
    return cmp64(a->comm_hash, b->comm_hash);
}

/* A sender's rows of one receiver and group together. */
static int pair_key_cmp(const void *x, const void *y)
{
    const pw_cpair_rec *a = x, *b = y;
    int c = cmp64(a->receiver, b->receiver);
    return c ? c : cmp64(a->comm_hash, b->comm_hash);
}

/* The top KP of a's and b's pairs (each sorted, no pair in both: a pair is its sender's)
 * into o, room for KP; their count. */
static int64_t merge_pairs(const sum *a, const sum *b, pw_cpair_rec *o)
{
    int64_t i = 0, j = 0, n = 0;
    while (n < KP && (i < a->h.npairs || j < b->h.npairs)) {
        int c = i == a->h.npairs ? 1 : j == b->h.npairs ? -1 : pair_cmp(&a->pairs[i], &b->pairs[j]);
        o[n++] = c <= 0 ? a->pairs[i++] : b->pairs[j++];
    }
    return n;
}

/* ---- merge ---- */

static int merge(const sum *a, const sum *b, sum *out)
{
    int rc = -1;
    int64_t nobj = a->h.nobjects + b->h.nobjects;
    int *amap = calloc((size_t)a->h.nobjects + 1, sizeof *amap);
    int *bmap = calloc((size_t)b->h.nobjects + 1, sizeof *bmap);
    const char **paths = calloc((size_t)nobj + 1, sizeof *paths);
    const char **ids = calloc((size_t)nobj + 1, sizeof *ids);
    if (!amap || !bmap || !paths || !ids)
        goto done;
    head h = {0};
    h.nobjects = objects_union(a, b, amap, bmap, paths, ids);
    side A = {a, amap}, B = {b, bmap};
    for (int pass = 0; pass < 2; pass++) {
        int64_t i = 0, j = 0, n = 0, nf = 0, nb = 0;
        while (i < a->h.nnodes || j < b->h.nnodes) {
            int c = i == a->h.nnodes ? 1 : j == b->h.nnodes ? -1 : node_cmp(&A, i, &B, j);
            const side *src = c <= 0 ? &A : &B;
            const pw_cnode_rec *x = &src->s->nodes[c <= 0 ? i : j];
            const pw_cstat_rec *sa = c <= 0 ? &a->stats[i * NM] : NULL;
            const pw_cstat_rec *sb = c >= 0 ? &b->stats[j * NM] : NULL;
            int64_t lo[NM], hi[NM], nbk = 0;
            for (int m = 0; m < NM; m++) { /* each metric's buckets: both sides' span */
                const pw_cstat_rec *y = sa ? &sa[m] : &sb[m];
                lo[m] = y->sketch_key0;
                hi[m] = lo[m] + y->sketch_len;
                if (sa && sb) {
                    if (sb[m].sketch_key0 < lo[m])
                        lo[m] = sb[m].sketch_key0;
                    if (sb[m].sketch_key0 + sb[m].sketch_len > hi[m])
                        hi[m] = sb[m].sketch_key0 + sb[m].sketch_len;
                }
                nbk += hi[m] - lo[m];
            }
            if (pass) {
                pw_cnode_rec *o = &out->nodes[n];
                *o = *x;
                o->object = (int32_t)obj(src, x->object);
                o->first_frame = x->nframes ? nf : -1;
                o->pad = 0;
                for (int k = 0; k < x->nframes; k++) {
                    pw_frame_rec f = src->s->frames[x->first_frame + k];
                    f.object = (int32_t)obj(src, f.object);
                    out->frames[nf + k] = f;
                }
                int64_t at = nb;
                for (int m = 0; m < NM; m++) {
                    pw_cstat_rec *o_s = &out->stats[n * NM + m];
                    if (sa && sb)
                        merge_stat(o_s, &sa[m], &sb[m]);
                    else
                        *o_s = sa ? sa[m] : sb[m];
                    o_s->sketch_first = at;
                    o_s->sketch_key0 = (int32_t)lo[m];
                    o_s->sketch_len = (int32_t)(hi[m] - lo[m]);
                    const pw_cstat_rec *parts[2] = {sa ? &sa[m] : NULL, sb ? &sb[m] : NULL};
                    const sum *from[2] = {a, b};
                    for (int p = 0; p < 2; p++)
                        for (int k = 0; parts[p] && k < parts[p]->sketch_len; k++)
                            out->counts[at + parts[p]->sketch_key0 - lo[m] + k] +=
                                from[p]->counts[parts[p]->sketch_first + k];
                    at += hi[m] - lo[m];
                }
            }
            n++;
            nf += x->nframes;
            nb += nbk;
            if (c <= 0)
                i++;
            if (c >= 0)
                j++;
        }
        if (!pass) {
            h.nnodes = n;
            h.nframes = nf;
            h.nbuckets = nb;
            h.npairs = a->h.npairs + b->h.npairs < KP ? a->h.npairs + b->h.npairs : KP;
            if (sum_alloc(out, h, paths, ids) != 0)
                goto done;
        }
    }
    for (int m = 0; m < NR; m++)
        merge_stat(&out->rank[m], &a->rank[m], &b->rank[m]);
    merge_pairs(a, b, out->pairs);
    rc = 0;
done:
    free(amap);
    free(bmap);
    free(paths);
    free(ids);
    return rc;
}

/* ---- a rank's own summary ---- */

typedef struct leaf_ctx {
    const pw_profile *p;
    const int *omap;
} leaf_ctx;

static int64_t lobj(const leaf_ctx *c, int32_t o) { return o < 0 ? -1 : c->omap[o]; }

static int site_cmp(const void *x, const void *y, void *arg)
{
    const leaf_ctx *c = arg;
    const pw_site_rec *s = &c->p->sites[*(const size_t *)x], *t = &c->p->sites[*(const size_t *)y];
    int r;
    if ((r = cmp64(s->fn, t->fn)) || (r = cmp64(lobj(c, s->object), lobj(c, t->object))) ||
        (r = cmp64(s->offset, t->offset)))
        return r;
    for (int k = 0; k < s->nframes && k < t->nframes; k++) {
        const pw_frame_rec *f = &c->p->frames[s->first_frame + k];
        const pw_frame_rec *g = &c->p->frames[t->first_frame + k];
        if ((r = cmp64(lobj(c, f->object), lobj(c, g->object))) ||
            (r = cmp64(f->offset, g->offset)))
            return r;
    }
    return cmp64(s->nframes, t->nframes);
}

static const pw_profile *obj_sort_p;
static int obj_idx_cmp(const void *x, const void *y)
{
    int i = *(const int *)x, j = *(const int *)y;
    return obj_cmp(obj_sort_p->objects[i], obj_sort_p->buildids[i], obj_sort_p->objects[j],
                   obj_sort_p->buildids[j]);
}

/* The rank's point-to-point pairs (its SEND rows to a known peer, summed per receiver and
 * group), sorted, the top KP first: malloc'ed *out (NULL without rows); their count, -1
 * without memory. */
static int64_t own_pairs(const pw_profile *p, int rank, pw_cpair_rec **out)
{
    *out = NULL;
    size_t n = 0;
    for (size_t i = 0; i < p->ncomms; i++)
        n += p->comms[i].dir == PW_COMM_SEND && p->comms[i].peer >= 0;
    if (!n)
        return 0;
    pw_cpair_rec *v = calloc(n, sizeof *v);
    if (!v)
        return -1;
    n = 0;
    for (size_t i = 0; i < p->ncomms; i++) {
        const pw_comm_rec *c = &p->comms[i];
        if (c->dir != PW_COMM_SEND || c->peer < 0)
            continue;
        pw_cpair_rec *r = &v[n++];
        r->sender = rank;
        r->receiver = c->peer;
        r->comm_size = c->comm_size;
        r->comm_first = c->comm_first;
        r->comm_hash = c->comm_hash;
        r->messages = c->messages;
        r->bytes = c->bytes_sent;
    }
    qsort(v, n, sizeof *v, pair_key_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && pair_key_cmp(&v[m - 1], &v[i]) == 0) {
            v[m - 1].messages += v[i].messages;
            v[m - 1].bytes += v[i].bytes;
        } else {
            v[m++] = v[i];
        }
    }
    qsort(v, m, sizeof *v, pair_cmp);
    *out = v;
    return (int64_t)m;
}

static int leaf(const pw_local *l, int rank, sum *s)
{
    const pw_profile *p = &l->prof;
    int rc = -1;
    pw_cpair_rec *pairs = NULL;
    int64_t npairs = own_pairs(p, rank, &pairs);
    size_t no = p->nobjects;
    int *used = calloc(no + 1, sizeof *used), *order = calloc(no + 1, sizeof *order);
    int *omap = calloc(no + 1, sizeof *omap);
    size_t *idx = calloc(p->nsites + 1, sizeof *idx);
    const char **paths = calloc(no + 1, sizeof *paths), **ids = calloc(no + 1, sizeof *ids);
    if (!used || !order || !omap || !idx || !paths || !ids || npairs < 0)
        goto done;
    /* the objects its sites and frames name, sorted */
    for (size_t i = 0; i < p->nsites; i++) {
        const pw_site_rec *t = &p->sites[i];
        if (t->object >= 0)
            used[t->object] = 1;
        for (int k = 0; k < t->nframes; k++)
            if (p->frames[t->first_frame + k].object >= 0)
                used[p->frames[t->first_frame + k].object] = 1;
    }
    int nu = 0;
    for (size_t i = 0; i < no; i++)
        if (used[i])
            order[nu++] = (int)i;
    obj_sort_p = p;
    qsort(order, (size_t)nu, sizeof *order, obj_idx_cmp);
    for (int i = 0; i < nu; i++) {
        omap[order[i]] = i;
        paths[i] = p->objects[order[i]];
        ids[i] = p->buildids[order[i]];
    }
    /* its sites by identity; a site's threads summed */
    leaf_ctx ctx = {p, omap};
    for (size_t i = 0; i < p->nsites; i++)
        idx[i] = i;
    qsort_r(idx, p->nsites, sizeof *idx, site_cmp, &ctx);
    head h = {0};
    h.nobjects = nu;
    for (size_t i = 0; i < p->nsites; i++)
        if (i == 0 || site_cmp(&idx[i - 1], &idx[i], &ctx) != 0) {
            h.nnodes++;
            h.nframes += p->sites[idx[i]].nframes;
        }
    h.nbuckets = h.nnodes * NM;
    h.npairs = npairs < KP ? npairs : KP;
    if (sum_alloc(s, h, paths, ids) != 0)
        goto done;
    if (h.npairs)
        memcpy(s->pairs, pairs, (size_t)h.npairs * sizeof *pairs);
    int64_t n = -1, nf = 0;
    int64_t v[NM] = {0};
    for (size_t i = 0; i <= p->nsites; i++) {
        if (i == p->nsites || i == 0 || site_cmp(&idx[i - 1], &idx[i], &ctx) != 0) {
            if (n >= 0) {
                for (int m = 0; m < NM; m++) {
                    pw_cstat_rec *st = &s->stats[n * NM + m];
                    leaf_stat(st, rank, v[m]);
                    st->sketch_first = n * NM + m;
                    st->sketch_len = 1;
                    st->sketch_key0 = key_of(v[m]);
                    s->counts[n * NM + m] = 1;
                }
            }
            if (i == p->nsites)
                break;
            const pw_site_rec *t = &p->sites[idx[i]];
            pw_cnode_rec *o = &s->nodes[++n];
            o->fn = t->fn;
            o->object = (int32_t)lobj(&ctx, t->object);
            o->nframes = t->nframes;
            o->offset = t->offset;
            o->first_frame = t->nframes ? nf : -1;
            for (int k = 0; k < t->nframes; k++) {
                pw_frame_rec f = p->frames[t->first_frame + k];
                f.object = (int32_t)lobj(&ctx, f.object);
                f.pad = 0;
                s->frames[nf++] = f;
            }
            memset(v, 0, sizeof v);
        }
        const pw_site_rec *t = &p->sites[idx[i]];
        v[PW_COMPACT_CALLS] += t->count;
        v[PW_COMPACT_TIME] += t->total_ns;
        v[PW_COMPACT_SENT] += t->bytes_sent;
        v[PW_COMPACT_RECV] += t->bytes_recv;
    }
    leaf_stat(&s->rank[0], rank, l->rank.app_ns);
    leaf_stat(&s->rank[1], rank, l->rank.mpi_ns);
    rc = 0;
done:
    free(used);
    free(order);
    free(omap);
    free(idx);
    free(paths);
    free(ids);
    free(pairs);
    return rc;
}

/* The rank's point-to-point totals, PW_COMPACT_RANK_COMM's order, into v[NC]. */
static void own_totals(const pw_profile *p, int64_t *v)
{
    for (size_t i = 0; i < p->ncomms; i++) {
        const pw_comm_rec *c = &p->comms[i];
        if (c->dir == PW_COMM_SEND) {
            v[PW_COMPACT_SENT_BYTES] += c->bytes_sent;
            v[PW_COMPACT_SENT_MSGS] += c->messages;
        } else if (c->dir == PW_COMM_RECV) {
            v[PW_COMPACT_RECV_BYTES] += c->bytes_recv;
            v[PW_COMPACT_RECV_MSGS] += c->messages;
        }
    }
}

/* ---- the top nodes ---- */

static const sum *top_sort_s;
static int top_cmp(const void *x, const void *y)
{
    int64_t i = *(const int64_t *)x, j = *(const int64_t *)y;
    int64_t a = top_sort_s->stats[i * NM + PW_COMPACT_TIME].sum;
    int64_t b = top_sort_s->stats[j * NM + PW_COMPACT_TIME].sum;
    return a != b ? cmp64(b, a) : cmp64(i, j);
}

/* Whether node i of a (its own objects) and node j of b are the same node. */
static int same_node(const sum *a, int64_t i, const sum *b, int64_t j)
{
    const pw_cnode_rec *x = &a->nodes[i], *y = &b->nodes[j];
    if (x->fn != y->fn || x->offset != y->offset || x->nframes != y->nframes)
        return 0;
#define SAME_OBJ(oa, ob)                                                                           \
    ((oa) < 0 || (ob) < 0 ? (oa) == (ob)                                                           \
                          : obj_cmp(a->paths[oa], a->ids[oa], b->paths[ob], b->ids[ob]) == 0)
    if (!SAME_OBJ(x->object, y->object))
        return 0;
    for (int k = 0; k < x->nframes; k++) {
        const pw_frame_rec *f = &a->frames[x->first_frame + k], *g = &b->frames[y->first_frame + k];
        if (f->offset != g->offset || !SAME_OBJ(f->object, g->object))
            return 0;
    }
#undef SAME_OBJ
    return 1;
}

/* ---- the file ---- */

typedef int (*compress2_fn)(unsigned char *, unsigned long *, const unsigned char *, unsigned long,
                            int);
typedef unsigned long (*bound_fn)(unsigned long);

#define FIELD_JSON(ctype, np, name)                                                                \
    pw_json_open(&j, NULL, '[');                                                                   \
    pw_json_str(&j, NULL, #name);                                                                  \
    pw_json_str(&j, NULL, np);                                                                     \
    pw_json_close(&j);
#define ARRAY_JSON(ctype, np, name, n)

static void array_json(pw_json *jp, const char *name, int64_t off, int64_t count, int64_t size,
                       int kind)
{
    pw_json j = *jp;
    pw_json_open(&j, name, '{');
    pw_json_int(&j, "offset", off);
    pw_json_int(&j, "count", count);
    pw_json_int(&j, "itemsize", size);
    pw_json_open(&j, "dtype", '[');
    if (kind == 0) {
        PW_CNODE_FIELDS(FIELD_JSON, ARRAY_JSON)
    } else if (kind == 1) {
        PW_FRAME_FIELDS(FIELD_JSON, ARRAY_JSON)
    } else if (kind == 2) {
        PW_CSTAT_FIELDS(FIELD_JSON, ARRAY_JSON)
    } else if (kind == 3) {
        FIELD_JSON(int64_t, "<i8", value)
    } else if (kind == 5) {
        PW_CPAIR_FIELDS(FIELD_JSON, ARRAY_JSON)
    } else {
        FIELD_JSON(int32_t, "<i4", count)
    }
    pw_json_close(&j);
    pw_json_close(&j);
    *jp = j;
}

/* n int64 at q, byte j of value i at j * n + i: the values' high bytes are alike */
static void shuffled(unsigned char *q, const int64_t *values, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        for (int b = 0; b < 8; b++)
            q[b * n + i] = (unsigned char)((uint64_t)values[i] >> (8 * b));
}

/* rcomm: the ranks' point-to-point totals, value m of rank r at m * size + r */
static int write_file(const sum *s, const int64_t *top, int k, const int64_t *values,
                      const int64_t *rcomm, int size, const char *path)
{
    int rc = -1;
    int64_t nn = s->h.nnodes, nst = nn * NM + NR, ntv = (int64_t)k * size;
    int64_t nrc = (int64_t)NC * size;
    size_t sz[7] = {(size_t)nn * sizeof(pw_cnode_rec),
                    (size_t)s->h.nframes * sizeof(pw_frame_rec),
                    (size_t)nst * sizeof(pw_cstat_rec),
                    (size_t)ntv * 8,
                    (size_t)s->h.nbuckets * 4,
                    (size_t)s->h.npairs * sizeof(pw_cpair_rec),
                    (size_t)nrc * 8};
    size_t data_bytes = 0;
    for (int a = 0; a < 7; a++)
        data_bytes += sz[a];
    unsigned char *data = calloc(1, data_bytes + 1), *stored = NULL;
    pw_buf hb = {0};
    if (!data)
        goto done;
    unsigned char *q = data;
    memcpy(q, s->nodes, sz[0]);
    q += sz[0];
    memcpy(q, s->frames, sz[1]);
    q += sz[1];
    pw_cstat_rec *st = (pw_cstat_rec *)q;
    for (int64_t i = 0; i < nn; i++)
        for (int m = 0; m < NM; m++) {
            pw_cstat_rec r = s->stats[i * NM + m];
            r.node = (int32_t)i;
            r.metric = m;
            r.pad = 0;
            memcpy(&st[i * NM + m], &r, sizeof r);
        }
    for (int m = 0; m < NR; m++) {
        pw_cstat_rec r = s->rank[m];
        r.node = -1;
        r.metric = NM + m;
        r.pad = 0;
        memcpy(&st[nn * NM + m], &r, sizeof r);
    }
    q += sz[2];
    shuffled(q, values, ntv);
    q += sz[3];
    for (int64_t i = 0; i < s->h.nbuckets; i++) {
        int32_t c = (int32_t)s->counts[i];
        memcpy(q + 4 * i, &c, 4);
    }
    q += sz[4];
    memcpy(q, s->pairs, sz[5]);
    q += sz[5];
    shuffled(q, rcomm, nrc);
    /* zlib when the process can load it (docs/format.md: the codec "none" otherwise) */
    const char *codec = "none";
    unsigned long stored_len = data_bytes;
    void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    compress2_fn c2 = z ? (compress2_fn)dlsym(z, "compress2") : NULL;
    bound_fn cb = z ? (bound_fn)dlsym(z, "compressBound") : NULL;
    if (c2 && cb) {
        unsigned long cap = cb(data_bytes);
        stored = malloc(cap ? cap : 1);
        if (stored && c2(stored, &cap, data, data_bytes, 6) == 0) {
            codec = "zlib";
            stored_len = cap;
        } else {
            free(stored);
            stored = NULL;
        }
    }
    pw_json j;
    pw_json_begin(&j, &hb);
    pw_json_str(&j, "format", PW_COMPACT_MAGIC);
    pw_json_int(&j, "version", PW_COMPACT_VERSION);
    pw_json_int(&j, "world_size", size);
    pw_json_str(&j, "codec", codec);
    pw_json_int(&j, "sub_bits", SUB);
    pw_json_open(&j, "metrics", '[');
#define METRIC_NAME(name, value, str) pw_json_str(&j, NULL, str);
    PW_COMPACT_METRICS(METRIC_NAME)
#undef METRIC_NAME
    pw_json_close(&j);
    pw_json_open(&j, "top_nodes", '[');
    for (int i = 0; i < k; i++)
        pw_json_int(&j, NULL, top[i]);
    pw_json_close(&j);
    pw_json_open(&j, "functions", '[');
    int nsets = 0;
    pw_functions *const *sets = pw_functions_list(&nsets);
    for (int i = 0; i < nsets; i++)
        for (int f = 0; f < sets[i]->n; f++)
            pw_json_str(&j, NULL, sets[i]->names[f]);
    pw_json_close(&j);
    pw_json_strs(&j, "objects", s->paths, (size_t)s->h.nobjects);
    pw_json_strs(&j, "buildids", s->ids, (size_t)s->h.nobjects);
    pw_json_open(&j, "arrays", '{');
    static const char *names[7] = {"nodes",         "frames", "stats",    "top_values",
                                   "sketch_counts", "pairs",  "rank_comm"};
    int64_t counts[7] = {nn, s->h.nframes, nst, ntv, s->h.nbuckets, s->h.npairs, nrc};
    static const int64_t itemsize[7] = {sizeof(pw_cnode_rec),
                                        sizeof(pw_frame_rec),
                                        sizeof(pw_cstat_rec),
                                        8,
                                        4,
                                        sizeof(pw_cpair_rec),
                                        8};
    static const int kinds[7] = {0, 1, 2, 3, 4, 5, 3};
    int64_t off = 0;
    for (int a = 0; a < 7; a++) {
        array_json(&j, names[a], off, counts[a], itemsize[a], kinds[a]);
        off += (int64_t)sz[a];
    }
    pw_json_close(&j);
    pw_json_int(&j, "data_bytes", (int64_t)data_bytes);
    pw_json_int(&j, "stored_bytes", (int64_t)stored_len);
    pw_json_close(&j);
    pw_file f;
    if (pw_file_framed_open(&f, path, &hb) != 0 && hb.failed)
        goto done;
    pw_file_write(&f, stored ? stored : data, stored_len);
    rc = pw_file_framed_close(&f);
done:
    pw_buf_free(&hb);
    free(data);
    free(stored);
    return rc;
}

/* ---- the tree ---- */

/* Rank 0's bytes to every rank down the same binomial tree, by the comm's send and recv
 * (whose receives give the processor away while they wait, unlike a spinning
 * MPI_Bcast): *buf malloc'ed on the others (NULL, 0 when rank 0 had none). */
static void tree_bcast(const pw_compact_comm *c, char **buf, size_t *n)
{
    int r = c->rank, top = 0;
    if (r) {
        c->recv(r & (r - 1), buf, n); /* the parent: r without its lowest bit */
        top = __builtin_ctz((unsigned)r);
    } else {
        while ((1 << top) < c->size)
            top++;
    }
    for (int j = top - 1; j >= 0; j--) /* the largest subtree first */
        if (r + (1 << j) < c->size)
            c->send(r + (1 << j), *buf, *buf ? *n : 0);
}

/* Every rank's k int64 to rank 0 up the tree, in rank order: all[r * k + i] on rank 0.
 * A rank holds those of its subtree (at most 2^j ranks' at level j). */
static void tree_gather(const pw_compact_comm *c, const int64_t *mine, int k, int64_t *all)
{
    int r = c->rank;
    size_t span = r ? (size_t)(r & -r) : (size_t)c->size, row = (size_t)k * 8;
    if (span > (size_t)(c->size - r))
        span = (size_t)(c->size - r);
    int64_t *held = r ? calloc(span, row) : all;
    if (held)
        memcpy(held, mine, row);
    for (int j = 0; (1 << j) < c->size; j++) {
        if (r & (1 << j)) {
            c->send(r - (1 << j), held, held ? span * row : 0);
            break;
        }
        int child = r + (1 << j);
        if (child >= c->size)
            continue;
        char *b = NULL;
        size_t n = 0, want = (size_t)(1 << j);
        if (want > (size_t)(c->size - child))
            want = (size_t)(c->size - child);
        c->recv(child, &b, &n);
        if (held && b && n == want * row) /* a subtree without memory: its zeros stay */
            memcpy((char *)held + (size_t)(1 << j) * row, b, n);
        free(b);
    }
    if (r)
        free(held);
}

int pw_compact_reduce(const pw_local *l, const pw_compact_comm *c, const char *path)
{
    sum own = {0}, mine = {0};
    /* a rank without memory for its summary sends none: the others do not wait for it */
    int ok = l && leaf(l, c->rank, &mine) == 0;
    for (int j = 0; (1 << j) < c->size; j++) {
        if (c->rank & (1 << j)) {
            c->send(c->rank - (1 << j), ok ? mine.mem : NULL, ok ? mine.bytes : 0);
            if (ok)
                sum_free(&mine);
            ok = 0;
            break;
        }
        int child = c->rank + (1 << j);
        if (child >= c->size)
            continue;
        char *buf = NULL;
        size_t n = 0;
        c->recv(child, &buf, &n);
        sum theirs, merged;
        if (view(&theirs, buf, n) != 0) {
            free(buf);
            free(theirs.paths);
            free(theirs.ids);
            continue; /* the child's subtree had no memory: lost, as a rank without data */
        }
        if (!ok) {
            mine = theirs;
            ok = 1;
        } else if (merge(&mine, &theirs, &merged) == 0) {
            sum_free(&mine);
            sum_free(&theirs);
            mine = merged;
        } else {
            sum_free(&theirs);
        }
    }
    /* the top nodes, picked by rank 0, and each rank's time at them */
    char *tb = NULL;
    size_t tn = 0;
    int64_t *top = NULL;
    if (c->rank == 0 && ok) {
        int64_t nn = mine.h.nnodes, k = nn < PW_COMPACT_TOP_NODES ? nn : PW_COMPACT_TOP_NODES;
        top = calloc((size_t)nn + 1, sizeof *top);
        if (top) {
            for (int64_t i = 0; i < nn; i++)
                top[i] = i;
            top_sort_s = &mine;
            qsort(top, (size_t)nn, sizeof *top, top_cmp);
            /* the top nodes as a summary of their own: identities only */
            head h = {0};
            h.nobjects = mine.h.nobjects;
            h.nnodes = k;
            for (int64_t i = 0; i < k; i++)
                h.nframes += mine.nodes[top[i]].nframes;
            sum t;
            if (sum_alloc(&t, h, mine.paths, mine.ids) == 0) {
                int64_t nf = 0;
                for (int64_t i = 0; i < k; i++) {
                    pw_cnode_rec x = mine.nodes[top[i]];
                    memcpy(&t.frames[nf], &mine.frames[x.first_frame],
                           (size_t)x.nframes * sizeof(pw_frame_rec));
                    x.first_frame = nf;
                    t.nodes[i] = x;
                    nf += x.nframes;
                }
                tb = t.mem;
                tn = t.bytes;
                free(t.paths);
                free(t.ids);
            }
        }
    }
    tree_bcast(c, &tb, &tn);
    sum t = {0};
    int k = 0;
    int64_t vals[PW_COMPACT_TOP_NODES + NC] = {0};
    head th;
    if (tn >= sizeof th) { /* the count alone decides the gather, on every rank alike */
        memcpy(&th, tb, sizeof th);
        k = th.nnodes > 0 && th.nnodes <= PW_COMPACT_TOP_NODES ? (int)th.nnodes : 0;
    }
    /* this rank's own summary again (the tree's is sent or merged): its times there */
    if (k && l && leaf(l, c->rank, &own) != 0)
        memset(&own, 0, sizeof own);
    if (k && view(&t, tb, tn) == 0) {
        for (int i = 0; i < k && own.mem; i++)
            for (int64_t n = 0; n < own.h.nnodes; n++)
                if (same_node(&t, i, &own, n)) {
                    vals[i] = own.stats[n * NM + PW_COMPACT_TIME].sum;
                    break;
                }
    }
    free(t.paths);
    free(t.ids);
    /* with the rank's point-to-point totals after them, gathered alike */
    if (l)
        own_totals(&l->prof, vals + k);
    int w = k + NC;
    int64_t *all = c->rank == 0 ? calloc((size_t)c->size * (size_t)w, 8) : NULL;
    tree_gather(c, vals, w, all);
    int rc = 0;
    if (c->rank == 0) {
        rc = -1;
        int64_t *byrank = calloc((size_t)c->size * (size_t)w, 8);
        if (ok && top && all && byrank) {
            for (int i = 0; i < w; i++)
                for (int r = 0; r < c->size; r++)
                    byrank[(size_t)i * (size_t)c->size + (size_t)r] = all[(size_t)r * w + i];
            rc = write_file(&mine, top, k, byrank, byrank + (size_t)k * (size_t)c->size, c->size,
                            path);
        } else {
            pw_log("out of memory while reducing the compact profile");
        }
        free(byrank);
    }
    free(all);
    free(tb);
    free(top);
    if (ok)
        sum_free(&mine);
    sum_free(&own);
    return rc;
}
