"""Compare perfweave's root-cause analysis with Scalasca's scout on the same trace.

    python bench/scout_compare.py scout.cubex perfweave-analysis.json
    python bench/scout_compare.py --scout PATH/scout.mpi [--dir DIR]

The second form runs the whole comparison of docs/performance.md ("Root causes against
Scalasca") end to end: builds tests/runtime/programs/rootcause.c, ws_p2p.c and
ws_coll.c with Open MPI's mpicc, runs the five experiments under `perfweave run
--trace`, exports each to OTF2, runs scout on the export (one process per rank) and
`perfweave analyze --json` on the experiment, and prints one table of the metrics both
compute (the rows of docs/performance.md's table) and each comparison's details.

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

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "runtime" / "programs"
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
# (name, program, argument, ranks): the experiments of docs/performance.md's table
RUNS = [
    ("two", "rootcause", "two", 2),
    ("chain", "rootcause", "chain", 4),
    ("pipeline", "rootcause", "pipeline", 4),
    ("ws_p2p", "ws_p2p", None, 3),
    ("ws_coll", "ws_coll", None, 4),
]
# rows of the table: (metric, label); a delay shows its short- and long-term costs
TABLE = [
    ("mpi_latesender", "Late Sender"),
    ("mpi_latereceiver", "Late Receiver"),
    ("mpi_barrier_wait", "Wait at Barrier"),
    ("mpi_wait_nxn", "Wait at N x N"),
    ("mpi_latebroadcast", "Late Broadcast"),
    ("mpi_earlyreduce", "Early Reduce"),
    ("critical_path", "Critical path"),
    ("delay_latesender", "Late Sender delay, short / long"),
    ("delay_latereceiver", "Late Receiver delay, short / long"),
    ("delay_barrier", "Barrier delay, short / long"),
    ("delay_n2n", "N x N delay, short / long"),
    ("delay_12n", "1-to-N delay, short / long"),
    ("delay_n21", "N-to-1 delay, short / long"),
]

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


def details(scout, pw):
    """Totals of the metrics both compute, then per (rank, call path leaf) the largest
    delay costs and critical-path times of both."""
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


def table_rows(name, scout, pw):
    """The rows of docs/performance.md's table for one experiment (markdown)."""

    def total(d, m):
        return sum(d.get(m, {}).values())

    def fmt(v):
        return "0" if abs(v) < 5e-7 else f"{v:.6f}"

    out = []
    for m, label in TABLE:
        if m.startswith("delay"):
            a = (total(scout, m), total(scout, m + "_longterm"))
            b = (total(pw, m), total(pw, m + "_longterm"))
            cells = [f"{fmt(x[0])} / {fmt(x[1])}" for x in (a, b)]
        else:
            a, b = (total(scout, m),), (total(pw, m),)
            cells = [fmt(a[0]), fmt(b[0])]
        if max(a + b) < 1e-6:
            continue
        out.append(f"| {name if not out else ''} | {label} | {cells[0]} | {cells[1]} |")
    return out


def run(cmd, cwd=None, env=None, out=None):
    res = subprocess.run(
        cmd, cwd=cwd, env=env, stdout=out or subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    if res.returncode:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({res.returncode}):\n{res.stderr[-2000:]}")
    return res


def end_to_end(scout_bin, work):
    """Every experiment of RUNS: build, run, export, scout, analyze; the table."""
    scout_bin = Path(scout_bin).resolve()
    if not os.access(scout_bin, os.X_OK):
        sys.exit(f"{scout_bin}: not an executable (Scalasca's scout.mpi)")
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # waiting ranks yield the CPU (as tests/runtime/test_rootcause_runs.py runs them)
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    for prog in sorted({p for _, p, _, _ in RUNS}):
        src = PROGRAMS / f"{prog}.c"
        run(
            ["mpicc.openmpi", "-O1", "-g", f"-I{PROGRAMS}", str(src), "-o", str(work / prog), "-lm"]
        )
    rows = []
    for name, prog, arg, n in RUNS:
        exp, arch = work / f"exp-{name}", work / f"otf2-{name}"
        shutil.rmtree(exp, ignore_errors=True)
        shutil.rmtree(arch, ignore_errors=True)
        launch = ["mpirun.openmpi", "--oversubscribe", "-n", str(n), str(work / prog)]
        run(
            [PERFWEAVE, "run", "--trace", "-o", str(exp), "--"] + launch + ([arg] if arg else []),
            env=dict(env, RC_OUT=str(work / f"rc-{name}")),
        )
        run([PERFWEAVE, "export", "--format", "otf2", "-o", str(arch), str(exp)])
        mpirun = ["mpirun.openmpi", "--oversubscribe", "-n", str(n)]
        run(mpirun + [str(scout_bin), "traces.otf2"], cwd=arch, env=env)
        analysis = work / f"pw-{name}.json"
        with open(analysis, "w") as f:
            run([PERFWEAVE, "analyze", "--json", str(exp)], out=f)
        scout, pw = read_cubex(arch / "scout.cubex"), read_perfweave(analysis)
        print(f"\n== {name} ({n} ranks)")
        details(scout, pw)
        rows += table_rows(f"{prog} {arg}" if arg else prog, scout, pw)
    print("\n| experiment | metric | scout 2.6 | perfweave |\n| --- | --- | --- | --- |")
    print("\n".join(rows))


def main(argv):
    if len(argv) == 3 and not argv[1].startswith("-"):
        details(read_cubex(argv[1]), read_perfweave(argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scout", required=True, help="Scalasca's scout.mpi")
    ap.add_argument("--dir", default="scout-compare", help="where the runs go")
    a = ap.parse_args(argv[1:])
    end_to_end(a.scout, Path(a.dir).resolve())


if __name__ == "__main__":
    main(sys.argv)
