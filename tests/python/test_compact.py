"""The compact profile (model/compact.py, readers/compact.py): the sketch's bound, merges
whose order changes no statistic beyond rounding (and no sketch count at all), the
statistics against numpy on the full rank x node matrix, the file read back as written,
a compact-only experiment in perfweave.open and the report, corrupt files as one line."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import perfweave
from perfweave.errors import FormatError
from perfweave.model import compact as cp
from perfweave.readers import compact as rd
from perfweave.readers.profile import read_profile

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")


def test_sketch_keys_bound():
    """Below 2^SUB_BITS a bucket is one value; above, every value is within RELATIVE_ERROR
    of its bucket's value, and keys grow with the values (a bucket is an interval)."""
    small = np.arange(1 << cp.SUB_BITS)
    assert np.array_equal(cp.sketch_keys(small), small)
    assert np.array_equal(cp.key_value(small), small)
    rng = np.random.default_rng(3)
    x = np.unique(np.concatenate([
        rng.integers(1, 1 << 40, 20000), 2 ** np.arange(1, 52), 2 ** np.arange(1, 52) - 1,
    ]))  # fmt: skip
    k = cp.sketch_keys(x)
    assert (np.diff(k) >= 0).all()
    lo, width = cp.key_bounds(k)
    assert ((lo <= x) & (x < lo + width)).all()
    assert (np.abs(cp.key_value(k) - x) <= cp.RELATIVE_ERROR * x).all()
    # the runtime's key (integer bits) for the same values: floor(log2 x) from bit_length
    ref = [
        v if v < 16 else ((v.bit_length() - 4) << 4) | ((v >> (v.bit_length() - 5)) & 15)
        for v in map(int, x[:2000])
    ]
    assert cp.SUB_BITS == 4 and ref == k[:2000].tolist()


def _matrix(ranks, nodes, seed):
    rng = np.random.default_rng(seed)
    present = rng.random((ranks, nodes)) < 0.7
    present[0] = True
    vals = rng.integers(0, 10**9, (ranks, nodes, len(cp.NODE_METRICS)))
    vals[:, :, 0] = rng.integers(1, 5, (ranks, nodes))  # ties in min and max
    vals = np.where(present[:, :, None], vals, 0)
    rank_v = rng.integers(10**8, 10**10, (ranks, 2))
    return present, vals, rank_v


def _leaf_of(present, vals, rank_v):
    def leaf(r):
        ids = np.flatnonzero(present[r])
        return cp.Summary.leaf(r, ids, vals[r, ids], dict(zip(cp.RANK_METRICS, rank_v[r])))

    return leaf


def _fold(leaf, lo, hi, shape):
    """The summary of ranks lo..hi-1 merged in another tree: left fold or halves."""
    if hi - lo == 1:
        return leaf(lo)
    if shape == "fold":
        s = leaf(lo)
        for r in range(lo + 1, hi):
            s = cp.merge(s, leaf(r))
        return s
    mid = (lo + hi) // 2
    return cp.merge(_fold(leaf, lo, mid, shape), _fold(leaf, mid, hi, shape))


def test_merge_order_and_numpy():
    ranks, nodes = 37, 50
    present, vals, rank_v = _matrix(ranks, nodes, 5)
    leaf = _leaf_of(present, vals, rank_v)
    tree = cp.tree_reduce(leaf, ranks)
    for other in (_fold(leaf, 0, ranks, "fold"), _fold(leaf, 0, ranks, "halves")):
        for k in ("nodes", "n", "argmin", "argmax", "min", "max", "sum", "codes", "counts"):
            assert np.array_equal(getattr(tree, k), getattr(other, k)), k
        # Chan's formula: the same up to rounding in any order
        np.testing.assert_allclose(other.mean, tree.mean, rtol=1e-12)
        np.testing.assert_allclose(other.m2, tree.m2, rtol=1e-12)
    # against numpy on the full matrix: ranks without the node left out
    big = np.iinfo(np.int64).max
    for m in range(len(cp.NODE_METRICS)):
        v = vals[:, :, m]
        lo = np.where(present, v, big)
        hi = np.where(present, v, -1)
        assert np.array_equal(tree.n, present.sum(axis=0))
        assert np.array_equal(tree.min[:, m], lo.min(axis=0))
        assert np.array_equal(tree.argmin[:, m], lo.argmin(axis=0))  # lowest rank on ties
        assert np.array_equal(tree.max[:, m], hi.max(axis=0))
        assert np.array_equal(tree.argmax[:, m], hi.argmax(axis=0))
        assert np.array_equal(tree.sum[:, m], v.sum(axis=0))
        for j in range(nodes):
            col = v[present[:, j], j].astype(float)
            np.testing.assert_allclose(tree.mean[j, m], col.mean(), rtol=1e-12)
            np.testing.assert_allclose(tree.m2[j, m] / len(col), col.var(), rtol=1e-12, atol=1e-3)
    app = tree.ranks["app_ns"]
    assert (app["min"], app["argmax"], app["sum"]) == (
        rank_v[:, 0].min(),
        rank_v[:, 0].argmax(),
        rank_v[:, 0].sum(),
    )
    # the sketches hold each rank's bucket of every node metric exactly
    r, j = np.nonzero(present)
    nm = len(cp.NODE_METRICS)
    slots = (j[:, None] * nm + np.arange(nm)) * cp.KEY_SPACE
    want = np.unique(slots + cp.sketch_keys(vals[r, j].reshape(-1)).reshape(-1, nm),
                     return_counts=True)  # fmt: skip
    assert np.array_equal(tree.codes, want[0]) and np.array_equal(tree.counts, want[1])


def _profile(ranks=9, nodes=30, seed=2):
    present, vals, rank_v = _matrix(ranks, nodes, seed)
    leaf = _leaf_of(present, vals, rank_v)
    s = cp.tree_reduce(leaf, ranks)
    table = np.zeros(nodes, cp.CNODE)
    table["fn"] = np.arange(nodes) % 3
    table["object"] = np.arange(nodes) % 2 - 1  # some unknown (-1)
    table["offset"] = np.arange(nodes) * 16
    table["nframes"] = np.arange(nodes) % 2
    table["first_frame"] = np.where(table["nframes"] > 0, np.cumsum(table["nframes"]) - 1, -1)
    frames = np.zeros(int(table["nframes"].sum()), cp.FRAME)
    frames["offset"] = np.arange(len(frames)) + 7
    names = ["MPI_Send", "MPI_Recv", "MPI_Barrier"]
    times = lambda ids: vals[:, ids, cp.TIME].T  # noqa: E731
    p = cp.profile_from_summary(s, table, frames, names, ["/bin/app"], [""], ranks, times)
    return p, present, vals


def test_file_round_trip():
    p, present, vals = _profile()
    for codec in ("zlib", "none"):
        raw = rd.encode(p, codec)
        assert len(raw.split(b"\n", 1)[0]) % 64 == 63 and raw.endswith(b"PWEND\n\n\n")
        q = rd.decode(raw, "x")
        for k in ("nodes", "frames", "stats", "sketch_counts", "top_nodes", "top_values"):
            assert np.array_equal(getattr(p, k), getattr(q, k)), k
        assert rd.encode(q, codec) == raw
    # the top nodes' per-rank times are the matrix's, 0 where a rank has no call
    assert np.array_equal(q.top_values, vals[:, q.top_nodes, cp.TIME].T)
    tot = q.node_stats("time_ns")["sum"]
    assert list(q.top_nodes) == list(np.lexsort((np.arange(len(tot)), -tot))[: cp.TOP_NODES])
    # quantiles within the bound, per node and metric, against numpy's
    for m, metric in enumerate(cp.NODE_METRICS):
        for j in range(len(q.nodes)):
            col = vals[present[:, j], j, m]
            for quant in (0.0, 0.5, 0.9, 1.0):
                true = np.quantile(col, quant, method="lower")
                got = q.quantile(j, quant, metric)
                assert abs(got - true) <= cp.RELATIVE_ERROR * true, (metric, j, quant)


def _encode_v1(p):
    """p's file as version 1 wrote it (kept here, as that encoder was): the time's sketch
    in the node records, no other sketch, statistics records without sketch fields."""
    time = p.node_stats("time_ns")
    nodes = np.zeros(len(p.nodes), rd.CNODE_V1)
    for k in ("fn", "object", "nframes", "offset", "first_frame"):
        nodes[k] = p.nodes[k]
    parts, at = [], 0
    for i, t in enumerate(time):
        parts.append(p.sketch_counts[t["sketch_first"] : t["sketch_first"] + t["sketch_len"]])
        nodes[i]["sketch_first"], nodes[i]["sketch_len"] = at, t["sketch_len"]
        nodes[i]["sketch_key0"] = t["sketch_key0"]
        at += int(t["sketch_len"])
    stats = np.zeros(len(p.stats), rd.CSTAT_V1)
    for k in rd.CSTAT_V1.names:
        if k != "pad":
            stats[k] = p.stats[k]
    blobs = {
        "nodes": nodes.tobytes(),
        "frames": p.frames.tobytes(),
        "stats": stats.tobytes(),
        "top_values": rd._shuffle(p.top_values.reshape(-1)),
        "sketch_counts": np.concatenate(parts).astype("<i4").tobytes(),
    }
    arrays, off = {}, 0
    for name, dt in rd.ARRAYS_OF[1]:
        n = len(blobs[name]) // dt.itemsize
        arrays[name] = {"offset": off, "count": n, "itemsize": dt.itemsize,
                        "dtype": rd._dtype_list(dt)}  # fmt: skip
        off += len(blobs[name])
    data = b"".join(blobs[name] for name, _ in rd.ARRAYS_OF[1])
    header = dict(format=rd.MAGIC, version=1, world_size=p.world_size, codec="none",
                  sub_bits=cp.SUB_BITS, metrics=list(cp.METRICS),
                  top_nodes=[int(i) for i in p.top_nodes], functions=p.functions,
                  objects=p.objects, buildids=p.buildids, arrays=arrays,
                  data_bytes=len(data), stored_bytes=len(data))  # fmt: skip
    line = rd._cjson(header).encode()
    return line + b" " * (-(len(line) + 1) % 64) + b"\n" + data + rd.END_MARKER


def test_version_1_file_is_read():
    """A version-1 file (the time's sketch only) reads as the same profile: statistics,
    top nodes and time quantiles as version 2's; calls' and bytes' quantiles NaN; the
    report's p90 of calls and bytes "-"."""
    p, present, vals = _profile()
    q = rd.decode(_encode_v1(p), "old")
    assert q.header["version"] == 1
    assert np.array_equal(q.nodes, p.nodes) and np.array_equal(q.frames, p.frames)
    for k in ("node", "metric", "n", "argmin", "argmax", "min", "max", "sum", "mean", "m2"):
        assert np.array_equal(q.stats[k], p.stats[k]), k
    assert np.array_equal(q.top_values, p.top_values)
    for j in range(len(p.nodes)):
        for quant in (0.0, 0.5, 0.9, 1.0):
            assert q.quantile(j, quant) == p.quantile(j, quant)
        assert np.isnan(q.quantile(j, 0.9, "calls")) and np.isnan(q.quantile(j, 0.9, "bytes_recv"))
    from perfweave.analysis.compact import analyze
    from perfweave.report.sections.compact import _srow

    site = analyze(q, top=1)["callsites"][0]
    assert _srow(site)[-2:] == ["-", "-"] and site["p90_s"] > 0


def _corruptions(raw):
    nl = raw.index(b"\n")
    body = bytearray(raw)
    body[nl + 20] ^= 0xFF  # inside the zlib stream
    yield "truncated", raw[: len(raw) - 20]
    yield "zlib", bytes(body)
    yield "magic", raw.replace(b"perfweave-compact-profile", b"perfweave-compact-profilX", 1)
    yield "version", raw.replace(b'"version":%d' % rd.VERSION, b'"version":9', 1)
    yield "empty", b""
    yield "header only", raw[: nl + 1]
    yield "node index", _with_stats_node(raw, 10**6)


def _as_version_2(raw):
    """raw (this version's file) as version 2 wrote it: without the matrix's arrays."""
    import json
    import zlib

    nl = raw.index(b"\n")
    h = json.loads(raw[:nl])
    data = zlib.decompress(raw[nl + 1 : nl + 1 + h["stored_bytes"]])
    cut = h["arrays"]["pairs"]["offset"]
    del h["arrays"]["pairs"], h["arrays"]["rank_comm"]
    stored = zlib.compress(data[:cut], 6)
    h.update(version=2, data_bytes=cut, stored_bytes=len(stored))
    line = rd._cjson(h).encode()
    return line + b" " * (-(len(line) + 1) % 64) + b"\n" + stored + rd.END_MARKER


def test_version_2_read_without_matrix():
    """A version-2 file (no matrix summary) reads with its call sites alike, pairs and
    rank_comm None; perfweave's matrix summary of it says so (from_compact: None)."""
    from perfweave.analysis.comm_matrix import from_compact

    p, _, _ = _profile()
    p.pairs, p.rank_comm = np.zeros(0, cp.CPAIR), np.arange(4 * p.world_size).reshape(4, -1)
    raw = rd.encode(p)
    now, old = rd.decode(raw, "x"), rd.decode(_as_version_2(raw), "x")
    assert np.array_equal(now.rank_comm, p.rank_comm) and old.header["version"] == 2
    assert old.pairs is None and old.rank_comm is None and from_compact(old) is None
    assert np.array_equal(old.stats, now.stats) and np.array_equal(old.top_values, now.top_values)


def _with_stats_node(raw, node):
    q = rd.decode(raw, "x")
    q.stats["node"][0] = node
    return rd.encode(q)


@pytest.mark.parametrize("case", range(7))
def test_corrupt_file_is_a_format_error(case):
    p, _, _ = _profile()
    name, raw = list(_corruptions(rd.encode(p)))[case]
    with pytest.raises(FormatError) as e:
        rd.decode(raw, "f.pwcompact")
    assert "\n" not in str(e.value) and str(e.value).startswith("f.pwcompact: "), name


def _sites_of(present, vals):
    rows = []
    for r, j in zip(*np.nonzero(present)):
        # each node's calls split over two threads' rows on some ranks
        parts = 2 if (r + j) % 3 == 0 else 1
        for t in range(parts):
            v = vals[r, j] // parts + (vals[r, j] % parts if t == 0 else 0)
            rows.append(dict(rank=r, fn=j % 4, object=j % 2, offset=64 * j, count=v[0],
                             total_ns=v[1], bytes_sent=v[2], bytes_recv=v[3]))  # fmt: skip
    return rows


def test_compact_only_experiment(experiment_dir, pwprof, tmp_path):
    """of_profile (the runtime's bytes from a full profile, threads' rows summed) made into
    a compact-only experiment: perfweave.open and the report show its call sites; a
    corrupt one is one line of error, no traceback."""
    ranks = 5
    present, vals, _ = _matrix(ranks, 12, 9)
    rank_rows = [
        dict(rank=r, app_ns=10**9 + r, mpi_ns=int(vals[r, :, 1].sum())) for r in range(ranks)
    ]
    src = pwprof(
        tmp_path / "full.pwprof",
        {
            "world_size": ranks,
            "objects": ["/lib/libx.so", "/bin/app"],  # the compact file's: sorted
            "buildids": ["", "ab"],
            "functions": ["MPI_Send", "MPI_Recv", "MPI_Bcast", "MPI_Barrier"],
            "families": ["p2p", "p2p", "coll", "coll"],
        },
        ranks=rank_rows,
        sites=_sites_of(present, vals),
    )
    raw = rd.of_profile(read_profile(src))
    q = rd.decode(raw, "x")
    names = read_profile(src).header["functions"]
    t = q.node_stats("time_ns")
    # nodes in the file's order: fn, object (sorted by path: /bin/app first), offset
    order = sorted(range(12), key=lambda j: (j % 4, 1 - j % 2, j))
    assert np.array_equal(t["sum"], vals[:, order, 1].sum(axis=0))
    assert [q.functions[f] for f in q.nodes["fn"]] == [names[j % 4] for j in order]
    assert q.objects == ["/bin/app", "/lib/libx.so"] and q.buildids == ["ab", ""]
    objs = [q.objects[o] for o in q.nodes["object"]]
    assert objs == [["/lib/libx.so", "/bin/app"][j % 2] for j in order]
    exp = experiment_dir()
    (exp / "profile.pwcompact").write_bytes(raw)
    e = perfweave.open(exp)
    sites = e.mpi_compact_callsites()
    assert len(sites) == 12 and sorted(sites["ranks"]) == sorted(present.sum(axis=0))
    top = sites.iloc[0]
    j = int(np.argmax(vals[:, :, 1].sum(axis=0)))
    col = vals[present[:, j], j, 1]
    assert top["time_s"] == pytest.approx(col.sum() * 1e-9, rel=1e-12)
    assert top["max_s"] == pytest.approx(col.max() * 1e-9, rel=1e-12)
    assert top["argmax"] == int(np.flatnonzero(present[:, j])[np.argmax(col)])
    # the calls' and bytes' p90 per rank from their own sketches (threads' rows summed)
    for m, key in ((0, "calls_p90"), (2, "sent_p90"), (3, "recv_p90")):
        true = np.quantile(vals[present[:, j], j, m], 0.9, method="lower")
        assert abs(top[key] - true) <= cp.RELATIVE_ERROR * true, key
    assert top["bytes_sent"] == vals[:, j, 2].sum()
    res = subprocess.run([PERFWEAVE, "report", str(exp)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "MPI call sites by time" in res.stdout and "compact profile only" in res.stdout
    (exp / "profile.pwcompact").write_bytes(raw[:-30])
    res = subprocess.run([PERFWEAVE, "report", str(exp)], capture_output=True, text=True)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "truncated" in res.stderr


def test_corrupt_compact_beside_the_full_profile(experiment_dir, pwprof):
    """The report reads the compact profile only when it is the only MPI profile: a
    damaged one beside profile.pwprof changes nothing."""
    exp = experiment_dir()
    pwprof(
        exp / "profile.pwprof",
        {"functions": ["MPI_Send"], "families": ["p2p"], "objects": ["/bin/app"]},
        ranks=[dict(rank=0, app_ns=10**9, mpi_ns=10**6)],
        sites=[dict(rank=0, fn=0, object=0, offset=64, count=3, total_ns=10**6)],
    )
    (exp / "profile.pwcompact").write_bytes(b"{not a compact profile\n")
    res = subprocess.run([PERFWEAVE, "report", "--json", str(exp)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert '"compact"' not in res.stdout and '"MPI_Send"' in res.stdout
