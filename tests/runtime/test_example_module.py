"""The example module (runtime/modules/example.c, --example), the template of a runtime
module: its wrapper counts and times the program's sched_yield calls, and its dump writes
example/HOST.PID.json. The program counts its own calls and times its loops around them:
the file must hold exactly that count, from exactly its threads, and no more time than
the loops took. Off by default: no file, and the program sees the same results. The
module's data is read from its files and through the Python API (perfweave.open(...)
.example, the model, and .table("example", "per_process"), its analysis' table); the
report's example section is read from `perfweave report --json` and the text: the section
is part of the module's template, a subject here."""

import json

import numpy as np
import pytest

import perfweave
from harness import bare
from perfweave import _format

THREADS, CALLS = 3, 2000


def program_values(stdout):
    return {k: int(v) for k, v in (line.split() for line in stdout.splitlines())}


def test_example_module_counts_the_programs_calls(build, run_pw):
    prog = build(None, "yield_count.c", ("-pthread",))
    r = run_pw([prog, THREADS, CALLS], ["--example"])
    got = program_values(r.proc.stdout)
    assert got["calls"] == THREADS * CALLS and got["rc"] == 0
    files = list((r.exp / "example").iterdir())
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert files[0].name == f"{data['host']}.{got['pid']}.json"
    assert data["format"] == "perfweave-example" and data["version"] == 1
    assert list(data) == list(_format.JSON["example"])  # the writer writes what is declared
    assert data["function"] == "sched_yield" and data["state"] == "complete"
    assert (data["rank"], data["pid"]) == (-1, got["pid"])
    assert data["threads"] == THREADS  # the main thread made no call
    assert data["calls"] == THREADS * CALLS
    # each call is timed inside its thread's loop
    assert 0 < data["max_ns"] <= data["total_ns"] <= got["loop_ns"]
    # the same through the module's reader, and in the report's section
    ex = perfweave.open(r.exp).example
    (p,) = ex.processes
    assert (p.rank, p.pid, p.threads, p.calls) == (-1, got["pid"], THREADS, THREADS * CALLS)
    assert ex.function == "sched_yield" and ex.job is None and not ex.notes
    rep = r.report()["example"]
    assert (rep["calls"], rep["threads"], rep["processes"]) == (THREADS * CALLS, THREADS, 1)
    assert rep["time_s"] == pytest.approx(data["total_ns"] / 1e9)
    assert f"  {THREADS * CALLS:,} calls in {THREADS} threads of 1 process: " in r.text_report()
    # its analysis' table as a DataFrame: the one row of the process
    df = perfweave.open(r.exp).table("example", "per_process")
    assert list(df.columns) == [
        "rank", "host", "pid", "state", "threads", "calls", "time_s", "longest_call_s"
    ]  # fmt: skip
    assert df[["rank", "pid", "threads", "calls"]].values.tolist() == [
        [-1, got["pid"], THREADS, THREADS * CALLS]
    ]
    assert df["time_s"][0] == pytest.approx(data["total_ns"] / 1e9)
    # its record is the core's call-site tables: the profile lists the module's function
    # under its own id, and its call sites (one line of the program) with every call
    prof = perfweave.open(r.exp).profile
    ids = prof.function_ids("example")
    assert [prof.functions[i] for i in ids] == ["sched_yield"]
    assert [prof.families[i] for i in ids] == ["other"]  # it names no MPI family
    s = prof.sites[np.isin(prof.sites["fn"], ids)]
    assert int(s["count"].sum()) == THREADS * CALLS and len(s) == THREADS
    assert {prof.objects[o] for o in s["object"]} == {str(prog)}
    assert len(set(s["offset"])) == 1


def test_example_module_off_by_default(build, run_pw):
    prog = build(None, "yield_count.c", ("-pthread",))
    ref = program_values(bare([prog, THREADS, CALLS]).stdout)
    r = run_pw([prog, THREADS, CALLS])
    got = program_values(r.proc.stdout)
    assert (got["calls"], got["rc"]) == (ref["calls"], ref["rc"]) == (THREADS * CALLS, 0)
    assert not (r.exp / "example").exists()
    assert not perfweave.open(r.exp).example and "example" not in r.report()
    assert "Example module" not in r.text_report()


def test_example_module_per_rank_and_job_files(mpi, build, run_pw):
    """Under MPI: one file per rank with that rank's own calls (those its MPI library
    makes inside MPI calls are not the program's), and the module's reduce at
    MPI_Finalize writes the job's sum, gathered through the job the MPI module gives."""
    prog = build(mpi, "yield_ranks.c")
    r = run_pw(mpi.launch(2) + [prog, 1000], ["--example"])
    mine = {}
    for line in r.proc.stdout.splitlines():
        _, rank, _, calls, _, rc = line.split()
        assert rc == "0"
        mine[int(rank)] = int(calls)
    assert mine == {0: 1000, 1: 2000}
    files = sorted(p.name for p in (r.exp / "example").iterdir())
    assert files == ["job.json", "rank-0.json", "rank-1.json"]
    for rank, calls in mine.items():
        data = json.loads((r.exp / "example" / f"rank-{rank}.json").read_text())
        assert (data["rank"], data["state"], data["calls"]) == (rank, "complete", calls)
        assert data["threads"] == 1
    job = json.loads((r.exp / "example" / "job.json").read_text())
    assert job["format"] == "perfweave-example-job" and job["version"] == 1
    assert list(job) == list(_format.JSON["example_job"])
    assert (job["ranks"], job["reported"], job["calls"], job["threads"]) == (2, 2, 3000, 2)
    # the same ticks, converted at MPI_Finalize (job) and at exit (ranks): the tick rate
    # is calibrated over the run, so the ns may differ in the last digits
    per_rank = [json.loads((r.exp / "example" / f"rank-{k}.json").read_text()) for k in mine]
    assert job["total_ns"] == pytest.approx(sum(d["total_ns"] for d in per_rank), rel=1e-4)
    assert job["max_ns"] == pytest.approx(max(d["max_ns"] for d in per_rank), rel=1e-4)
    # the profile: the example module registered first (its library is the core's), the
    # MPI module's functions follow it, and each analysis takes its own module's ids
    prof = perfweave.open(r.exp).profile
    assert [m["name"] for m in prof.modules] == ["example", "mpi"]
    assert prof.module("mpi")["first"] == 1 and prof.module("mpi")["flavor"] == mpi.name
    s = prof.sites[np.isin(prof.sites["fn"], prof.function_ids("example"))]
    assert {int(k): int(s["count"][s["rank"] == k].sum()) for k in (0, 1)} == mine
    mpi_fns = {prof.functions[f] for f in prof.sites["fn"]} - {"sched_yield"}
    assert mpi_fns and all(f.startswith("MPI_") for f in mpi_fns)
    funcs = {f["name"] for f in r.report()["mpi_profile"]["functions"]}
    assert "sched_yield" not in funcs and funcs <= mpi_fns
    ex = perfweave.open(r.exp).example
    assert [(p.rank, p.calls) for p in ex.processes] == [(0, 1000), (1, 2000)]
    assert ex.job["calls"] == 3000 and ex.job["reported"] == 2
    rep = r.report()["example"]
    assert (rep["ranks"], rep["calls"]) == (2, 3000)
    assert [p["rank"] for p in rep["per_process"]][0] in (0, 1)
    text = r.text_report()
    assert "  3,000 calls in 2 threads of 2 ranks: " in text and "rank 1" in text
