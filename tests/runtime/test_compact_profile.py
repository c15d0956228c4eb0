"""The compact profile the runtime reduces up its binomial tree at MPI_Finalize
(runtime/modules/mpi_compact.c) against the full profile of the same run: the same bytes
as Python's encoder makes from profile.pwprof (model/compact.py, the operations in the
runtime's order), and its statistics against numpy on the per-rank rows; above
--full-profile-ranks the compact profile alone, which perfweave report shows."""

import numpy as np

from perfweave.model import compact as cp
from perfweave.readers import compact as rd
from perfweave.readers.profile import read_profile


def _identity(h, sites, frames, i):
    s = sites[i]
    path = tuple(
        (h["objects"][f["object"]] if f["object"] >= 0 else "", int(f["offset"]))
        for f in frames[s["first_frame"] : s["first_frame"] + s["nframes"]]
    ) if s["nframes"] > 0 else ()  # fmt: skip
    obj = h["objects"][s["object"]] if s["object"] >= 0 else ""
    return (h["functions"][s["fn"]], obj, int(s["offset"]), path)


def test_compact_equals_full_profile(mpi, build, run_pw):
    """5 ranks (a tree with a lone subtree), call sites three frames deep: the runtime's
    file is byte for byte the one of_profile makes of profile.pwprof; per node and
    metric, n, min, max, sum, argmin, argmax equal numpy's on the ranks' rows (threads
    summed), mean and variance to a relative 1e-12, the sketch the ranks' buckets."""
    prog = build(mpi, "counts.c")
    r = run_pw(mpi.launch(5) + [prog], options=["--callsite-depth", "3"])
    pf = read_profile(r.exp / "profile.pwprof")
    raw = (r.exp / "profile.pwcompact").read_bytes()
    assert raw == rd.of_profile(pf, rd.decode(raw, "x").header["codec"])
    c = rd.decode(raw, "profile.pwcompact")
    assert c.world_size == 5 and len(c.nodes) > 8
    h, sites, frames = pf.header, pf.arrays["sites"], pf.arrays["frames"]
    assert (sites["nframes"] == 2).any()  # deep call sites reached the file
    keys = [_identity(h, sites, frames, i) for i in range(len(sites))]
    ckeys = []
    for j, n in enumerate(c.nodes):
        path = tuple(
            (c.objects[f["object"]] if f["object"] >= 0 else "", int(f["offset"]))
            for f in c.frames[n["first_frame"] : n["first_frame"] + n["nframes"]]
        ) if n["nframes"] > 0 else ()  # fmt: skip
        obj = c.objects[n["object"]] if n["object"] >= 0 else ""
        ckeys.append((c.functions[n["fn"]], obj, int(n["offset"]), path))
    assert sorted(set(keys)) == sorted(ckeys)
    cols = ("count", "total_ns", "bytes_sent", "bytes_recv")
    for j, key in enumerate(ckeys):
        rows = np.array([k == key for k in keys])
        per_rank = {}
        for s in sites[rows]:
            per_rank.setdefault(int(s["rank"]), np.zeros(4, np.int64))
            per_rank[int(s["rank"])] += [s[k] for k in cols]
        ranks = np.array(sorted(per_rank))
        v = np.array([per_rank[x] for x in ranks])
        for m, name in enumerate(cp.NODE_METRICS):
            st = c.node_stats(name)[j]
            col = v[:, m]
            assert st["n"] == len(ranks)
            assert (st["min"], st["max"], st["sum"]) == (col.min(), col.max(), col.sum())
            assert (st["argmin"], st["argmax"]) == (ranks[col.argmin()], ranks[col.argmax()])
            assert abs(st["mean"] - col.mean()) <= 1e-12 * abs(col.mean())
            assert abs(st["m2"] / len(col) - col.var()) <= 1e-12 * col.var() + 1e-6
            # every metric's sketch: exactly the ranks' buckets, first to last
            key0, counts = c.sketch(j, name)
            buckets = cp.sketch_keys(col)
            assert key0 == buckets.min() and len(counts) == buckets.max() - key0 + 1
            assert np.array_equal(counts, np.bincount(buckets - key0, minlength=len(counts)))
    ranks = pf.arrays["ranks"]
    for name in ("app_ns", "mpi_ns"):
        st = c.rank_stats(name)
        v = ranks[name][np.argsort(ranks["rank"])]
        assert (st["n"], st["min"], st["max"], st["sum"]) == (5, v.min(), v.max(), v.sum())
        assert (st["argmin"], st["argmax"]) == (v.argmin(), v.argmax())
    # the top nodes' per-rank times, 0 where a rank has no call there
    for i, j in enumerate(c.top_nodes):
        want = np.zeros(5, np.int64)
        for s in sites[np.array([k == ckeys[j] for k in keys])]:
            want[s["rank"]] += s["total_ns"]
        assert np.array_equal(c.top_values[i], want)


def test_compact_only_above_threshold(mpi, build, run_pw):
    """4 ranks above --full-profile-ranks 2: no profile.pwprof, the compact profile is the
    profile (perfweave run's verdict counts its ranks); perfweave report shows its call
    sites with the counts the program makes."""
    prog = build(mpi, "counts.c")
    # no samples or timeline: perfweave run's verdict knows the ranks from the compact
    # profile alone
    options = ["--full-profile-ranks", "2", "--no-sample", "--node-interval", "0"]
    r = run_pw(mpi.launch(4) + [prog], options=options)
    assert r.proc.stderr.splitlines()[-1].startswith(f"perfweave: experiment written to {r.exp}")
    assert not (r.exp / "profile.pwprof").exists()
    assert (r.exp / "profile.pwcompact").exists()
    c = r.report()["compact"]
    assert c["ranks"] == 4
    f = {x["name"]: x for x in c["functions"]}
    # counts.c: 5 sends of 8000 bytes rank 0 -> 1, 3 Bcasts of 64 bytes on 4 ranks
    assert f["MPI_Send"]["calls"] == 5 and f["MPI_Send"]["bytes_sent"] == 5 * 8000
    assert f["MPI_Bcast"]["calls"] == 12 and f["MPI_Bcast"]["bytes_recv"] == 9 * 64
    assert f["MPI_Barrier"]["calls"] == 16 and "MPI_Init" not in f
    send = [s for s in c["callsites"] if s["function"] == "MPI_Send"]
    assert len(send) == 1 and send[0]["ranks"] == 1 and send[0]["argmax"] == 0
    barrier = [s for s in c["callsites"] if s["function"] == "MPI_Barrier"][0]
    assert barrier["ranks"] == 4 and barrier["min_s"] <= barrier["mean_s"] <= barrier["max_s"]
    assert 0 < c["mpi_s"] <= c["app_s"]
    text = r.text_report()
    assert "MPI call sites by time" in text and "compact profile only" in text


def test_compact_sums_a_ranks_threads(mpi, build, run_pw):
    """threads.c, MPI_THREAD_MULTIPLE: two threads of each rank call MPI_Allreduce 10 times
    and MPI_Comm_rank 50 times from one call site each; the compact profile's node holds
    each rank's both threads: 20 and 100 calls on every rank (min = max, argmin = argmax =
    rank 0, the lowest), the same bytes as from profile.pwprof."""
    prog = build(mpi, "threads.c", extra=("-pthread",))
    r = run_pw(mpi.launch(3) + [prog])
    raw = (r.exp / "profile.pwcompact").read_bytes()
    c = rd.decode(raw, "profile.pwcompact")
    assert raw == rd.of_profile(read_profile(r.exp / "profile.pwprof"), c.header["codec"])
    calls = c.node_stats("calls")
    for name, want in (("MPI_Allreduce", 20), ("MPI_Comm_rank", 100)):
        (rows,) = np.nonzero([c.functions[f] == name for f in c.nodes["fn"]])
        assert len(rows) == 1, name  # one call site, the threads' rows summed
        st = calls[rows[0]]
        assert (st["n"], st["min"], st["max"], st["sum"]) == (3, want, want, 3 * want), name
        assert (st["argmin"], st["argmax"], st["m2"]) == (0, 0, 0.0), name
