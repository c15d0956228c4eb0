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
 * (the node's own earliest time). */
#include <stdint.h>
#include <stdlib.h>

#define PW_EXPORT __attribute__((visibility("default")))
#define PW_NONE INT64_MIN

PW_EXPORT int pw_replay_version(void) { return 1; }

/* n nodes, m edges src[e] -> dst[e] of weight w[e]; chain[v]: weight of the edge
 * v - 1 -> v, PW_NONE where v starts a chain; init[v]: v's earliest time, PW_NONE for
 * none. Fills time[v] (PW_NONE: no time, or not ordered), pred[v] (the node its time
 * comes from, -1 none, -2 not ordered) and pred_edge[v] (the edge, -1 for the chain's or
 * none). Returns how many nodes could not be ordered (0 for a DAG), -1 if out of
 * memory. */
PW_EXPORT int64_t pw_longest_path(int64_t n, int64_t m, const int64_t *src, const int64_t *dst,
                                  const int64_t *w, const int64_t *chain, const int64_t *init,
                                  int64_t *time, int64_t *pred, int64_t *pred_edge)
{
    int64_t *indeg = calloc((size_t)n + 1, sizeof *indeg);
    int64_t *first = calloc((size_t)n + 2, sizeof *first);
    int64_t *out = malloc(((size_t)m + 1) * sizeof *out);
    int64_t *queue = malloc(((size_t)n + 1) * sizeof *queue);
    if (!indeg || !first || !out || !queue) {
        free(indeg);
        free(first);
        free(out);
        free(queue);
        return -1;
    }
    /* the edges by source (a counting sort), and each node's in-degree */
    for (int64_t e = 0; e < m; e++) {
        first[src[e] + 2]++;
        indeg[dst[e]]++;
    }
    for (int64_t v = 0; v < n; v++) {
        first[v + 2] += first[v + 1];
        if (v > 0 && chain[v] != PW_NONE)
            indeg[v]++;
        time[v] = init[v];
    }
    for (int64_t e = 0; e < m; e++)
        out[first[src[e] + 1]++] = e;
    /* first[v] .. first[v + 1]: the edges out of v */
    int64_t head = 0, tail = 0;
    for (int64_t v = 0; v < n; v++)
        if (indeg[v] == 0)
            queue[tail++] = v;
    /* a node taken from the queue is followed along its chain as far as the chain's
     * nodes are ready: the chains' nodes are adjacent in memory */
    int64_t *order = malloc(((size_t)n + 1) * sizeof *order);
    int64_t done = 0;
    if (!order) {
        free(indeg);
        free(first);
        free(out);
        free(queue);
        return -1;
    }
    while (head < tail) {
        int64_t u = queue[head++];
        for (;;) {
            int64_t tu = time[u];
            order[done++] = u;
            for (int64_t k = first[u]; k < first[u + 1]; k++) {
                int64_t e = out[k], v = dst[e];
                if (tu != PW_NONE && tu + w[e] > time[v])
                    time[v] = tu + w[e];
                if (--indeg[v] == 0)
                    queue[tail++] = v;
            }
            if (u + 1 >= n || chain[u + 1] == PW_NONE)
                break;
            if (tu != PW_NONE && tu + chain[u + 1] > time[u + 1])
                time[u + 1] = tu + chain[u + 1];
            if (--indeg[u + 1] != 0)
                break;
            u++;
        }
    }
    int64_t left = n - done;
    /* indeg is reused as "ordered" */
    for (int64_t v = 0; v < n; v++)
        indeg[v] = 0;
    for (int64_t k = 0; k < done; k++)
        indeg[order[k]] = 1;
    free(order);
    for (int64_t v = 0; v < n; v++) {
        pred_edge[v] = -1;
        if (!indeg[v]) {
            time[v] = PW_NONE;
            pred[v] = -2;
            continue;
        }
        pred[v] = -1;
        if (v > 0 && chain[v] != PW_NONE && time[v] != PW_NONE && time[v - 1] != PW_NONE &&
            time[v - 1] + chain[v] == time[v])
            pred[v] = v - 1;
    }
    for (int64_t e = 0; e < m; e++) {
        int64_t u = src[e], v = dst[e];
        if (pred[v] == -1 && time[v] != PW_NONE && time[u] != PW_NONE &&
            time[u] + w[e] == time[v]) {
            pred[v] = u;
            pred_edge[v] = e;
        }
    }
    free(indeg);
    free(first);
    free(out);
    free(queue);
    return left;
}
