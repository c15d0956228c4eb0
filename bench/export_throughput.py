"""Throughput and peak memory of `perfweave export` against trace size.

For each size, a synthetic experiment (bench/tracegen.py: ring halo exchange, 17
records per rank and iteration) of SIZE records with --per-rank records per rank is
exported by a child process; the figures are the child's wall time (records/s), its CPU
time (records per CPU second: near the rate of one core of a quiet machine, the fairer
figure on a loaded one) and its peak resident memory (VmHWM of the child). Both
exports go rank by rank and read each rank in chunks: their memory should follow
neither the trace nor the records of a rank (--per-rank as large as --sizes gives one
rank).
Events are what the export writes: OTF2 events (more than records: a receive request
and its completion, a collective's begin and end), Chrome JSON events (fewer: a call's
sends and receives go in its "args", one arrow per message). Records are the trace's
events, the measure of its size.

Format otf2-each is the OTF2 export with one ctypes call per event, as where
libperfweave-otf2.so (its loop in C) is not built, and chrome-numpy the Chrome export
with its numpy formatter, as where libperfweave-json.so is not built: the baselines,
measured in the same invocation as the exports.

    python bench/export_throughput.py --sizes 1M,4M,16M --formats chrome,chrome-numpy,otf2

With --baseline PYTHON (the interpreter of another build), each export is also made by
that build, the two alternating --repeat times; the least wall and CPU time of each
and their ratios
(this build's records/s over the baseline's) are printed, and the ratio of the peak
memories (of the last run of each). The experiments are this build's bench/tracegen.py's
(trace format 5 since it writes compact records): a baseline must read them.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tracegen  # noqa: E402

CHILD = """
import re, sys, time
fmt, exp, out = sys.argv[1:4]
if fmt.startswith("chrome"):
    from perfweave.interop import chrome
    export = chrome.export
    # the formatter's library: interop/chrome/formatting.py, or interop/chrome.py in a
    # build from before the split (a --baseline)
    where, name = (chrome, "_json_rows") if hasattr(chrome, "_json_rows") else (
        __import__("perfweave.interop.chrome.formatting", fromlist=["x"]), "json_rows")
    if fmt == "chrome-numpy":
        setattr(where, name, lambda: None)
    else:
        assert getattr(where, name)() is not None, "libperfweave-json.so is not installed"
else:
    from perfweave.interop import otf2
    from perfweave.interop.otf2 import calls
    export = otf2.export
    if fmt == "otf2-each":
        calls.bulk_writer = lambda: None
    else:
        assert calls.bulk_writer() is not None, "libperfweave-otf2.so is not installed"
t, c = time.perf_counter(), time.process_time()
s = export(exp, out, force=True)
dt, cpu = time.perf_counter() - t, time.process_time() - c
# VmHWM: the peak of this image (ru_maxrss would include the parent's pages at the fork)
hwm = re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)
print(s["records"], s["events"], dt, cpu, hwm)
"""


def size(text):
    mult = {"k": 10**3, "M": 10**6, "G": 10**9}
    return int(float(text[:-1]) * mult[text[-1]]) if text[-1] in mult else int(text)


def run_export(fmt, exp, out, python=sys.executable):
    """(records, events written, seconds, CPU seconds, peak RSS in MiB) of one export
    in a child."""
    res = subprocess.run(
        [python, "-c", CHILD, fmt, str(exp), str(out)], capture_output=True, text=True
    )
    if res.returncode != 0:
        raise SystemExit(f"export {fmt} of {exp} failed: {res.stderr.strip()}")
    records, events, seconds, cpu, hwm = res.stdout.split()
    return int(records), int(events), float(seconds), float(cpu), int(hwm) / 1024


def same_output(a, b, name):
    """ "identical" when the files of directories a and b are byte for byte the same,
    but for an OTF2 anchor file (name: it holds a random trace id), else what differs."""
    files = [
        {str(p.relative_to(d)): p for p in sorted(d.rglob("*")) if p.is_file() and p.name != name}
        for d in (a, b)
    ]
    if files[0].keys() != files[1].keys():
        return f"DIFFERS: files {sorted(files[0].keys() ^ files[1].keys())}"
    differ = [k for k, p in files[0].items() if p.read_bytes() != files[1][k].read_bytes()]
    return f"DIFFERS: {differ}" if differ else "identical"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1M,4M,16M", help="trace sizes in records")
    ap.add_argument("--per-rank", type=size, default=250_000, help="records per rank")
    ap.add_argument("--formats", default="chrome,otf2,otf2-each")
    ap.add_argument(
        "--otf2-max",
        type=size,
        default=4_000_000,
        help="largest trace exported as otf2-each (one Python call into the "
        "OTF2 library per event)",
    )
    ap.add_argument("--baseline", metavar="PYTHON", help="another build's Python to compare with")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each build (the best counts)")
    ap.add_argument(
        "--dir",
        default=None,
        help="where to write (default: a temporary directory, removed at the end)",
    )
    a = ap.parse_args()
    base = Path(a.dir or tempfile.mkdtemp(prefix="pw-export-bench."))
    print(
        f"{'format':12} {'records':>11} {'ranks':>5} {'seconds':>8} {'records/s':>11} "
        f"{'events/s':>11} {'CPU s':>7} {'rec/CPU s':>11} {'ev/CPU s':>11} "
        f"{'peak MiB':>9}"
    )
    try:
        for n in (size(x) for x in a.sizes.split(",")):
            ranks = max(1, n // a.per_rank)
            exp = base / f"exp-{n}"
            shutil.rmtree(exp, ignore_errors=True)
            tracegen.write(exp, ranks, n)
            for fmt in a.formats.split(","):
                if fmt == "otf2-each" and n > a.otf2_max:
                    continue
                name = "trace.json" if fmt.startswith("chrome") else "t.otf2"
                builds = {"": sys.executable}
                if a.baseline:
                    builds = {"base ": a.baseline, "": sys.executable}
                best = {}
                for _ in range(a.repeat):
                    for label, python in builds.items():
                        # every export writes a new file: one that replaced the last
                        # run's output paid for freeing it (0.4-0.7 s for 16 M records
                        # as Chrome JSON), all but the first, the baseline's
                        out = base / f"out-{n}-{label.strip() or 'this'}" / name
                        shutil.rmtree(out.parent, ignore_errors=True)
                        out.parent.mkdir(parents=True)
                        got = run_export(fmt, exp, out, python)
                        if label in best:  # the least wall and CPU time, each of its own run
                            got = got[:2] + tuple(map(min, best[label][2:4], got[2:4])) + got[4:]
                        best[label] = got
                for label, (records, events, seconds, cpu, peak) in best.items():
                    print(
                        f"{label + fmt:12} {records:>11,} {ranks:>5} {seconds:>8.2f} "
                        f"{records / seconds:>11,.0f} {events / seconds:>11,.0f} "
                        f"{cpu:>7.2f} {records / cpu:>11,.0f} {events / cpu:>11,.0f} "
                        f"{peak:>9.0f}",
                        flush=True,
                    )
                if a.baseline:
                    (_, _, s0, c0, p0), (_, _, s1, c1, p1) = best["base "], best[""]
                    print(
                        f"{'':12} this/baseline: records/s x{s0 / s1:.3f}, "
                        f"records/CPU s x{c0 / c1:.3f}, peak MiB x{p1 / p0:.3f}, "
                        f"output {same_output(base / f'out-{n}-base', out.parent, name)}",
                        flush=True,
                    )
                for label in builds:
                    shutil.rmtree(base / f"out-{n}-{label.strip() or 'this'}", ignore_errors=True)
            shutil.rmtree(exp, ignore_errors=True)
    finally:
        if a.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
