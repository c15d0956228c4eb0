"""The compact profile (docs/format.md "Compact profile"): per call-tree node and metric
the statistics over the ranks that called it and a log-bucket sketch of its values per
rank, and the per-rank times of the top nodes only; and the merge that reduces the
ranks' summaries up the runtime's binomial tree (runtime/modules/mpi_compact.c does the
same operations in the same order, so both write the same bytes).

Every part merges exactly: counts, sums, min and max (the lowest rank wins a tie, so
argmin and argmax do not depend on the merge order), sketch counts added; the mean and
the sum of squared deviations (m2) by Chan, Golub and LeVeque's parallel formula, exact
up to floating-point rounding.
"""

from dataclasses import dataclass, field

import numpy as np

from perfweave._format import (
    COMPACT_METRICS,
    COMPACT_NODE_METRICS,
    COMPACT_RANK_COMM,
    COMPACT_SUB_BITS,
    COMPACT_TOP_NODES,
    COMPACT_TOP_PAIRS,
    COMM_DIRS,
    RECORDS,
)

METRICS = COMPACT_METRICS
NODE_METRICS = METRICS[:COMPACT_NODE_METRICS]  # calls, time_ns, bytes_sent, bytes_recv
RANK_METRICS = METRICS[COMPACT_NODE_METRICS:]  # app_ns, mpi_ns
TIME = METRICS.index("time_ns")
SUB_BITS = COMPACT_SUB_BITS
TOP_NODES = COMPACT_TOP_NODES
# a sketch quantile's largest error relative to the true value (the bucket's half width)
RELATIVE_ERROR = 2.0 ** -(SUB_BITS + 1)
KEY_SPACE = 64 << SUB_BITS  # every key of a non-negative int64 is below it

CNODE = RECORDS["cnode"]
CSTAT = RECORDS["cstat"]
FRAME = RECORDS["frame"]
CPAIR = RECORDS["cpair"]
RANK_COMM = COMPACT_RANK_COMM  # sent_bytes, sent_messages, recv_bytes, recv_messages
TOP_PAIRS = COMPACT_TOP_PAIRS


# ---- the sketch ----


def sketch_keys(x):
    """The sketch bucket of each value (non-negative integers): x below 2^SUB_BITS, else
    the exponent's and the SUB_BITS next bits' bucket (format/mpi.h)."""
    x = np.asarray(x, np.int64)
    e = np.frexp(x.astype(np.float64))[1].astype(np.int64) - 1  # floor(log2 x), x >= 1
    # the float's rounding can move a value above 2^53 to the next power of two
    e = np.where((e > 0) & ((x >> np.maximum(e, 0)) == 0), e - 1, e)
    sh = np.maximum(e - SUB_BITS, 0)
    big = ((e - SUB_BITS + 1) << SUB_BITS) | ((x >> sh) & ((1 << SUB_BITS) - 1))
    return np.where(x < (1 << SUB_BITS), x, big).astype(np.int32)


def key_bounds(k):
    """The smallest value of bucket k and its width (values lo .. lo + width - 1)."""
    k = np.asarray(k, np.int64)
    small = k < (1 << SUB_BITS)
    e = np.where(small, SUB_BITS, (k >> SUB_BITS) + SUB_BITS - 1)
    width = np.where(small, 1, np.int64(1) << (e - SUB_BITS))
    lo = np.where(small, k, ((1 << SUB_BITS) + (k & ((1 << SUB_BITS) - 1))) * width)
    return lo, width


def key_value(k):
    """The value a bucket stands for: the middle of its values, within RELATIVE_ERROR of
    each."""
    lo, width = key_bounds(k)
    return lo + (width - 1) / 2.0


def sketch_quantile(key0, counts, q):
    """The q-quantile of one node's sketch (its first bucket key0, its counts): the value of
    the bucket holding the element of rank floor(q (n - 1)) (numpy's method "lower")."""
    counts = np.asarray(counts, np.int64)
    n = int(counts.sum())
    if n == 0:
        return float("nan")
    target = int(np.floor(q * (n - 1)))
    i = int(np.searchsorted(np.cumsum(counts), target, side="right"))
    return float(key_value(key0 + i))


# ---- summaries and their merge ----


@dataclass
class Summary:
    """The summary of a set of ranks: its nodes (ids into the node table, increasing), per
    (node, node metric) the statistics, per rank metric the same over the ranks, and the
    sketches of the node metrics as sorted codes (node * len(NODE_METRICS) + metric) *
    KEY_SPACE + key with counts."""

    nodes: np.ndarray  # int64
    n: np.ndarray  # int32 per node: ranks that called it
    argmin: np.ndarray  # int32 [node, metric]
    argmax: np.ndarray
    min: np.ndarray  # int64 [node, metric]
    max: np.ndarray
    sum: np.ndarray
    mean: np.ndarray  # float64 [node, metric]
    m2: np.ndarray
    ranks: dict  # rank metrics: name -> dict of n, argmin, argmax, min, max, sum, mean, m2
    codes: np.ndarray  # int64 sketch bucket codes, increasing
    counts: np.ndarray  # int64

    @classmethod
    def leaf(cls, rank, nodes, values, rank_values):
        """One rank's summary: nodes (increasing ids), values [node, node metric] (int64),
        rank_values {app_ns: v, mpi_ns: v}."""
        nodes = np.asarray(nodes, np.int64)
        v = np.asarray(values, np.int64).reshape(len(nodes), len(NODE_METRICS))
        r = np.full(v.shape, rank, np.int32)
        slots = nodes[:, None] * len(NODE_METRICS) + np.arange(len(NODE_METRICS))
        codes = (slots * KEY_SPACE + sketch_keys(v.reshape(-1)).reshape(v.shape)).reshape(-1)
        return cls(
            nodes=nodes,
            n=np.ones(len(nodes), np.int32),
            argmin=r,
            argmax=r.copy(),
            min=v,
            max=v.copy(),
            sum=v.copy(),
            mean=v.astype(np.float64),
            m2=np.zeros(v.shape),
            ranks={
                k: dict(
                    n=1,
                    argmin=rank,
                    argmax=rank,
                    min=int(x),
                    max=int(x),
                    sum=int(x),
                    mean=float(x),
                    m2=0.0,
                )
                for k, x in ((k, rank_values[k]) for k in RANK_METRICS)
            },
            codes=codes,
            counts=np.ones(len(codes), np.int64),
        )

    def nbytes(self):
        """Bytes of this summary as mpi_compact.c sends it up the tree: its head and rank
        statistics, a node record and NODE_METRICS statistics per node, and 8 bytes per
        sketch count, dense from each (node, metric)'s first bucket to its last; the caller
        frames and the objects' strings are not counted."""
        slot = self.codes // KEY_SPACE
        key = self.codes % KEY_SPACE
        ends = np.flatnonzero(np.diff(slot, append=-1))  # each slot's last bucket
        starts = np.concatenate([[0], ends[:-1] + 1]) if len(ends) else ends
        dense = int((key[ends] - key[starts] + 1).sum()) if len(ends) else 0
        per_node = CNODE.itemsize + len(NODE_METRICS) * CSTAT.itemsize
        return 48 + len(RANK_METRICS) * CSTAT.itemsize + len(self.nodes) * per_node + 8 * dense


def chan(na, ma, m2a, nb, mb, m2b):
    """Chan et al.'s merge of (count, mean, m2) of two sets, in the operations' order the
    runtime uses (mpi_compact.c chan)."""
    nn = na + nb
    d = mb - ma
    mean = ma + d * nb / nn
    m2 = m2a + m2b + d * d * na * nb / nn
    return mean, m2


def _merge_stat(a, b):
    """Rank-metric statistics of a (the lower ranks) and b merged."""
    mean, m2 = chan(float(a["n"]), a["mean"], a["m2"], float(b["n"]), b["mean"], b["m2"])
    lo = b["min"] < a["min"]
    hi = b["max"] > a["max"]
    return dict(
        n=a["n"] + b["n"],
        argmin=b["argmin"] if lo else a["argmin"],
        argmax=b["argmax"] if hi else a["argmax"],
        min=b["min"] if lo else a["min"],
        max=b["max"] if hi else a["max"],
        sum=a["sum"] + b["sum"],
        mean=mean,
        m2=m2,
    )


def merge(a, b):
    """The summary of a's ranks and b's, every rank of b above every rank of a (the tree's
    order: a tie in min or max goes to a, the lower rank)."""
    nodes = np.union1d(a.nodes, b.nodes)
    ia = np.searchsorted(nodes, a.nodes)
    ib = np.searchsorted(nodes, b.nodes)
    in_a = np.zeros(len(nodes), bool)
    in_a[ia] = True
    both_b = in_a[ib]  # b's nodes that a has too
    ib_both, ib_only = ib[both_b], ib[~both_b]
    out = {}
    for name in ("n", "argmin", "argmax", "min", "max", "sum", "mean", "m2"):
        src_a = getattr(a, name)
        arr = np.zeros((len(nodes),) + src_a.shape[1:], src_a.dtype)
        arr[ia] = src_a
        arr[ib_only] = getattr(b, name)[~both_b]
        out[name] = arr
    # nodes of both: b's rows where a has them
    bb = {name: getattr(b, name)[both_b] for name in out}
    na = out["n"][ib_both].astype(np.float64)[:, None]
    nb = bb["n"].astype(np.float64)[:, None]
    mean, m2 = chan(na, out["mean"][ib_both], out["m2"][ib_both], nb, bb["mean"], bb["m2"])
    lo = bb["min"] < out["min"][ib_both]
    hi = bb["max"] > out["max"][ib_both]
    out["argmin"][ib_both] = np.where(lo, bb["argmin"], out["argmin"][ib_both])
    out["argmax"][ib_both] = np.where(hi, bb["argmax"], out["argmax"][ib_both])
    out["min"][ib_both] = np.where(lo, bb["min"], out["min"][ib_both])
    out["max"][ib_both] = np.where(hi, bb["max"], out["max"][ib_both])
    out["sum"][ib_both] += bb["sum"]
    out["n"][ib_both] += bb["n"]
    out["mean"][ib_both] = mean
    out["m2"][ib_both] = m2
    codes, inv = np.unique(np.concatenate([a.codes, b.codes]), return_inverse=True)
    counts = np.bincount(inv, np.concatenate([a.counts, b.counts]).astype(np.float64))
    return Summary(
        nodes=nodes,
        ranks={k: _merge_stat(a.ranks[k], b.ranks[k]) for k in RANK_METRICS},
        codes=codes,
        counts=counts.astype(np.int64),
        **out,
    )


@dataclass
class TreeCost:
    """What the binomial tree cost: its rounds, the most bytes a rank held at once (its
    summary, one child's and their merge), the bytes sent up in all."""

    rounds: int = 0
    peak_bytes: int = 0
    peak_rank: int = 0
    moved_bytes: int = 0
    merges: int = 0


def tree_reduce(leaf, size, cost=None):
    """The summary of ranks 0 .. size-1 as the runtime's binomial tree makes it: in round j
    every rank r that is a multiple of 2^(j+1) merges the summary of r + 2^j (covering
    r + 2^j .. r + 2^(j+1) - 1) into its own, so rank 0 holds all after ceil(log2 size)
    rounds. leaf(r): rank r's Summary. cost: a TreeCost to fill."""

    def subtree(r, rounds):
        s = leaf(r)
        for j in range(rounds):
            child = r + (1 << j)
            if child >= size:
                break
            c = subtree(child, j)
            m = merge(s, c)
            if cost is not None:
                held = s.nbytes() + c.nbytes() + m.nbytes()
                if held > cost.peak_bytes:
                    cost.peak_bytes, cost.peak_rank = held, r
                cost.moved_bytes += c.nbytes()
                cost.merges += 1
            s = m
        return s

    rounds = max(0, int(size - 1).bit_length())
    if cost is not None:
        cost.rounds = rounds
    return subtree(0, rounds)


def top_nodes(summary, k=TOP_NODES):
    """Indices into summary.nodes of the k nodes of largest total time (ties: the lower
    node), in that order."""
    total = summary.sum[:, TIME]
    order = np.lexsort((np.arange(len(total)), -total))
    return order[:k]


# ---- the profile a compact file holds ----


@dataclass
class CompactProfile:
    """A compact profile as its file holds it (readers/compact.py reads and writes it)."""

    world_size: int
    functions: list
    objects: list
    buildids: list
    nodes: np.ndarray  # CNODE records
    frames: np.ndarray  # FRAME records
    stats: np.ndarray  # CSTAT records: node-major, rank metrics (node -1) last
    sketch_counts: np.ndarray  # int32
    top_nodes: np.ndarray  # node indices, by total time
    top_values: np.ndarray  # int64 [top node, rank]: the node's time on the rank, 0 if none
    header: dict = field(default_factory=dict)
    # the communication matrix's summary (version 3; None before): the top pairs by bytes
    # (CPAIR records, in their order) and int64 [RANK_COMM, rank] point-to-point totals
    pairs: np.ndarray = None
    rank_comm: np.ndarray = None

    def node_stats(self, metric):
        """The statistics of a node metric, one row per node (nodes order)."""
        m = METRICS.index(metric)
        return self.stats[(self.stats["node"] >= 0) & (self.stats["metric"] == m)]

    def rank_stats(self, metric):
        """The statistics of a rank metric (app_ns, mpi_ns): one row."""
        m = METRICS.index(metric)
        return self.stats[(self.stats["node"] == -1) & (self.stats["metric"] == m)][0]

    def sketch(self, node, metric="time_ns"):
        """The sketch of the node's metric: its first bucket key and the counts (no counts
        where the file has none: a version-1 file kept the time's only)."""
        rec = self.stats[int(node) * len(NODE_METRICS) + METRICS.index(metric)]
        first = int(rec["sketch_first"])
        return int(rec["sketch_key0"]), self.sketch_counts[first : first + rec["sketch_len"]]

    def quantile(self, node, q, metric="time_ns"):
        """The q-quantile of the node's metric per rank over the ranks that called it,
        within RELATIVE_ERROR of the true one (numpy's method "lower"); NaN without its
        sketch."""
        return sketch_quantile(*self.sketch(node, metric), q)


def profile_from_summary(
    summary, table, frames, functions, objects, buildids, world_size, top_values_of
):
    """The CompactProfile of a reduced summary. table: the node table (CNODE records whose
    fn, object, nframes, offset, first_frame are set; the summary's node ids index it),
    frames: its frames; top_values_of(ids): [len(ids), world_size] int64, each rank's time
    at those node ids (the runtime's gather after the tree)."""
    used = summary.nodes
    nodes = table[used].copy()
    # frames renumbered to the nodes kept, in node order
    keep = [np.arange(f, f + n) for f, n in zip(nodes["first_frame"], nodes["nframes"]) if n > 0]
    fidx = np.concatenate(keep) if keep else np.zeros(0, np.int64)
    starts = np.concatenate([[0], np.cumsum(nodes["nframes"])[:-1]]) if len(nodes) else []
    nodes["first_frame"] = np.where(nodes["nframes"] > 0, starts, -1)
    nn, nm = len(used), len(NODE_METRICS)
    # sketches: each (node, metric)'s buckets from its first to its last, dense, in the
    # stats' order; every slot has one bucket at least
    sk_slot = summary.codes // KEY_SPACE
    sk_key = summary.codes % KEY_SPACE
    pos = np.searchsorted(used, sk_slot // nm) * nm + sk_slot % nm
    ids = np.arange(nn * nm)
    first_key = sk_key[np.searchsorted(pos, ids, "left")]
    last_key = sk_key[np.searchsorted(pos, ids, "right") - 1]
    lens = last_key - first_key + 1
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    counts = np.zeros(int(lens.sum()), np.int32)
    counts[offsets[pos] + sk_key - first_key[pos]] = summary.counts
    nodes["pad"] = 0
    stats = np.zeros(nn * nm + len(RANK_METRICS), CSTAT)
    body = stats[: nn * nm]
    body["node"] = np.repeat(np.arange(nn), nm)
    body["metric"] = np.tile(np.arange(nm), nn)
    body["n"] = np.repeat(summary.n, nm)
    for name in ("argmin", "argmax", "min", "max", "sum", "mean", "m2"):
        body[name] = getattr(summary, name).reshape(-1)
    body["sketch_first"] = offsets
    body["sketch_len"] = lens
    body["sketch_key0"] = first_key
    for i, k in enumerate(RANK_METRICS):
        row = stats[nn * nm + i]
        row["node"], row["metric"] = -1, METRICS.index(k)
        for name, v in summary.ranks[k].items():
            row[name] = v
    top = top_nodes(summary)
    return CompactProfile(
        world_size=world_size,
        functions=list(functions),
        objects=list(objects),
        buildids=list(buildids),
        nodes=nodes,
        frames=frames[fidx] if len(fidx) else np.zeros(0, FRAME),
        stats=stats,
        sketch_counts=counts,
        top_nodes=top.astype(np.int64),
        top_values=np.asarray(top_values_of(used[top]), np.int64).reshape(len(top), world_size),
    )


# ---- the communication matrix's summary ----


def matrix_summary(comms, world_size, k=TOP_PAIRS):
    """The compact profile's summary of a profile's "comms" rows (format/mpi.h
    PW_CPAIR_FIELDS, PW_COMPACT_RANK_COMM): the top k point-to-point pairs (the senders'
    SEND rows to a known peer summed per sender, receiver and group) in their order, and
    each rank's sent and received bytes and messages over all its SEND and RECV rows."""
    send, recv = COMM_DIRS.index("send"), COMM_DIRS.index("recv")
    rank_comm = np.zeros((len(RANK_COMM), world_size), np.int64)
    for m, (d, col) in enumerate(
        ((send, "bytes_sent"), (send, "messages"), (recv, "bytes_recv"), (recv, "messages"))
    ):
        rows = comms[(comms["dir"] == d) & (comms["rank"] >= 0) & (comms["rank"] < world_size)]
        np.add.at(rank_comm[m], rows["rank"], rows[col])
    rows = comms[(comms["dir"] == send) & (comms["peer"] >= 0)]
    keys = np.stack([rows["rank"].astype(np.int64), rows["peer"], rows["comm_hash"]])
    uniq, first, inv = np.unique(keys, axis=1, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    pairs = np.zeros(uniq.shape[1], CPAIR)
    pairs["sender"], pairs["receiver"], pairs["comm_hash"] = uniq
    pairs["comm_size"] = rows["comm_size"][first]
    pairs["comm_first"] = rows["comm_first"][first]
    np.add.at(pairs["messages"], inv, rows["messages"])
    np.add.at(pairs["bytes"], inv, rows["bytes_sent"])
    order = np.lexsort(
        (pairs["comm_hash"], pairs["receiver"], pairs["sender"], -pairs["messages"],
         -pairs["bytes"])
    )  # fmt: skip
    return pairs[order[:k]], rank_comm
