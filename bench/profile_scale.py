#!/usr/bin/env python3
"""Benchmark: the compact profile at scale (figures, not a test).

For each rank count, a synthetic MPI profile of --nodes call-tree nodes (a function at a
call site with two caller frames) on every rank, with a realistic skew: a few hot nodes
(a halo exchange's Waitall, an Allreduce, an Alltoall) holding most of the time, a
linear imbalance across ranks on them, a log-normal spread per rank on all, call counts
and message sizes per node, and zeros: a quarter of the nodes called by only some ranks
(rank 0 alone, even ranks, a random half). It reduces the ranks' summaries up the
runtime's binomial tree (perfweave.model.compact.tree_reduce: the operations and order
of runtime/modules/mpi_compact.c), writes the compact file with the encoder the runtime
matches byte for byte (perfweave.readers.compact.encode), reads it back, and checks every
stored statistic against numpy on the full rank x node matrix: n, min, max, sum, argmin,
argmax bit-exact, mean and variance to a relative 1e-12, the top nodes' per-rank times
exact, the sketches' 50/90/99 % quantiles of every node and metric within their stated
bound. Each rank's communication matrix rows (a 3-D halo exchange: six neighbours, sends
and receives, message sizes by rank) give the file's matrix summary (model/compact.py
matrix_summary): its top pairs and per-rank totals are checked against numpy on the
rows, and its cost is the "matrix" column (the file's bytes with it less without).
It prints a table of sizes (the compact file, bytes per rank, the full per-rank
profile.pwprof this run would write, TAU's packed profile on Fugaku: ../shared/papers/
tool-overhead-fft-klein-gordon-fugaku.txt) and of the tree (rounds, peak bytes a rank
holds, bytes moved). Exits 1 when a check fails.

    .venv/bin/python bench/profile_scale.py [--ranks 384,768,...] [--nodes 2000] [--seed 1]
"""

import argparse
import sys
import time

import numpy as np

from perfweave.model import compact as cp
from perfweave.readers import compact as rd

# TAU's packed profile (ppk) of 2DECOMP&FFT on Fugaku, bytes by rank count (the paper's table)
TAU_PPK = {384: 461e3, 768: 840e3, 1536: 1.3e6, 3072: 2.3e6, 6144: 3.9e6, 12288: 7.0e6}
FUNCTIONS = [
    "MPI_Waitall", "MPI_Allreduce", "MPI_Alltoall", "MPI_Isend", "MPI_Irecv", "MPI_Send",
    "MPI_Recv", "MPI_Bcast", "MPI_Barrier", "MPI_Reduce", "MPI_Wait", "MPI_Allgather",
    "MPI_Gatherv", "MPI_Sendrecv", "MPI_Comm_rank", "MPI_Test",
]  # fmt: skip
FRAMES = 2  # caller frames per node (--callsite-depth 3)


def node_table(n, rng):
    """n nodes with distinct identities, in the file's order (fn, object, offset, frames)."""
    t = np.zeros(n, cp.CNODE)
    t["fn"] = rng.integers(0, len(FUNCTIONS), n)
    t["object"] = rng.integers(0, 3, n)
    t["offset"] = rng.choice(1 << 24, n, replace=False)
    t = t[np.lexsort((t["offset"], t["object"], t["fn"]))]
    t["nframes"] = FRAMES
    t["first_frame"] = np.arange(n) * FRAMES
    frames = np.zeros(n * FRAMES, cp.FRAME)
    frames["object"] = rng.integers(0, 3, n * FRAMES)
    frames["offset"] = rng.integers(0, 1 << 24, n * FRAMES)
    return t, frames


def matrices(ranks, table, rng):
    """[rank, node] calls, time_ns, bytes_sent, bytes_recv (0 where a rank has no call)."""
    n = len(table)
    base = np.exp(rng.normal(np.log(2e5), 2.0, n))  # ns per rank, from 1 us to seconds
    hot = rng.choice(n, 5, replace=False)
    base[hot] = rng.uniform(2e9, 2e10, 5)
    tilt = 1 + 0.4 * np.linspace(-1, 1, ranks)[:, None] * (rng.random(n) < 0.3)
    tilt[:, hot] = 1 + 0.6 * np.linspace(-1, 1, ranks)[:, None]
    time_ns = base * tilt * np.exp(rng.normal(0, 0.15, (ranks, n)))
    calls = np.maximum(1, rng.poisson(np.maximum(1, base / 2e4), (ranks, n)))
    present = np.ones((ranks, n), bool)
    partial = rng.choice(n, n // 4, replace=False)
    kind = rng.integers(0, 3, len(partial))
    rk = np.arange(ranks)[:, None]
    present[:, partial[kind == 0]] = rk == 0
    present[:, partial[kind == 1]] = rk % 2 == 0
    present[:, partial[kind == 2]] = rng.random((ranks, int((kind == 2).sum()))) < 0.5
    present[0, :] = True  # rank 0 calls every node (no node is nobody's)
    msg = np.where(np.isin(table["fn"], [8, 14, 15, 10, 0]), 0, 2 ** rng.integers(3, 20, n))
    time_ns = np.where(present, np.rint(time_ns), 0).astype(np.int64)
    calls = np.where(present, calls, 0).astype(np.int64)
    sent = calls * msg
    recv = np.where(rng.random(n) < 0.5, sent, calls * msg // 2)
    return present, np.stack([calls, time_ns, sent, recv], axis=2)


def rank_values(vals, present):
    """app_ns and mpi_ns per rank: MPI time plus computation, the MPI time summed."""
    mpi = vals[:, :, cp.TIME].sum(axis=1)
    app = mpi + np.int64(30_000_000_000)
    return app, mpi


def check(p, present, vals, app, mpi, table):
    """The worst deviations of the file's statistics from numpy's on the full matrix."""
    bad = []
    rel = {"mean": 0.0, "var": 0.0, "q": 0.0}
    nodes_ok = np.array_equal(
        p.nodes[["fn", "object", "offset"]], table[["fn", "object", "offset"]]
    )
    if not nodes_ok:
        bad.append("node identities")
    big = np.iinfo(np.int64).max
    for m, name in enumerate(cp.NODE_METRICS):
        s = p.node_stats(name)
        v = vals[:, :, m]
        n = present.sum(axis=0)
        lo = np.where(present, v, big)
        hi = np.where(present, v, -1)
        exact = {
            "n": n,
            "min": lo.min(axis=0),
            "max": hi.max(axis=0),
            "argmin": lo.argmin(axis=0),
            "argmax": hi.argmax(axis=0),
            "sum": v.sum(axis=0),
        }
        for k, want in exact.items():
            if not np.array_equal(s[k], want):
                bad.append(f"{name} {k}")
        mean = v.sum(axis=0) / n
        var = np.array([np.var(v[present[:, j], j]) for j in range(v.shape[1])])
        rel["mean"] = max(
            rel["mean"], float(np.max(np.abs(s["mean"] - mean) / np.maximum(np.abs(mean), 1e-300)))
        )
        got_var = s["m2"] / n
        scale = np.maximum(np.abs(var), 1e-300)
        rel["var"] = max(
            rel["var"],
            float(np.max(np.where(var > 0, np.abs(got_var - var) / scale, np.abs(got_var)))),
        )
    for name, want in (("app_ns", app), ("mpi_ns", mpi)):
        r = p.rank_stats(name)
        if (r["min"], r["max"], r["sum"], r["argmin"], r["argmax"], r["n"]) != (
            want.min(),
            want.max(),
            want.sum(),
            want.argmin(),
            want.argmax(),
            len(want),
        ):
            bad.append(name)
    for m, name in enumerate(cp.NODE_METRICS):
        for j in range(len(p.nodes)):
            col = vals[present[:, j], j, m]
            for q in (0.5, 0.9, 0.99):
                true = np.quantile(col, q, method="lower")
                est = p.quantile(j, q, name)
                err = abs(est - true) / true if true else abs(est)
                rel["q"] = max(rel["q"], err)
    if rel["q"] > cp.RELATIVE_ERROR:
        bad.append("sketch quantile beyond its bound")
    if not np.array_equal(p.top_values, vals[:, p.top_nodes, cp.TIME].T):
        bad.append("top nodes' per-rank times")
    if rel["mean"] > 1e-12 or rel["var"] > 1e-12:
        bad.append("mean or variance beyond 1e-12")
    return bad, rel


def halo_rows(ranks, rng):
    """The comms rows of a 3-D halo exchange on a near-cubic grid of the ranks: each rank
    sends to and receives from its six neighbours (periodic), 1000 messages each, of a
    size varying by rank and direction."""
    dims, n = [1, 1, 1], ranks
    while n > 1:  # prime factors, each onto the smallest dimension
        f = next(k for k in range(2, n + 1) if n % k == 0)
        dims[int(np.argmin(dims))] *= f
        n //= f
    r = np.arange(ranks)
    coords = np.stack(np.unravel_index(r, dims))
    rows = []
    size = rng.integers(4_000, 64_000, (ranks, 6))
    for k, (axis, step) in enumerate((a, s) for a in range(3) for s in (-1, 1)):
        c = coords.copy()
        c[axis] = (c[axis] + step) % dims[axis]
        peer = np.ravel_multi_index(tuple(c), dims)
        for direction, col, nbytes in ((0, "bytes_sent", size[:, k]),
                                       (1, "bytes_recv", size[peer, k ^ 1])):  # fmt: skip
            x = np.zeros(ranks, cp.RECORDS["comm"])
            x["rank"], x["peer"], x["dir"], x["messages"] = r, peer, direction, 1000
            x["comm_size"], x["comm_first"], x["comm_hash"] = ranks, 0, 12345
            x[col] = 1000 * nbytes
            rows.append(x)
    return np.concatenate(rows)


def check_matrix(p, rows):
    """The summary's pairs and totals against numpy on the rows: the bad checks' names."""
    bad = []
    send = rows[rows["dir"] == 0]
    key = send["rank"].astype(np.int64) * len(send) + send["peer"]
    u, inv = np.unique(key, return_inverse=True)
    b = np.zeros(len(u), np.int64)
    np.add.at(b, inv.reshape(-1), send["bytes_sent"])
    top = np.sort(b)[::-1][: cp.TOP_PAIRS]
    if not np.array_equal(p.pairs["bytes"], top):
        bad.append("pairs")
    want = np.zeros(p.world_size, np.int64)
    np.add.at(want, send["rank"], send["bytes_sent"])
    recv = rows[rows["dir"] == 1]
    got_r = np.zeros(p.world_size, np.int64)
    np.add.at(got_r, recv["rank"], recv["bytes_recv"])
    if not (np.array_equal(p.rank_comm[0], want) and np.array_equal(p.rank_comm[2], got_r)):
        bad.append("rank totals")
    return bad


def one(ranks, nodes, seed):
    rng = np.random.default_rng(seed)
    table, frames = node_table(nodes, rng)
    present, vals = matrices(ranks, table, rng)
    app, mpi = rank_values(vals, present)
    ids = np.arange(nodes)

    def leaf(r):
        have = present[r]
        return cp.Summary.leaf(r, ids[have], vals[r, have], {"app_ns": app[r], "mpi_ns": mpi[r]})

    cost = cp.TreeCost()
    t0 = time.perf_counter()
    summary = cp.tree_reduce(leaf, ranks, cost)
    t_tree = time.perf_counter() - t0
    t0 = time.perf_counter()
    prof = cp.profile_from_summary(
        summary,
        table,
        frames,
        FUNCTIONS,
        ["/app/a.out", "/lib/libmpi.so", "/lib/libfft.so"],
        ["", "", ""],
        ranks,
        lambda sel: vals[:, sel, cp.TIME].T,
    )
    plain = len(rd.encode(prof))  # without the matrix (its arrays empty, the totals zeros)
    rows = halo_rows(ranks, rng)
    prof.pairs, prof.rank_comm = cp.matrix_summary(rows, ranks)
    raw = rd.encode(prof)
    t_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = rd.decode(raw, "synthetic")
    t_read = time.perf_counter() - t0
    bad, rel = check(back, present, vals, app, mpi, table)
    bad += check_matrix(back, rows)
    full = ranks * (nodes * (cp.RECORDS["site"].itemsize + FRAMES * cp.FRAME.itemsize)
                    + cp.RECORDS["rank"].itemsize)  # fmt: skip
    return dict(
        ranks=ranks, bytes=len(raw), full=full, tree=cost, t_tree=t_tree, t_write=t_write,
        t_read=t_read, bad=bad, rel=rel, data=back.header["data_bytes"],
        matrix=len(raw) - plain,
    )  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default="384,768,1536,3072,6144,12288")
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print(f"compact profile, {a.nodes} call-tree nodes, {cp.TOP_NODES} top nodes per rank kept, "
          f"sketch bound {cp.RELATIVE_ERROR:.4f} relative")  # fmt: skip
    head = (f"{'ranks':>6} {'compact':>9} {'matrix':>9} {'B/rank':>7} {'full pwprof':>12} "
            f"{'ratio':>7} "
            f"{'TAU ppk':>8} {'rounds':>6} {'peak/rank':>10} {'moved':>9} {'tree s':>7} "
            f"{'write s':>7} {'read s':>6} {'mean':>8} {'var':>8} {'q err':>7}  check")  # fmt: skip
    print(head)
    failed = False
    for ranks in (int(x) for x in a.ranks.split(",")):
        r = one(ranks, a.nodes, a.seed)
        t = r["tree"]
        tau = f"{TAU_PPK[ranks] / 1e6:.2f} MB" if ranks in TAU_PPK else "-"
        verdict = "ok" if not r["bad"] else ", ".join(r["bad"])
        print(
            f"{ranks:>6} {r['bytes'] / 1e6:>6.3f} MB {r['matrix'] / 1e6:>6.3f} MB "
            f"{r['bytes'] / ranks:>7.1f} "
            f"{r['full'] / 1e9:>9.3f} GB {r['full'] / r['bytes']:>6.0f}x {tau:>8} {t.rounds:>6} "
            f"{t.peak_bytes / 1e3:>7.0f} KB {t.moved_bytes / 1e6:>6.0f} MB {r['t_tree']:>7.1f} "
            f"{r['t_write']:>7.3f} {r['t_read']:>6.3f} {r['rel']['mean']:>8.1e} "
            f"{r['rel']['var']:>8.1e} {r['rel']['q']:>7.4f}  {verdict}"
        )
        failed |= bool(r["bad"])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
