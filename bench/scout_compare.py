"""Compare perfweave's root-cause analysis with Scalasca's scout on the same trace.

    python bench/scout_compare.py scout.cubex perfweave-analysis.json

scout.cubex: what Scalasca 2.6's scout wrote for an OTF2 trace (mpirun -n P scout.mpi
traces.otf2: the critical path and the root-cause analysis are its defaults);
perfweave-analysis.json: `perfweave analyze --json` of the same trace imported with
`perfweave import`. Prints, for the metrics both compute, the total of each, and per
(rank, call path leaf) the largest delay costs and critical-path times of both.
docs/performance.md ("Root causes against Scalasca") records the figures and how the
reference was built.

A .cubex is a tar file: anchor.xml (metrics, regions, call tree, locations) and, per
metric id N, N.index (the call-tree nodes that have data) and N.data (for each such node,
one value per location, in location order), as Cube 4 writes them uncompressed.
"""

import json
import struct
import sys
import tarfile
import xml.etree.ElementTree as ET

# scout's metric -> perfweave's
PAIRS = [
    ("mpi_latesender", "mpi_latesender"),
    ("mpi_latereceiver", "mpi_latereceiver"),
    ("mpi_barrier_wait", "mpi_barrier_wait"),
    ("mpi_wait_nxn", "mpi_wait_nxn"),
    ("critical_path", "critical_path"),
    ("delay_latesender", "delay_latesender"),
    ("delay_latesender_longterm", "delay_latesender_longterm"),
    ("delay_latereceiver", "delay_latereceiver"),
    ("delay_latereceiver_longterm", "delay_latereceiver_longterm"),
    ("delay_barrier", "delay_barrier"),
    ("delay_barrier_longterm", "delay_barrier_longterm"),
    ("delay_n2n", "delay_n2n"),
    ("delay_n2n_longterm", "delay_n2n_longterm"),
    ("delay_12n", "delay_12n"),
    ("delay_12n_longterm", "delay_12n_longterm"),
    ("delay_n21", "delay_n21"),
    ("delay_n21_longterm", "delay_n21_longterm"),
    ("mpi_latebroadcast", "mpi_latebroadcast"),
    ("mpi_earlyreduce", "mpi_earlyreduce"),
    ("mpi_wait_indirect_latesender", "mpi_wait_indirect_latesender"),
    ("mpi_wait_propagating_ls", "mpi_wait_propagating_ls"),
]


def read_cubex(path):
    """{metric: {(rank, leaf region, depth): value}} of a .cubex."""
    with tarfile.open(path) as tar:
        files = {m.name: m for m in tar.getmembers()}
        root = ET.fromstring(tar.extractfile(files["anchor.xml"]).read())

        def blob(name):
            return tar.extractfile(files[name]).read() if name in files else None

        metrics = {}
        for m in root.iter("metric"):
            metrics[m.get("id")] = (m.findtext("uniq_name"), m.findtext("dtype"))
        regions = {r.get("id"): r.findtext("name") for r in root.iter("region")}
        cnodes = {}

        def walk(node, depth):
            for c in node.findall("cnode"):
                cnodes[int(c.get("id"))] = (regions[c.get("calleeId")], depth)
                walk(c, depth + 1)

        walk(root.find("program"), 0)
        ranks = []
        for lg in root.iter("locationgroup"):
            for loc in lg.findall("location"):
                ranks.append((int(loc.get("Id")), int(lg.findtext("rank"))))
        ranks = [r for _, r in sorted(ranks)]
        nloc = len(ranks)
        out = {}
        for mid, (name, dtype) in metrics.items():
            index, data = blob(f"{mid}.index"), blob(f"{mid}.data")
            if index is None or data is None:
                continue
            if data.startswith(b"ZCUBEX"):
                raise SystemExit(f"{path}: compressed Cube data is not read here")
            # index: "CUBEX.INDEX", int32 endianness mark, uint16 version, uint8 format,
            # then (sparse) uint32 count and the nodes
            pos = len(b"CUBEX.INDEX") + 4 + 2
            fmt = index[pos]
            pos += 1
            if fmt == 1:
                (n,) = struct.unpack_from("<I", index, pos)
                nodes = struct.unpack_from(f"<{n}I", index, pos + 4)
            else:
                nodes = sorted(cnodes)
            body = data[len(b"CUBEX.DATA") :]
            code = "q" if dtype == "INTEGER" else "d"
            vals = struct.unpack(f"<{len(nodes) * nloc}{code}", body[: 8 * len(nodes) * nloc])
            per = {}
            for i, cn in enumerate(nodes):
                leaf, depth = cnodes[cn]
                for j, rank in enumerate(ranks):
                    v = vals[i * nloc + j]
                    if v:
                        key = (rank, leaf, depth)
                        per[key] = per.get(key, 0) + v
            out[name] = per
    return out


def read_perfweave(path):
    """{metric: {(rank, leaf function, depth): value}} of perfweave analyze --json."""
    doc = json.load(open(path))
    paths = {}
    for cp in doc["callpaths"]:
        paths[cp["id"]] = (cp.get("function") or cp["labels"][-1], len(cp["labels"]) - 2)
    out = {}
    for m in doc["metrics"]:
        per = {}
        for p, r, v in m["values"]:
            leaf, depth = paths[int(p)]
            key = (int(r), leaf, depth)
            per[key] = per.get(key, 0) + v
        out[m["id"]] = per
    return out


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__)
    scout, pw = read_cubex(argv[1]), read_perfweave(argv[2])
    print(f"{'metric':32s} {'scout [s]':>12s} {'perfweave [s]':>14s}")
    for a, b in PAIRS:
        sa, sb = sum(scout.get(a, {}).values()), sum(pw.get(b, {}).values())
        if sa or sb:
            print(f"{a:32s} {sa:12.6f} {sb:14.6f}")
    for a, b in PAIRS:
        if not a.startswith(("delay", "critical")):
            continue
        rows = {}
        for src, d in ((0, scout.get(a, {})), (1, pw.get(b, {}))):
            for (r, leaf, _), v in d.items():
                rows.setdefault((r, leaf), [0.0, 0.0])[src] += v
        if not rows:
            continue
        print(f"\n{a}: rank, call path leaf, scout, perfweave (largest 8)")
        for (r, leaf), (x, y) in sorted(rows.items(), key=lambda kv: -max(kv[1]))[:8]:
            print(f"  {r:4d}  {leaf[:40]:40s} {x:12.6f} {y:12.6f}")


if __name__ == "__main__":
    main(sys.argv)
