"""The perfweave command: in-process through perfweave.cli.main (capsys), and as
the installed console script for exit codes and standard error."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from perfweave import options
from perfweave.cli import main

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
S = 1_000_000_000

FUNCS = {
    "functions": ["MPI_Init", "MPI_Send", "MPI_Allreduce", "MPI_Finalize"],
    "families": ["other", "p2p", "coll", "other"],
    "objects": ["/nonexistent/bin/solver"],
    "hosts": ["node01", "node02"],
    "world_size": 2,
    "mpi_library": "Open MPI v4.1.4, package: Debian",
    "mpi_flavor": "openmpi",
}


def perfweave(*args, cwd=None, timeout=60):
    return subprocess.run(
        [PERFWEAVE, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def one_error_line(stderr):
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("perfweave: error:"), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture
def mpi_exp(experiment_dir, pwprof):
    """Two ranks of 10 s; rank 0 3 s in MPI, rank 1 1 s. Allreduce 2 s + 1 s at
    solver+0x100, Send 1 s at solver+0x200 on rank 0."""
    exp = experiment_dir("mpi_exp", command=["mpirun", "-n", "2", "./solver"], wall_seconds=12.5)
    ranks = [
        dict(
            rank=r,
            host=r,
            pid=10 + r,
            app_ns=10 * S,
            mpi_ns=m,
            mpi_calls=c,
            t_init_enter=0,
            t_init_leave=S // 10,
            table_capacity=4096,
        )
        for r, m, c in ((0, 3 * S, 11), (1, 1 * S, 10))
    ]
    sites = [
        dict(
            rank=0,
            fn=2,
            object=0,
            offset=0x100,
            count=10,
            total_ns=2 * S,
            min_ns=S // 10,
            max_ns=S // 2,
            bytes_sent=80,
            bytes_recv=80,
        ),
        dict(
            rank=1,
            fn=2,
            object=0,
            offset=0x100,
            count=10,
            total_ns=S,
            min_ns=S // 20,
            max_ns=S // 5,
            bytes_sent=80,
            bytes_recv=80,
        ),
        dict(
            rank=0,
            fn=1,
            object=0,
            offset=0x200,
            count=1,
            total_ns=S,
            min_ns=S,
            max_ns=S,
            bytes_sent=4096,
        ),
        dict(rank=0, fn=0, object=0, offset=0x50, count=1, total_ns=S // 10),
        dict(rank=1, fn=0, object=0, offset=0x50, count=1, total_ns=S // 10),
    ]
    hist = [dict(rank=0, fn=1, bucket=13, count=1, bytes=4096, total_ns=S)]
    pwprof(exp / "profile.pwprof", FUNCS, ranks, sites, hist=hist)
    return exp


# ---- report, in process ----


def test_report_json(mpi_exp, capsys):
    assert main(["report", "--json", str(mpi_exp)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    data = json.loads(out)
    assert data["format"] == "perfweave-report"
    assert data["version"] == 2
    assert data["experiment"] == str(mpi_exp)
    assert data["command"] == ["mpirun", "-n", "2", "./solver"]
    assert data["wall_s"] == 12.5
    assert data["exit_status"] == {"code": 0}
    assert data["state"] == "complete"
    assert data["notes"] == []
    m = data["mpi_profile"]
    assert m["ranks"] == 2 and m["world_size"] == 2 and m["mpi"] is True
    assert m["hosts"] == ["node01", "node02"]
    assert [p["mpi_pct"] for p in m["per_rank"]] == pytest.approx([30.0, 10.0])
    assert [p["state"] for p in m["per_rank"]] == ["complete", "complete"]
    fns = {f["name"]: f for f in m["functions"]}
    assert set(fns) == {"MPI_Allreduce", "MPI_Send"}
    assert [f["name"] for f in m["functions"]] == ["MPI_Allreduce", "MPI_Send"]
    assert (fns["MPI_Allreduce"]["calls"], fns["MPI_Allreduce"]["time_s"]) == (20, 3.0)
    assert fns["MPI_Allreduce"]["app_pct"] == pytest.approx(15.0)
    assert fns["MPI_Allreduce"]["mpi_pct"] == pytest.approx(75.0)
    assert fns["MPI_Send"]["mean_bytes"] == 4096.0
    cs = m["callsites"]
    assert [c["function"] for c in cs] == ["MPI_Allreduce", "MPI_Send"]
    # per-rank times 2 and 1 s: mean 1.5, stdev 0.5
    assert cs[0]["cov"] == pytest.approx(1 / 3)
    assert cs[0]["where"] == "solver+0x100"  # module gone: module+offset
    assert cs[0]["per_rank_time_s"] == {"0": 2.0, "1": 1.0}  # JSON keys are strings
    assert m["message_sizes"] == [
        {
            "function": "MPI_Send",
            "bucket": 13,
            "min_bytes": 4096,
            "max_bytes": 8191,
            "calls": 1,
            "bytes": 4096,
            "time_s": 1.0,
        }
    ]


def test_report_text(mpi_exp, capsys):
    assert main(["report", str(mpi_exp)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"perfweave report: {mpi_exp}"
    assert "  command    mpirun -n 2 ./solver" in lines
    assert "  wall time  12.500s (launch to exit, exit code 0)" in lines
    assert "  ranks      2 on 2 hosts (node01, node02)" in lines
    assert "  MPI        Open MPI v4.1.4 (perfweave runtime: openmpi)" in lines
    assert "  state      complete" in lines
    # outside MPI: 7 s and 9 s -> 8 / 9
    assert "  outside MPI: Avg/Max 0.89 (1.00 = perfectly balanced computation)" in lines
    assert (
        "MPI functions by time (App%: of the app time summed over ranks; MPI%: of the MPI "
        "time)" in lines
    )
    row = next(x for x in lines if x.startswith("  MPI_Allreduce ") and "solver" not in x)
    assert row.split() == ["MPI_Allreduce", "20", "3.000s", "15.00", "75.00", "160B", "160B", "8B"]
    site = next(x for x in lines if "solver+0x200" in x)
    assert site.split()[:4] == ["2", "MPI_Send", "solver+0x200", "1"]


def test_report_top(mpi_exp, capsys):
    assert main(["report", "--top", "1", str(mpi_exp)]) == 0
    out = capsys.readouterr().out
    assert "  (1 more functions; --max-rows N or --full, or --top N)" in out
    assert "  (1 more call sites; --max-rows N or --full, or --top N)" in out


def test_report_partial_notes_in_json(experiment_dir, pwprof, capsys):
    exp = experiment_dir("partial_exp", exit_status={"signal": 9})
    pwprof(
        exp / "partial" / "rank-1.pwprof",
        dict(FUNCS, world_size=3),
        ranks=[dict(rank=1, state=2, app_ns=S, mpi_ns=S // 2)],
    )
    assert main(["report", "--json", str(exp)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["state"] == "partial"
    assert data["exit_status"] == {"signal": 9}
    assert "no data from 2 of 3 ranks: 0,2" in data["notes"]
    assert data["mpi_profile"]["per_rank"][0]["state"] == "abort"


def test_report_error_in_process(tmp_path, capsys):
    assert main(["report", str(tmp_path / "absent")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"perfweave: error: {tmp_path / 'absent'}: no such experiment directory\n"


def test_run_validation_in_process(capsys):
    assert main(["run", "--callsite-depth", "0", "--", "true"]) == 2
    assert capsys.readouterr().err == (
        "perfweave: error: --callsite-depth must be between 1 and 16\n"
    )
    assert main(["run", "--callsite-depth", "17", "--", "true"]) == 2
    assert main(["run", "--max-callsites", "15", "--", "true"]) == 2
    assert "--max-callsites must be at least 16" in capsys.readouterr().err


def test_argparse_errors_exit_2_in_process(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", "--callsite-depth", "many", "--", "true"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("perfweave: error: argument --callsite-depth: invalid int value")
    assert err.count("\n") == 1


def test_no_verb_prints_help(capsys):
    assert main([]) == 2
    assert "usage: perfweave" in capsys.readouterr().out


# ---- errors, as a command ----


def test_run_missing_program():
    res = perfweave("run", "--", "/nonexistent/prog")
    assert res.returncode == 2
    assert one_error_line(res.stderr) == "perfweave: error: /nonexistent/prog: program not found"
    assert res.stdout == ""


def test_run_bad_callsite_depth(tmp_path):
    res = perfweave("run", "-o", tmp_path / "e", "--callsite-depth", "0", "--", "true")
    assert res.returncode == 2
    assert one_error_line(res.stderr) == (
        "perfweave: error: --callsite-depth must be between 1 and 16"
    )
    assert not (tmp_path / "e").exists()


def test_run_unknown_option():
    res = perfweave("run", "--bogus", "--", "true")
    assert res.returncode == 2
    line = one_error_line(res.stderr)
    assert "unrecognized arguments: --bogus" in line


def test_run_unknown_mpi_flavor(tmp_path):
    res = perfweave("run", "--mpi", "lam", "-o", tmp_path / "e", "--", "true")
    assert res.returncode == 2
    assert "no perfweave runtime built for MPI 'lam'" in one_error_line(res.stderr)


def test_run_into_existing_experiment(mpi_exp):
    res = perfweave("run", "--mpi", "none", "-o", mpi_exp, "--", "true")
    assert res.returncode == 2
    assert one_error_line(res.stderr) == (
        f"perfweave: error: {mpi_exp}: already exists; choose another -o"
    )


def test_report_missing_directory():
    res = perfweave("report", "/nonexistent")
    assert res.returncode == 2
    assert one_error_line(res.stderr) == (
        "perfweave: error: /nonexistent: no such experiment directory"
    )


def test_report_corrupt_experiment_json(tmp_path):
    exp = tmp_path / "bad"
    exp.mkdir()
    (exp / "experiment.json").write_text('{"format": "perfweave-experiment", "vers')
    res = perfweave("report", exp)
    assert res.returncode == 2
    line = one_error_line(res.stderr)
    assert line.startswith(
        f"perfweave: error: {exp / 'experiment.json'}: corrupt experiment description ("
    )
    assert res.stdout == ""


def test_report_corrupt_profile(experiment_dir):
    exp = experiment_dir("trunc")
    (exp / "profile.pwprof").write_bytes(
        b'{"format":"perfweave-profile","version":1,"data_bytes":640}\n' + b"\0" * 100
    )
    res = perfweave("report", "--json", exp)
    assert res.returncode == 2
    assert "truncated" in one_error_line(res.stderr)


def test_report_json_as_command(mpi_exp):
    res = perfweave("report", "--json", mpi_exp)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["format"] == "perfweave-report"
    assert [f["name"] for f in data["mpi_profile"]["functions"]] == ["MPI_Allreduce", "MPI_Send"]


# ---- run --help ----


def test_run_help_lists_every_option():
    res = perfweave("run", "--help")
    assert res.returncode == 0
    help_text = " ".join(res.stdout.split())  # undo argparse's line wrapping
    assert help_text.startswith("usage: perfweave run [options] -- COMMAND...")
    spec = options.spec()
    assert {o["name"] for o in spec} >= {
        "output",
        "mpi",
        "callsite_depth",
        "max_callsites",
        "histograms",
        "clock_sync_rounds",
        "skip_exe",
        "catch_signals",
        "verbose",
    }
    for opt in spec:
        flag = "--" + opt["name"].replace("_", "-")
        assert flag in help_text, flag
        if opt.get("flag"):
            assert opt["flag"] + " " in help_text
        if opt["type"] == "bool":
            assert "--no-" + opt["name"].replace("_", "-") in help_text
        if opt.get("runtime"):
            assert "env PERFWEAVE_" + opt["name"].upper() in help_text, opt["name"]
        else:
            assert "PERFWEAVE_" + opt["name"].upper() not in help_text
    assert "env PERFWEAVE_CALLSITE_DEPTH" in help_text
    assert "(default: 4096) [env PERFWEAVE_MAX_CALLSITES]" in help_text


def test_runtime_env_from_options():
    env = options.runtime_env({"callsite_depth": 3, "histograms": False})
    assert env["PERFWEAVE_CALLSITE_DEPTH"] == "3"
    assert env["PERFWEAVE_HISTOGRAMS"] == "0"
    assert env["PERFWEAVE_MAX_CALLSITES"] == "4096"  # default
    assert env["PERFWEAVE_CATCH_SIGNALS"] == "1"
    assert "PERFWEAVE_OUTPUT" not in env
    assert env["PERFWEAVE_MPI"] == "auto"  # chosen in each process (mpi_loader.c)


# ---- run a program without MPI ----


def test_run_true(tmp_path):
    exp = tmp_path / "x"
    res = perfweave("run", "--mpi", "none", "-o", exp, "--", "true")
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    assert res.stderr.splitlines() == [
        f"perfweave: experiment {exp}",
        f"perfweave: experiment written to {exp} (perfweave report {exp})",
    ]
    meta = json.loads((exp / "experiment.json").read_text())
    assert meta["format"] == "perfweave-experiment" and meta["version"] == 1
    assert meta["command"] == ["true"]
    assert meta["state"] == "finished"
    assert meta["exit_status"] == {"code": 0}
    assert meta["mpi_flavor"] is None
    assert meta["options"]["mpi"] == "none"
    assert meta["options"]["callsite_depth"] == 1
    assert meta["wall_seconds"] >= 0
    # the preloaded core wrote this one process's profile
    procs = list((exp / "procs").glob("*.pwprof"))
    assert len(procs) == 1
    rep = perfweave("report", "--json", exp)
    assert rep.returncode == 0, rep.stderr
    data = json.loads(rep.stdout)
    assert data["state"] == "complete"
    assert data["mpi_profile"]["mpi"] is False
    assert data["mpi_profile"]["ranks"] == 1
    assert data["mpi_profile"]["functions"] == []
    text = perfweave("report", exp).stdout
    assert "  MPI        not used (one process without MPI)" in text.splitlines()


def test_run_passes_exit_code_through(tmp_path):
    res = perfweave("run", "--mpi", "none", "-o", tmp_path / "x", "--", "sh", "-c", "exit 7")
    assert res.returncode == 7
    meta = json.loads((tmp_path / "x" / "experiment.json").read_text())
    assert meta["exit_status"] == {"code": 7}
    assert meta["command"] == ["sh", "-c", "exit 7"]


def test_run_passes_output_through(tmp_path):
    res = perfweave(
        "run", "--mpi", "none", "-o", tmp_path / "x", "--", "sh", "-c", "echo out; echo err >&2"
    )
    assert res.returncode == 0
    assert res.stdout == "out\n"
    assert "err" in res.stderr.splitlines()


def test_run_passes_signal_through(tmp_path):
    res = perfweave("run", "--mpi", "none", "-o", tmp_path / "x", "--", "sh", "-c", "kill -TERM $$")
    assert res.returncode == -signal.SIGTERM
    meta = json.loads((tmp_path / "x" / "experiment.json").read_text())
    assert meta["exit_status"] == {"signal": signal.SIGTERM}


def test_default_experiment_name(tmp_path):
    res = perfweave("run", "--mpi", "none", "--", "true", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    made = [p.name for p in tmp_path.iterdir()]
    assert len(made) == 1
    # perfweave-<program>-<date>-<time>
    name = made[0]
    assert name.startswith("perfweave-true-20") and len(name) == len("perfweave-true-") + 15


def test_options_default_from_environment(monkeypatch):
    """A PERFWEAVE_<NAME> variable sets the option's default; the flag still wins."""
    import argparse

    from perfweave import options

    monkeypatch.setenv("PERFWEAVE_MAX_CALLSITES", "32")
    monkeypatch.setenv("PERFWEAVE_HISTOGRAMS", "0")
    p = argparse.ArgumentParser()
    options.add_arguments(p)
    v = options.values(p.parse_args([]))
    assert v["max_callsites"] == 32 and v["histograms"] is False
    assert options.runtime_env(v)["PERFWEAVE_MAX_CALLSITES"] == "32"
    assert options.runtime_env(v)["PERFWEAVE_HISTOGRAMS"] == "0"
    v = options.values(p.parse_args(["--max-callsites", "64", "--histograms"]))
    assert v["max_callsites"] == 64 and v["histograms"] is True


def test_bad_option_environment_is_one_line(monkeypatch):
    env = dict(os.environ, PERFWEAVE_MAX_CALLSITES="lots")
    res = subprocess.run([PERFWEAVE, "run", "--", "true"], capture_output=True, text=True, env=env)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "perfweave: error: PERFWEAVE_MAX_CALLSITES='lots': not an integer"
    ]
