"""perfweave boundness against a program of two routines of known character, each timed
by the program's own clocks in every run (programs/boundness.c): a STREAM triad over
arrays larger than a core's own caches, judged bandwidth-bound where the program's own
clock shows the stressor slowing it, and a register-only chain of dependent fused
multiply-adds, judged compute-bound; the CPU time the tool
gives each routine against the program's own CPU clock, in the same runs; the result read
back through perfweave.open (the directory, a run of it); the one-line errors a user can
cause.

Why arrays of 3 x 8 MiB and not larger than the last-level cache: on the 2-core test
machine (a VM of a 300 MiB-L3 socket) one core cannot load the memory system, so a
co-runner on the other core does not slow a triad from memory at all (measured: within
2 %, docs/boundness.md "What this machine lacks"); what it does take is the shared
cache, from a working set that lives there when the program runs alone."""

import json
import subprocess

import numpy as np

import perfweave
from perfweave.analysis.boundness import HIGH, LOW
from harness import PERFWEAVE

ROUNDS = 5  # fewer leave the FMA chain's interval too wide to judge (undetermined)
# triad passes, MiB per array, fused multiply-adds: about 0.2 s of CPU time each alone
ARGS = ["150", "8", "50000000"]


def boundness(*args, timeout=240):
    return subprocess.run(
        [PERFWEAVE, "boundness", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def truth(path):
    """The program's own lines, one per run in the order they ran: a discarded first
    baseline run, then baseline and stressor runs in turn: {variant: [{key: seconds}]}."""
    rows = [ln.split() for ln in path.read_text().splitlines()]
    runs = [dict(zip(r[0::2], map(float, r[1::2]))) for r in rows]
    assert len(runs) == 1 + 2 * ROUNDS, runs
    return {"baseline": runs[1::2], "stressor": runs[2::2]}


def test_triad_is_bandwidth_bound_and_the_fma_chain_compute_bound(build, tmp_path):
    prog = build(None, "boundness.c", ("-O2",))
    own = tmp_path / "own.txt"
    out = tmp_path / "b"
    proc = boundness(
        "-r", ROUNDS, "-o", out, "--json", "--run-options", "--sample-interval-ms 2",
        "--", prog, *ARGS, own,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert json.loads((out / "boundness.json").read_text()) == doc
    seen = truth(own)
    # the result, read back through the Python API: the directory opens as its first
    # baseline run, whose dataset is the result
    exp = perfweave.open(out)
    assert exp.path.name == "baseline-1"
    result = exp.boundness
    routines = exp.table("boundness", "routines").set_index("routine")
    # each routine's CPU time, the thread's CPU clock shared by its samples' wall time,
    # against the program's own CPU clock around the routine's calls in the same runs
    # (means over rounds): within 4 binomial standard deviations of the routine's share
    # of its samples, and 10 % (the rest of the thread's CPU time, start-up and exit,
    # is small and shared alike)
    for routine, key in (("triad", "triad_cpu"), ("fma_chain", "fma_cpu")):
        row = routines.loc[routine]
        for variant in ("baseline", "stressor"):
            expected = np.mean([r[key] for r in seen[variant]])
            runs = [r for r in doc["runs"] if r["variant"] == variant]
            cpu = np.mean([r["cpu_s"] for r in runs])
            samples = sum(r["samples"] for r in runs)
            share = expected / cpu
            bound = 4 * np.sqrt(share * (1 - share) / samples) * cpu + 0.10 * expected
            got = row[f"{variant}_cpu_s"]
            assert abs(got - expected) <= bound, (routine, variant, got, expected, bound)
    # the program's own slowdowns (its CPU clock) inside the tool's intervals
    own = {}
    for routine, key in (("triad", "triad_cpu"), ("fma_chain", "fma_cpu")):
        own[routine] = np.mean([r[key] for r in seen["stressor"]]) / np.mean(
            [r[key] for r in seen["baseline"]]
        )
        row = routines.loc[routine]
        assert row["slowdown_lo"] <= own[routine] * 1.05, (routine, own[routine], row)
        assert row["slowdown_hi"] >= own[routine] / 1.05, (routine, own[routine], row)
    # the verdicts (the rule: analysis/boundness.py) against the program's own clock. The
    # FMA chain, in registers, is never slowed: compute-bound. The triad's slowdown is the
    # shared cache the stressor takes from it; on a machine whose other work already takes
    # it between the program's time slices (docs/boundness.md "A busy machine hides it")
    # the program's own clock shows less or none, and the verdict must say what that clock
    # says: bandwidth-bound where it shows a clear slowdown, compute-bound where it shows
    # none, and in between not compute-bound where it shows one past LOW.
    on_core = np.mean([r["on_core"] for r in doc["runs"] if r["variant"] == "baseline"])
    why = (
        f"the program's own clock: triad {own['triad']:.2f} x, fma_chain "
        f"{own['fma_chain']:.2f} x beside the stressor; alone it was on a core "
        f"{100 * on_core:.0f} % of its time"
    )
    assert own["fma_chain"] < LOW, why  # the program's ground truth: not slowed
    assert result.verdict("fma_chain") == "compute-bound", why
    triad = result.verdict("triad")
    if own["triad"] >= HIGH * 1.1:
        assert triad == "bandwidth-bound", why
    elif own["triad"] <= LOW / 1.1:
        assert triad == "compute-bound", why
    elif own["triad"] >= LOW * 1.1:
        assert triad != "compute-bound", why
    # the stressor ran beside every stressed run, and moved bytes; what was not varied is
    # said
    assert all(r["stressor"]["bytes_per_s"] > 0 for r in doc["runs"] if r["variant"] == "stressor")
    assert doc["setup"]["stressor"]["bytes"] >= 4 * doc["setup"]["machine"]["llc_bytes"]
    assert any("frequency" in t for t in doc["not_available"])
    # every run is an experiment of its own, with its samples
    for r in doc["runs"]:
        run = perfweave.open(out / r["experiment"])
        assert len(run.samples()) > 0 and run.boundness.rounds == ROUNDS
    # the report of the directory shows the section
    text = subprocess.run(
        [PERFWEAVE, "report", str(out)], capture_output=True, text=True, timeout=120
    )
    assert text.returncode == 0, text.stderr
    assert "Bandwidth- or compute-bound" in text.stdout and triad in text.stdout


def one_line_error(proc):
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_errors_are_one_line(tmp_path):
    assert "no command" in one_line_error(boundness("-o", tmp_path / "a"))
    assert "2 rounds" in one_line_error(boundness("-r", "1", "--", "true"))
    assert "exit status 3" in one_line_error(
        boundness("-o", tmp_path / "b", "--", "sh", "-c", "exit 3")
    )
    assert not (tmp_path / "b").exists()  # a failed measurement leaves no directory
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x").write_text("")
    assert "already exists" in one_line_error(boundness("-o", tmp_path / "c", "--", "true"))
    assert "cores" in one_line_error(
        boundness("-o", tmp_path / "d", "--stressor-cores", "4096", "--", "sleep", "0.05")
    )
    assert "not found" in one_line_error(boundness("-o", tmp_path / "e", "--", "no-such-prog-x"))
