/* Longest paths in a directed acyclic graph: the ideal-network replay and the critical
 * paths of perfweave's analysis (python/perfweave/analysis/longest_path.py).
 *
 * A node's time is the latest of its own earliest time and of each predecessor's time
 * plus the edge's weight (max-plus). Nodes come in chains (a location's calls: node v
 * follows node v - 1 unless chain[v] is PW_NONE) and are linked by other edges (messages,
 * collective operations). Kahn's algorithm orders the nodes in O(nodes + edges); nodes it
 * cannot order lie on a cycle or behind one (a program that would deadlock).
 *
 * The predecessor each node's time comes from is chosen in a second pass by a rule the
 * numpy fallback applies alike, so that both give the same critical path: the chain's
 * predecessor if it gives the time, else the edge of lowest index that does, else none
 * (the node's own earliest time).
 *
 * The work arrays hold 32-bit indices where the graph allows (half the memory to touch),
 * else 64-bit ones: one body, instantiated for both. */
#include <stdint.h>
#include <stdlib.h>

#define PW_EXPORT __attribute__((visibility("default")))
#define PW_NONE INT64_MIN

PW_EXPORT int pw_replay_version(void) { return 2; }

/* The kernel with index type IDX (see pw_longest_path). Ordered nodes get in-degree -1. */
#define PW_LONGEST_PATH(NAME, IDX)                                                                 \
    static int64_t NAME(int64_t n, int64_t m, const int64_t *src, const int64_t *dst,              \
                        const int64_t *w, const int64_t *chain, int64_t *time, int64_t *pred,      \
                        int64_t *pred_edge)                                                        \
    {                                                                                              \
        size_t bn = ((size_t)n + 2) * sizeof(IDX), bm = ((size_t)m + 1) * sizeof(IDX);             \
        IDX *indeg = calloc(1, bn), *first = calloc(1, bn);                                        \
        IDX *out = calloc(1, bm), *queue = calloc(1, bn);                                          \
        int64_t done = -1;                                                                         \
        if (!indeg || !first || !out || !queue)                                                    \
            goto end;                                                                              \
        /* the edges by source (a counting sort), and each node's in-degree */                     \
        for (int64_t e = 0; e < m; e++) {                                                          \
            first[src[e] + 2]++;                                                                   \
            indeg[dst[e]]++;                                                                       \
        }                                                                                          \
        for (int64_t v = 0; v < n; v++) {                                                          \
            first[v + 2] += first[v + 1];                                                          \
            if (v > 0 && chain[v] != PW_NONE)                                                      \
                indeg[v]++;                                                                        \
        }                                                                                          \
        for (int64_t e = 0; e < m; e++)                                                            \
            out[first[src[e] + 1]++] = (IDX)e;                                                     \
        /* first[v] .. first[v + 1]: the edges out of v */                                         \
        int64_t head = 0, tail = 0;                                                                \
        for (int64_t v = 0; v < n; v++)                                                            \
            if (indeg[v] == 0)                                                                     \
                queue[tail++] = (IDX)v;                                                            \
        /* a node taken from the queue is followed along its chain as far as the chain's   \
         * nodes are ready: a chain's nodes are adjacent in memory */       \
        done = 0;                                                                                  \
        while (head < tail) {                                                                      \
            int64_t u = queue[head++];                                                             \
            for (;;) {                                                                             \
                int64_t tu = time[u];                                                              \
                indeg[u] = -1;                                                                     \
                done++;                                                                            \
                for (int64_t k = first[u]; k < first[u + 1]; k++) {                                \
                    int64_t e = out[k], v = dst[e];                                                \
                    if (tu != PW_NONE && tu + w[e] > time[v])                                      \
                        time[v] = tu + w[e];                                                       \
                    if (--indeg[v] == 0)                                                           \
                        queue[tail++] = (IDX)v;                                                    \
                }                                                                                  \
                if (u + 1 >= n || chain[u + 1] == PW_NONE)                                         \
                    break;                                                                         \
                if (tu != PW_NONE && tu + chain[u + 1] > time[u + 1])                              \
                    time[u + 1] = tu + chain[u + 1];                                               \
                if (--indeg[u + 1] != 0)                                                           \
                    break;                                                                         \
                u++;                                                                               \
            }                                                                                      \
        }                                                                                          \
        for (int64_t v = 0; v < n; v++) {                                                          \
            pred_edge[v] = -1;                                                                     \
            if (indeg[v] != -1) {                                                                  \
                time[v] = PW_NONE;                                                                 \
                pred[v] = -2;                                                                      \
                continue;                                                                          \
            }                                                                                      \
            pred[v] = -1;                                                                          \
            if (v > 0 && chain[v] != PW_NONE && time[v] != PW_NONE && time[v - 1] != PW_NONE &&    \
                time[v - 1] + chain[v] == time[v])                                                 \
                pred[v] = v - 1;                                                                   \
        }                                                                                          \
        for (int64_t e = 0; e < m; e++) {                                                          \
            int64_t u = src[e], v = dst[e];                                                        \
            if (pred[v] == -1 && time[v] != PW_NONE && time[u] != PW_NONE &&                       \
                time[u] + w[e] == time[v]) {                                                       \
                pred[v] = u;                                                                       \
                pred_edge[v] = e;                                                                  \
            }                                                                                      \
        }                                                                                          \
    end:                                                                                           \
        free(indeg);                                                                               \
        free(first);                                                                               \
        free(out);                                                                                 \
        free(queue);                                                                               \
        return done < 0 ? -1 : n - done;                                                           \
    }

PW_LONGEST_PATH(longest_path32, int32_t)
PW_LONGEST_PATH(longest_path64, int64_t)

/* n nodes, m edges src[e] -> dst[e] of weight w[e]; chain[v]: weight of the edge
 * v - 1 -> v, PW_NONE where v starts a chain; time[v]: on entry v's earliest time
 * (PW_NONE: none), on return its time (PW_NONE: none, or not ordered). Fills pred[v] (the
 * node its time comes from, -1 none, -2 not ordered) and pred_edge[v] (the edge, -1 for
 * the chain's or none). Returns how many nodes could not be ordered (0 for a DAG), -1 if
 * out of memory. */
PW_EXPORT int64_t pw_longest_path(int64_t n, int64_t m, const int64_t *src, const int64_t *dst,
                                  const int64_t *w, const int64_t *chain, int64_t *time,
                                  int64_t *pred, int64_t *pred_edge)
{
    if (n + 2 < INT32_MAX && m + 1 < INT32_MAX)
        return longest_path32(n, m, src, dst, w, chain, time, pred, pred_edge);
    return longest_path64(n, m, src, dst, w, chain, time, pred, pred_edge);
}

/* The backward pass of the delay analysis (python/perfweave/analysis/rootcause.py): the
 * costs each wait state has propagated to it. Wait state s was caused partly by the
 * wait states inner[lo[s] .. hi[s]) (the causer's, in its synchronisation interval);
 * once every wait state that s lies inside has been handled (Kahn's order), s passes
 * (scale[s] + rcost[s] / sum[s]) * omega[i] on to each such i. Only active wait states
 * are visited; done[s] is set for those visited (not on a cycle, nor behind one). The
 * sums do not depend on the order but for rounding. Returns how many were visited, -1
 * if out of memory. */
PW_EXPORT int64_t pw_propagate_costs(int64_t n, const int64_t *lo, const int64_t *hi,
                                     const int64_t *inner, const double *omega, const double *scale,
                                     const double *sum, const uint8_t *active, double *rcost,
                                     uint8_t *done)
{
    int64_t *indeg = calloc((size_t)n + 1, sizeof *indeg);
    int64_t *queue = malloc(((size_t)n + 1) * sizeof *queue);
    int64_t head = -1, tail = 0;
    if (!indeg || !queue)
        goto end;
    for (int64_t s = 0; s < n; s++)
        if (active[s])
            for (int64_t k = lo[s]; k < hi[s]; k++)
                indeg[inner[k]]++;
    for (int64_t s = 0; s < n; s++) {
        rcost[s] = 0.0;
        done[s] = 0;
        if (active[s] && indeg[s] == 0)
            queue[tail++] = s;
    }
    for (head = 0; head < tail; head++) {
        int64_t s = queue[head];
        double f = sum[s] > 0 ? scale[s] + rcost[s] / sum[s] : 0.0;
        done[s] = 1;
        for (int64_t k = lo[s]; k < hi[s]; k++) {
            int64_t i = inner[k];
            rcost[i] += f * omega[i];
            if (--indeg[i] == 0 && active[i])
                queue[tail++] = i;
        }
    }
end:
    free(indeg);
    free(queue);
    return head;
}
