"""Longest paths in a graph of chains (max-plus): the ideal-network replay
(analysis/replay.py) and the critical paths walk the event graph so.

Nodes come in chains: node v follows node v - 1 with weight chain[v], unless chain[v] is
NONE (v starts a chain: a location's first node, a collective's hub). Other edges
src[e] -> dst[e] have weights w[e]. init[v] is v's earliest time (NONE: none). A node's
time is the latest of init and of each predecessor's time plus the weight.

`longest_path` runs the C kernel of libperfweave-replay.so (runtime/analysis/replay.c:
Kahn's order, O(nodes + edges)) where it is built, else `longest_path_numpy`: max-plus
relaxations of the edges, each followed by a segmented running maximum along the chains,
until nothing changes (as many rounds as the longest path has edges between chains). Both
choose each node's predecessor by one rule (the chain's if it gives the time, else the
edge of lowest index that does, else none) and find the same nodes that cannot be
ordered: those on a cycle or behind one (a deadlock), whose time is NONE and predecessor
-2.
"""

import ctypes
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NONE = np.iinfo(np.int64).min
_LOW = -(1 << 62)  # below any time, and safe to add weights to


@dataclass
class Paths:
    time: np.ndarray  # int64 per node; NONE: none
    pred: np.ndarray  # node the time comes from; -1 none; -2 on or behind a cycle
    pred_edge: np.ndarray  # edge it comes by; -1 for the chain's (or none)
    left: int  # nodes on or behind a cycle

    @property
    def cyclic(self):
        return self.pred == -2


@functools.lru_cache(maxsize=None)
def library():
    """libperfweave-replay.so (ctypes), or None where it is not built; its kernels are
    this module's and rootcause.py's."""
    libdir = os.environ.get("PERFWEAVE_LIBDIR") or Path(__file__).resolve().parents[1] / "lib"
    try:
        return ctypes.CDLL(str(Path(libdir) / "libperfweave-replay.so"))
    except OSError:
        return None


@functools.lru_cache(maxsize=None)
def kernel():
    """pw_longest_path of libperfweave-replay.so, or None where it is not built."""
    lib = library()
    if lib is None or lib.pw_replay_version() != 2:
        return None
    fn = lib.pw_longest_path
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64] + [ctypes.c_void_p] * 7
    return fn


def _args(n, src, dst, w, chain, init):
    src, dst, w = (np.ascontiguousarray(a, np.int64) for a in (src, dst, w))
    chain, init = (np.ascontiguousarray(a, np.int64) for a in (chain, init))
    if not (len(chain) == len(init) == n and len(src) == len(dst) == len(w)):
        raise ValueError("longest_path: arrays of unequal lengths")
    if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise ValueError("longest_path: an edge names a node out of range")
    return src, dst, w, chain, init


def longest_path(n, src, dst, w, chain, init, use_c=True, overwrite_init=False):
    """Paths of the graph (module docstring), with the C kernel if built (use_c).
    overwrite_init: the times may take the place of init (one array less to allocate)."""
    src, dst, w, chain, init = _args(n, src, dst, w, chain, init)
    fn = kernel() if use_c else None
    if fn is None:
        return longest_path_numpy(n, src, dst, w, chain, init)
    time = init if overwrite_init else init.copy()  # the times start from the earliest
    pred, pe = np.empty(n, np.int64), np.empty(n, np.int64)
    left = fn(n, len(src), *(a.ctypes.data for a in (src, dst, w, chain, time, pred, pe)))
    if left < 0:
        raise MemoryError("longest_path: out of memory")
    return Paths(time, pred, pe, int(left))


def longest_path_numpy(n, src, dst, w, chain, init):
    """Paths of the graph with numpy alone (module docstring)."""
    src, dst, w, chain, init = _args(n, src, dst, w, chain, init)
    linked = chain != NONE
    if n:
        linked[0] = False
    starts = np.flatnonzero(~linked)
    ends = np.r_[starts[1:], n]
    runs = [(a, b) for a, b in zip(starts.tolist(), ends.tolist()) if b - a > 1]
    cw = np.where(linked, chain, 0)
    order = np.argsort(dst, kind="stable")
    sd = dst[order]
    firsts = np.flatnonzero(np.r_[True, sd[1:] != sd[:-1]]) if len(sd) else sd
    heads = sd[firsts]

    def along(weights):
        """Weights summed along each chain from its start (the scan works on t - W)."""
        c = np.cumsum(weights)
        return c - np.repeat(c[starts], ends - starts) if n else c

    def relax(t, weight, W):
        """One round: t from the edges into each node, then along the chains."""
        x = t.copy()
        if len(src):
            cand = t[src[order]] + weight[order]
            x[heads] = np.maximum(x[heads], np.maximum.reduceat(cand, firsts))
        y = x - W
        for a, b in runs:
            np.maximum.accumulate(y[a:b], out=y[a:b])
        return np.maximum(y + W, _LOW)

    Wt, Wh = along(cw), along(linked.astype(np.int64))
    t = np.where(init == NONE, _LOW, init)
    # hops: the nodes on the longest path to a node: bounded in a DAG, growing round by
    # round on a cycle (zero weights would not show it in t)
    hops = np.zeros(n, np.int64)
    ones = np.ones(len(src), np.int64)
    changed = np.zeros(n, bool)
    for _ in range(len(src) + 2):
        t2, h2 = relax(t, w, Wt), relax(hops, ones, Wh)
        changed = (t2 != t) | (h2 != hops)
        t, hops = t2, h2
        if not changed.any():
            break
    bad = np.zeros(n, bool)
    if changed.any():  # a cycle: every node it reaches
        bad = changed.copy()
        while True:
            grow = bad.copy()
            if len(src):
                grow[dst[bad[src]]] = True
            for a, b in runs:
                seg = grow[a:b]
                np.logical_or.accumulate(seg, out=seg)
            if (grow == bad).all():
                break
            bad = grow
    time = np.where((t <= _LOW // 2) | bad, NONE, t)
    pred = np.full(n, -1, np.int64)
    pe = np.full(n, -1, np.int64)
    has = time != NONE
    prev_ok = np.zeros(n, bool)
    prev_ok[1:] = linked[1:] & has[1:] & has[:-1]
    via_chain = np.zeros(n, bool)
    via_chain[1:] = prev_ok[1:] & (time[:-1] + cw[1:] == time[1:])
    pred[via_chain] = np.flatnonzero(via_chain) - 1
    if len(src):
        hit = np.flatnonzero(has[src] & has[dst] & (time[src] + w == time[dst]) & ~via_chain[dst])
        nodes, first = np.unique(dst[hit], return_index=True)  # the lowest edge of each
        pe[nodes] = hit[first]
        pred[nodes] = src[hit[first]]
    pred[bad] = -2
    pe[bad] = -1
    return Paths(time, pred, pe, int(bad.sum()))
