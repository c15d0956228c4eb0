#!/usr/bin/env python3
"""Benchmark: how fast perfweave imports OTF2 (figures, not a test), the new path against the
old one in the same invocation.

  new: the OTF2 library's event reader calls the callbacks of libperfweave-otf2.so
       (runtime/interop/otf2_read.c), which put each event in numpy columns;
  old: one Python callback per event through the otf2 package (collector.Collector), what
       the import does where libperfweave-otf2.so is not built.

On
  1. the public Score-P traces of tests/data/otf2 (best of --repeat imports, alternating);
  2. archives that perfweave exports from generated experiments (bench/tracegen.py: a ring
     halo exchange, MPI_Allreduce and MPI_Barrier, 26 OTF2 events per rank and step), of
     --events events each (default 4 M, about a minute in all; --events 4000000,50000000
     for the large one too), on --ranks ranks (default 64);
  3. a Score-P-shaped MPI+OpenMP archive with metric events (8 ranks of 3 threads,
     --hybrid-events events, default 1 M): the threads, metrics and collectives that the
     ring archive lacks, where the old path was slowest (155 000 events/s before).
The old path runs only on archives of at most --old-max events (default 4 M): it takes
about a microsecond and a half and some 300 bytes per event (a Python tuple per event,
then the table), so 50 M events would take minutes and more memory than the development
machine has to spare.

Each import runs in a child process (fork): its peak resident memory above what it
started with (VmHWM, reset at the start, less VmRSS) is the import's memory. Whether both paths
made the same experiment is checked file by file. The generated archives are written
under --tmp (default: a new directory in /tmp, removed at the end unless --keep).

  .venv/bin/python bench/otf2_import.py [--events 4000000] [--ranks 64]
      [--old-max 4000000] [--repeat 3] [--old-repeat 1] [--hybrid-events 1000000]
      [--tmp DIR] [--keep]
"""

import argparse
import json
import os
import pickle
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tracegen  # noqa: E402
from perfweave.cli.analyze import keep_freed_memory
from perfweave.interop import otf2 as pw_otf2
from perfweave.interop.otf2 import bulk

SHARED = HERE.parent / "tests" / "data" / "otf2"  # public Score-P traces
EVENTS_PER_STEP = 26  # OTF2 events per rank and step of tracegen's ring exchange
_NOW = ("start_time", "start_epoch", "end_time", "end_epoch")  # the import's own clock


def _self_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _status(field):
    """A field of /proc/self/status in bytes (VmRSS, VmHWM), or None."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak():
    """Reset the process's peak RSS (VmHWM) to its RSS now (Linux 4.0+); False where it
    cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def in_child(fn):
    """fn() in a forked child: (its result, seconds, peak RSS in bytes above the RSS it
    started with, CPU seconds: user and system, which the machine's load changes less than
    seconds). The peak is the child's own, its VmHWM reset at the start: the parent's peak
    (the generation of an archive) would otherwise hide a smaller one; without that, the
    child's ru_maxrss above the parent's."""
    r, w = os.pipe()
    base = _self_rss()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        try:
            own = _reset_peak() and _status("VmRSS")
            t0 = time.perf_counter()
            out = fn()
            hwm = _status("VmHWM") if own else None
            msg = (out, time.perf_counter() - t0, None, hwm - own if hwm else None)
        except BaseException as e:  # reported by the parent
            msg = (None, 0.0, repr(e), None)
        with os.fdopen(w, "wb") as f:
            pickle.dump(msg, f)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        out, sec, err, peak = pickle.load(f)
    _, _, ru = os.wait4(pid, 0)
    if err:
        raise RuntimeError(f"the import failed: {err}")
    if peak is None:
        peak = max(ru.ru_maxrss * 1024 - base, 0)
    return out, sec, peak, ru.ru_utime + ru.ru_stime


def import_with(path, anchor, out):
    """Import anchor into out through the new ("c") or old ("py") path, in a child."""

    def run():
        keep_freed_memory()  # as perfweave import does
        if path == "py":
            os.environ["PERFWEAVE_LIBDIR"] = "/nonexistent"
        bulk.bulk_reader.cache_clear()
        assert (bulk.bulk_reader() is not None) == (path == "c")
        return pw_otf2.import_archive(anchor, out)

    return in_child(run)


def same(a, b):
    """Whether experiments a and b hold the same files (experiment.json but the time of
    the import where the archive has none)."""
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    if fa != sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file()):
        return False
    for f in fa:
        x, y = (a / f).read_bytes(), (b / f).read_bytes()
        if f.name == "experiment.json":
            x, y = json.loads(x), json.loads(y)
            for k in _NOW:
                x.pop(k, None), y.pop(k, None)
        if x != y:
            return False
    return True


def mib(n):
    return f"{n / 2**20:7.0f}"


def compare(name, anchor, tmp, repeat, old=None):
    """Import anchor through both paths (repeat times the new one, old times the old one,
    alternating; None: repeat); prints a line per path: events, best time, events/s,
    reading alone, peak memory."""
    best = {}
    k = 0
    old = repeat if old is None else old
    for i in range(repeat):
        for path in ("c", "py") if i < old else ("c",):
            k += 1
            out = tmp / f"{name}-{path}-{k}"
            s, sec, rss, cpu = import_with(path, anchor, out)
            b = best.get(path)
            if b is None or sec < b[1]:
                if b is not None:
                    shutil.rmtree(b[3], ignore_errors=True)
                best[path] = (s, sec, rss, out, cpu)
            else:
                shutil.rmtree(out, ignore_errors=True)
    for path, (s, sec, rss, _, cpu) in best.items():
        label = "new (C)" if path == "c" else "old (Python)"
        ev = s["events"]
        per = f" = {rss / ev:5.0f} B/event" if ev >= 100_000 else ""
        print(
            f"  {name:24} {label:13} {ev:>11,} events {sec:8.3f} s {ev / sec:>11,.0f} events/s"
            f" (reading {ev / s['read_seconds']:>11,.0f}/s); CPU {cpu:7.2f} s"
            f" {ev / max(cpu, 1e-9):>11,.0f} events/CPU s; peak {mib(rss)} MiB{per}"
        )
    if "py" in best:
        c, p = best["c"], best["py"]
        print(
            f"  {'':24} new/old: {p[1] / c[1]:.2f}x the events/s, "
            f"{c[2] / max(p[2], 1):.2f}x the memory; same experiment: "
            f"{'yes' if same(c[3], p[3]) else 'NO'}"
        )
    for b in best.values():
        shutil.rmtree(b[3], ignore_errors=True)


def generated(tmp, events, ranks):
    """An OTF2 archive of about `events` events exported from a tracegen experiment (made
    once per size under tmp)."""
    steps = max(1, round(events / (ranks * EVENTS_PER_STEP)))
    d = tmp / f"ring-{ranks}x{steps}"
    anchor = d / "otf2" / "traces.otf2"
    if anchor.is_file():
        return anchor
    shutil.rmtree(d, ignore_errors=True)
    t0 = time.perf_counter()
    exp = d / "exp"
    nrec = tracegen.write(exp, ranks, ranks * steps * tracegen.PER_ITER)
    s = pw_otf2.export(exp, anchor)
    shutil.rmtree(exp)  # the experiment is not needed any more: disk
    size = sum(p.stat().st_size for p in anchor.parent.rglob("*") if p.is_file())
    print(
        f"  generated {ranks} ranks x {steps} steps: {nrec:,} records, {s['events']:,} "
        f"OTF2 events, {size / 2**20:.0f} MiB, in {time.perf_counter() - t0:.0f} s"
    )
    return anchor


HYBRID_EVENTS_PER_STEP = 12  # per rank and step: 4 per thread (3 threads), + 4 of the master's


def hybrid(tmp, events, ranks, nthreads=3):
    """A Score-P-shaped MPI+OpenMP archive with metrics of about `events` events, written
    with the otf2 package (made once per size under tmp): per rank a process with a master
    and nthreads - 1 OpenMP threads; each step, every thread enters and leaves a parallel
    region with a PAPI metric event at each (Score-P's synchronous-strict metrics), and
    the master calls MPI_Barrier (collective begin and end). What the import's
    thread, metric and collective callbacks read, where the ring archive has none."""
    import otf2
    from otf2.enums import (
        Base,
        GroupType,
        LocationGroupType,
        LocationType,
        MetricMode,
        MetricOccurrence,
        MetricType,
        Paradigm,
        RecorderKind,
        RegionRole,
        Type,
    )

    per_step = 4 * nthreads + 4
    steps = max(1, round(events / (ranks * per_step)))
    d = tmp / f"hybrid-{ranks}x{nthreads}x{steps}"
    anchor = d / "traces.otf2"
    if anchor.is_file():
        return anchor
    shutil.rmtree(d, ignore_errors=True)
    t0 = time.perf_counter()
    E, ns = otf2.events, 1_000_000_000
    with otf2.writer.open(str(d), archive_name="traces", timer_resolution=ns) as w:
        defs = w.definitions
        node = defs.system_tree_node("node0", class_name="node")
        region = {
            n: defs.region(n, paradigm=Paradigm.MPI, region_role=role)
            for n, role in (
                ("MPI_Init", RegionRole.FUNCTION),
                ("MPI_Barrier", RegionRole.BARRIER),
                ("MPI_Finalize", RegionRole.FUNCTION),
            )
        }
        par = defs.region(
            "!$omp parallel @solver.c:10", paradigm=Paradigm.OPENMP, region_role=RegionRole.PARALLEL
        )
        ins = defs.metric_member(
            "PAPI_TOT_INS", "", MetricType.PAPI, MetricMode.ACCUMULATED_START, Type.UINT64,
            Base.DECIMAL, 0, "#",
        )  # fmt: skip
        mc = defs.metric_class([ins], MetricOccurrence.SYNCHRONOUS_STRICT, RecorderKind.CPU)
        threads = []
        for r in range(ranks):
            lg = defs.location_group(
                f"MPI Rank {r}", location_group_type=LocationGroupType.PROCESS,
                system_tree_parent=node,
            )  # fmt: skip
            threads.append([
                defs.location(
                    "Master thread" if t == 0 else f"OMP thread {t}",
                    type=LocationType.CPU_THREAD, group=lg,
                )
                for t in range(nthreads)
            ])  # fmt: skip
        defs.group(
            "MPI ranks", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI,
            members=[th[0] for th in threads],
        )  # fmt: skip
        world = defs.comm(
            "MPI_COMM_WORLD",
            defs.group(
                "world", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                members=list(range(ranks)),
            ),
            None,
        )  # fmt: skip
        start, step_ns = ns, 10_000
        for r in range(ranks):
            for k, loc in enumerate(threads[r]):
                e = w.event_writer_from_location(loc)
                if k == 0:
                    e(E.Enter(start, region["MPI_Init"]))
                    e(E.Leave(start + 1000, region["MPI_Init"]))
                for i in range(steps):
                    t = start + 2000 + i * step_ns
                    e(E.Enter(t + 10, par))
                    e(E.Metric(t + 11, mc, [i * 100 + k]))
                    e(E.Metric(t + 5000 + r, mc, [i * 100 + k + 50]))
                    e(E.Leave(t + 5001 + r, par))
                    if k == 0:
                        b = t + 6000
                        e(E.Enter(b, region["MPI_Barrier"]))
                        e(E.MpiCollectiveBegin(b + 10))
                        e(E.MpiCollectiveEnd(
                            b + 900, otf2.CollectiveOp.BARRIER, world, 0xFFFFFFFF, 0, 0
                        ))  # fmt: skip
                        e(E.Leave(b + 1000, region["MPI_Barrier"]))
                if k == 0:
                    t = start + 2000 + steps * step_ns
                    e(E.Enter(t, region["MPI_Finalize"]))
                    e(E.Leave(t + 100, region["MPI_Finalize"]))
    n = ranks * (steps * per_step + 4)
    size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
    print(
        f"  generated {ranks} ranks x {nthreads} threads x {steps} steps: {n:,} OTF2 events "
        f"(metrics, threads, collectives), {size / 2**20:.0f} MiB, in "
        f"{time.perf_counter() - t0:.0f} s"
    )
    return anchor


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", default="4000000")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--old-max", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    # the old path takes 10 s on 4 M events: once keeps the default run near a minute
    ap.add_argument("--old-repeat", type=int, default=1)
    # the MPI+OpenMP archive with metrics is written through the otf2 package, about
    # 150 000 events/s: 1 M events keep it to seconds
    ap.add_argument("--hybrid-events", default="1000000")
    ap.add_argument("--tmp", type=Path)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if bulk.bulk_reader() is None:
        print("libperfweave-otf2.so has no import callbacks: make install first")
        return 1
    tmp = args.tmp or Path(tempfile.mkdtemp(prefix="pw-otf2-import."))
    tmp.mkdir(parents=True, exist_ok=True)
    # what every import loads once (the otf2 package and its library, modules imported on
    # first use) is loaded here, before the children fork: they time the import alone
    warm = SHARED / "pipit-ping-pong" / "traces.otf2"
    if warm.is_file():
        pw_otf2.import_archive(warm, tmp / "warm-up")
        shutil.rmtree(tmp / "warm-up")
    try:
        print(
            "OTF2 import, new path (C callbacks) against old (Python callbacks); "
            f"load average {os.getloadavg()[0]:.1f}"
        )
        print("Public Score-P traces (tests/data/otf2), best of", max(args.repeat, 5))
        for name in ("casita-10-ranks-tags", "pipit-ping-pong"):
            anchor = SHARED / name / "traces.otf2"
            if anchor.is_file():
                compare(name, anchor, tmp, max(args.repeat, 5))
            else:
                print(f"  {name:24} missing ({anchor})")
        for events in (int(x) for x in args.events.split(",") if x):
            print(
                f"\nGenerated archive of about {events:,} events, best of {args.repeat} "
                f"(old path: of {args.old_repeat})"
            )
            anchor = generated(tmp, events, args.ranks)
            old = events <= args.old_max
            compare(f"ring {events / 1e6:g} M", anchor, tmp, args.repeat, args.old_repeat * old)
            if not old:
                print(f"  {'':24} old path not run: more than --old-max {args.old_max:,} events")
        for events in (int(x) for x in args.hybrid_events.split(",") if x):
            print(
                f"\nMPI+OpenMP archive with metrics of about {events:,} events, best of "
                f"{args.repeat} (old path: of {args.old_repeat})"
            )
            anchor = hybrid(tmp, events, 8)
            old = events <= args.old_max
            compare(f"hybrid {events / 1e6:g} M", anchor, tmp, args.repeat, args.old_repeat * old)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
