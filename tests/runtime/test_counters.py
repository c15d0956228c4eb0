"""PAPI counters at MPI call boundaries (perfweave run --counters) against ground
truth: page faults a program causes between two barriers, at the right call site. The
counts are read through the Python API (perfweave.open: mpi_callsites()' EVENT_inside and
EVENT_before, mpi_ranks()' EVENT); the wall time the counts cover and the rates per
second are the report's (its counter-rate table), read from `perfweave report --json`."""

import json
import os
import re
import subprocess
import sys

import pytest

import perfweave
from harness import PERFWEAVE, callsites, site_lines
from perfweave.papi import core_pmus, open_papi

PAGES = 20000
FAULTS, CLOCK = "perf::PAGE-FAULTS", "perf::TASK-CLOCK"


def by_line(exp, source, marker, function="MPI_Barrier"):
    """The row of exp.mpi_callsites() of function at the marked line of source."""
    line = site_lines(source)[marker]
    [site] = [s for s in callsites(exp, function) if s["line"] == line]
    return site


def report_site(mpi_profile, source, marker, function="MPI_Barrier"):
    """The call site of function at the marked line in the report's mpi_profile."""
    line = site_lines(source)[marker]
    [site] = [
        c
        for c in mpi_profile["callsites"]
        if c["function"] == function and c["location"]["line"] == line
    ]
    return site


@pytest.mark.parametrize(
    "multiplex,interval",
    [(False, None), (True, None), (False, "0")],
    ids=["plain", "multiplexed", "every-call"],
)
def test_page_faults_at_the_right_call_site(mpi, build, run_pw, multiplex, interval):
    prog = build(mpi, "pagefaults.c")
    opts = ["--counters", "perf::PAGE-FAULTS,perf::TASK-CLOCK"]
    if multiplex:
        opts.append("--counters-multiplex")
    if interval is not None:  # default: reads at least 100 us apart
        opts += ["--counters-interval-us", interval]
    r = run_pw(mpi.launch(3) + [prog, PAGES], opts)
    assert f"touched {PAGES} pages" in r.proc.stdout
    # where PAPI cannot multiplex (software events of this VM) it says so and counts anyway
    assert (
        not multiplex
        or "multiplex" not in r.proc.stderr
        or "counting them without" in r.proc.stderr
    )
    exp = r.open()
    assert exp.profile.counters == [FAULTS, CLOCK]
    touched = by_line(exp, "pagefaults.c", "touched")
    quiet = by_line(exp, "pagefaults.c", "quiet")
    # one fault per page on each of the 3 ranks, counted before the second barrier
    assert 3 * PAGES <= touched[f"{FAULTS}_before"] <= 1.1 * 3 * PAGES, touched
    assert touched[f"{FAULTS}_inside"] < 0.05 * 3 * PAGES
    assert quiet[f"{FAULTS}_before"] + quiet[f"{FAULTS}_inside"] < 0.05 * 3 * PAGES, quiet
    for p in exp.mpi_ranks().to_dict("records"):
        assert PAGES <= p[FAULTS] <= 1.1 * PAGES + 500
        assert p[CLOCK] > 0
    if interval == "0":  # every call read: each barrier has its own time inside
        assert quiet[f"{CLOCK}_inside"] > 0
    # rates: per second of the wall time the counts cover. The ranks timed the stretch
    # between the barriers themselves (wall and CPU: 3 ranks on 2 cores get ~2/3 of a
    # CPU each, far less beside other work). Reading at every call, the counts cover
    # that stretch, a few instructions outside the ranks' clock readings: 5 % or 2 ms a
    # rank. Reads at least 100 us apart may skip the first barrier's (MPICH's is shorter
    # than that): then they cover more, never less. A thread never counts more CPU time
    # than wall time: TASK-CLOCK per second at most 1e9, and 5 % for multiplexing
    stretch = {
        int(k): (float(w), float(c))
        for k, w, c in re.findall(r"^stretch (\d) ([\d.]+) ([\d.]+)$", r.proc.stdout, re.M)
    }
    assert set(stretch) == {0, 1, 2}, r.proc.stdout
    wall, cpu = (sum(v[i] for v in stretch.values()) for i in (0, 1))
    site = report_site(r.report()["mpi_profile"], "pagefaults.c", "touched")
    cover = site["counters_time_s"]
    rate = {ev: site["counters"][ev]["before_per_s"] for ev in (FAULTS, CLOCK)}
    cpu_ns = touched[f"{CLOCK}_before"]
    assert cover["inside"] >= 0
    if interval == "0":
        assert cover["before"] == pytest.approx(wall, rel=0.05, abs=0.006), (cover, stretch)
        assert cpu_ns / 1e9 == pytest.approx(cpu, rel=0.05, abs=0.006), (cpu_ns, stretch)
    else:
        assert cover["before"] >= 0.95 * wall - 0.006, (cover, stretch)
        assert cpu_ns / 1e9 >= 0.95 * cpu - 0.006, (cpu_ns, stretch)
    assert rate[CLOCK] <= 1.05e9, (rate, cover)
    assert rate[CLOCK] == pytest.approx(cpu_ns / cover["before"])
    assert rate[FAULTS] == pytest.approx(touched[f"{FAULTS}_before"] / cover["before"])
    text = r.text_report()
    assert "Counters per call site" in text and "perf::PAGE-FAULTS before" in text
    assert "Counter rates per call site" in text and "perf::PAGE-FAULTS/s before" in text


def test_unknown_event_stops_before_the_run(tmp_path):
    exp = tmp_path / "never"
    res = subprocess.run(
        [
            PERFWEAVE,
            "run",
            "-o",
            str(exp),
            "--counters",
            "perf::PAGE-FAULTS,NO_SUCH_EVENT",
            "--",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and not exp.exists()
    assert res.stderr.count("\n") == 1 and "NO_SUCH_EVENT is not an event here" in res.stderr


def test_without_counters_the_profile_has_none(mpi, build, run_pw):
    prog = build(mpi, "pagefaults.c")
    r = run_pw(mpi.launch(2) + [prog, 100])
    exp = r.open()
    counted = [c for c in exp.mpi_callsites().columns if c.endswith(("_inside", "_before"))]
    assert exp.profile.counters == [] and counted == []


NOT_HERE = "perf::TASK-CLOCK,PAPI_TOT_INS,perf::PAGE-FAULTS"
# the reason given on a processor libpfm4 does not know ("libpfm4 [RELEASE] does not know
# this processor ...")
UNKNOWN = re.compile(r"libpfm4( [\d.]+)? does not know this processor")


@pytest.fixture
def unknown_processor(monkeypatch):
    """This machine as one libpfm4 does not know, whatever it is: the core PMUs libpfm4
    detects here disabled for libpfm4 (LIBPFM_DISABLED_PMUS, read by every libpfm4 of
    perfweave's processes and the program's). PAPI's perf_event component is then
    disabled ("no default PMU found"; on a processor libpfm4 does not know, as Zen 5 with
    Debian 12's libpfm4 4.13, there is nothing to disable): PAPI_TOT_INS cannot be counted
    on any machine, with or without hardware counters, and PAPI knows no perf:: event:
    perfweave counts them itself."""
    lib, why = open_papi()
    assert lib is not None, why
    detected = core_pmus(lib)
    assert detected is not None, "libpfm4's functions not found through PAPI"
    if detected:
        monkeypatch.setenv("LIBPFM_DISABLED_PMUS", ",".join(detected))


def check_counted_as_measured(stdout, exp):
    """cpu_pages.c's own measures (getrusage, pages touched) against the counters of the
    call site after them: TASK-CLOCK and PAGE-FAULTS counted, PAPI_TOT_INS not"""
    mine = {}
    for line in stdout.splitlines():
        _, rank, _, cpu, _, pages = line.split()
        mine[int(rank)] = (int(cpu), int(pages))
    assert sorted(mine) == [0, 1]
    assert exp.profile.counters == [CLOCK, FAULTS]
    done = by_line(exp, "cpu_pages.c", "done")
    # the CPU time between the barriers, by the program's getrusage, summed over ranks
    # (~0.8 s): TASK-CLOCK counts the same thread over the same stretch, plus the few
    # instructions from the first barrier's exit to the program's reading
    cpu = sum(c for c, _ in mine.values())
    assert 0.97 * cpu <= done[f"{CLOCK}_before"] <= 1.03 * cpu + 10e6, (done, cpu)
    pages = sum(p for _, p in mine.values())
    assert pages <= done[f"{FAULTS}_before"] <= 1.1 * pages + 200, done


def test_an_event_that_cannot_be_counted_leaves_the_others(mpi, build, run_pw, unknown_processor):
    """PAPI_TOT_INS is a name PAPI knows but cannot count on a processor libpfm4 does not
    know (PAPI's perf_event component is disabled), and an event set holding it cannot
    start: it used to zero every counter. Now it alone is left out, named in one line for
    the whole run, with the reason, and in the experiment, and the others (the kernel's
    software events, which PAPI does not know here: perfweave counts them itself) count
    what the program measures itself."""
    prog = build(mpi, "cpu_pages.c")
    r = run_pw(
        mpi.launch(2) + [prog, "0.4", "5000"],
        ["--counters", NOT_HERE, "--counters-interval-us", "0"],
    )
    said = [l for l in r.proc.stderr.splitlines() if "PAPI_TOT_INS" in l]
    assert len(said) == 1 and "not counted" in said[0], r.proc.stderr
    assert UNKNOWN.search(said[0]), said
    exp = r.open()
    [left_out] = exp.meta["counters_not_counted"]
    assert left_out["event"] == "PAPI_TOT_INS" and UNKNOWN.search(left_out["why"]), left_out
    check_counted_as_measured(r.proc.stdout, exp)
    assert "Counters not counted" in r.text_report() and "PAPI_TOT_INS" in r.text_report()


# perfweave run without its check of the events before the run (cli/run.py): the runtime
# alone, as on a node unlike the one the run was started from
RUNTIME_ONLY = """
import argparse, sys
from perfweave import options
from perfweave.launch import run
p = argparse.ArgumentParser()
options.add_arguments(p)
p.add_argument("command", nargs="+")
ns = p.parse_args(sys.argv[1:])
sys.exit(run.run(ns.command, options.values(ns))[1])
"""


def test_the_runtime_leaves_out_an_event_it_cannot_count(mpi, build, tmp_path, unknown_processor):
    prog = build(mpi, "cpu_pages.c")
    exp = tmp_path / "exp"
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            RUNTIME_ONLY,
            "-o",
            str(exp),
            "--counters",
            NOT_HERE,
            "--counters-interval-us",
            "0",
            "--",
            *mpi.launch(2),
            prog,
            "0.4",
            "5000",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0, res.stderr
    # one line for the run (rank 0 speaks), not one per rank
    said = [l for l in res.stderr.splitlines() if "PAPI_TOT_INS" in l]
    assert len(said) == 1 and "cannot be counted here" in said[0], res.stderr
    assert UNKNOWN.search(said[0]), said
    check_counted_as_measured(res.stdout, perfweave.open(exp))


def test_components_say_perfweave_counts_the_kernel_events(unknown_processor):
    """perfweave components on a processor libpfm4 does not know: why PAPI counts no
    hardware events or presets, and the perf:: events perfweave counts itself."""
    out = subprocess.run(
        [PERFWEAVE, "components", "--json"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    [papi] = [s for s in json.loads(out.stdout)["sources"] if s["source"] == "papi"]
    assert papi["available"] and UNKNOWN.search(papi["detail"]), papi
    assert "perfweave counts the kernel's software events itself" in papi["detail"]
    [ours] = [i for i in papi["items"] if i.startswith("perf:: events counted by perfweave")]
    assert {"TASK-CLOCK", "PAGE-FAULTS"} <= set(ours.split(": ", 1)[1].split(", ")), ours


def test_the_program_sees_its_own_environment(run_pw, unknown_processor):
    """perfweave counts the kernel's events itself rather than steering libpfm4 (no
    LIBPFM_FORCE_PMU or such in the program's environment, which its own PAPI would read)."""
    r = run_pw(["env"], ["--counters", "perf::PAGE-FAULTS"])
    mine = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("LIBPFM"))
    theirs = sorted(l for l in r.proc.stdout.splitlines() if l.startswith("LIBPFM"))
    assert theirs == mine
    assert r.open().profile.counters == [FAULTS]
