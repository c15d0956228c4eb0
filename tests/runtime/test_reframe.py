"""perfweave.reframe under the real ReFrame (reframe-hpc from PyPI, the `test` extra):
the check tests/runtime/rfm_checks/work_check.py builds programs/reframe_work.c and runs
it on 2 ranks under PerfweaveMixin (--trace --io), on the site of
rfm_checks/settings.py: the `mpirun` partition (jobs run here) and the `slurm` one (the
suite's Slurm, tests/runtime/slurm.py), each with Open MPI and MPICH, both in one
ReFrame session (ReFrame runs a check once per environment). In the `mpirun`
partition, a second check runs a program without MPI through ReFrame's `local`
launcher.

What is checked: the perflog holds every figure with the value of the experiment's own
report (perfweave-report.json and the saved wait-state analysis, read here by their
documented keys), the experiment and its reports are kept in the test's output
directory, and a `reference` on the `compute` figure, taken from a first run, passes a
second run of the same work and fails a run made 20 % slower by the program's work
argument."""

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import BIN, FLAVORS, reported, reported_by_rank, run_with_stdin_open
from perfweave.analysis.metrics import PATTERNS
from slurm import slurm  # noqa: F401  (pytest fixture)

CHECKS = Path(__file__).parent / "rfm_checks"
REFRAME = BIN / "reframe"
RANKS = 2  # the check's num_tasks
SLOWDOWN = 1.2  # the slower run's work, against the first run's
THRESHOLD = 0.1  # the reference's bounds: within 10 % of the first run's compute seconds
KEPT = ("perfweave-experiment", "perfweave-report.txt", "perfweave-report.json")


@dataclass
class Case:
    """One test case of a ReFrame session: its result, its perflog line's variables
    ({name: (value, unit, reference, lower, upper)}) and its run report's entry."""

    result: str
    variables: dict
    record: dict

    @property
    def dir(self):
        """Where the case's files are: its output directory when it passed (ReFrame copies
        keep_files there), its stage directory when it failed (ReFrame keeps it)."""
        return Path(self.record["outputdir" if self.result == "pass" else "stagedir"])


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The directories of links that make `mpirun` each environment's own: Open MPI's,
    MPICH's (hydra starts its proxy from the directory it was started from)."""
    d = tmp_path_factory.mktemp("reframe-site")
    for name, m in FLAVORS.items():
        (d / f"bin-{name}").mkdir()
        (d / f"bin-{name}" / "mpirun").symlink_to(shutil.which(m.run))
    (d / "bin-mpich" / "hydra_pmi_proxy").symlink_to(shutil.which("hydra_pmi_proxy"))
    return d


def _value(word):
    return None if word == "None" else float(word)


def reframe(site, out, partition, *options, timeout=300):
    """Runs ReFrame on the checks of work_check.py in `partition`, every environment
    unless options say otherwise; (its process, {(display name, environment): Case})."""
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RFM_")}
    env.update(PW_RFM_SITE=str(site), PW_RFM_OUT=str(out))
    cmd = [str(REFRAME), "-C", str(CHECKS / "settings.py"), "-c", str(CHECKS / "work_check.py")]
    action = [] if "--dry-run" in options else ["-r"]
    cmd += [*action, "--system", f"local:{partition}", "--prefix", str(out / "rfm"), *options]
    proc = run_with_stdin_open(cmd, cwd=out, env=env, timeout=timeout)
    cases = {}
    for log in (out / "perflogs").rglob("*.log"):
        for line in log.read_text().splitlines()[1:]:  # the first: the header
            result, name, environ, *fields = line.split("|")
            variables = {}
            for field in filter(None, fields):
                var, rest = field.split("=", 1)
                value, unit, ref, lower, upper = rest.split(" ")
                variables[var] = (_value(value), unit, _value(ref), _value(lower), _value(upper))
            cases[(name, environ)] = Case(result, variables, None)
    [report] = out.glob("report-*.json")
    for tc in json.loads(report.read_text())["runs"][-1]["testcases"]:
        case = cases.get((tc["display_name"], tc["environ"]))
        assert case, f"{tc['display_name']} {tc['environ']}: not in the perflog\n{proc.stdout}"
        case.record = tc
    return proc, cases


def expected_figures(case):
    """The figures as the case's report and wait-state analysis hold them, by the keys
    docs/reframe.md names (POP factors in %)."""
    report = json.loads((case.dir / "perfweave-report.json").read_text())
    analysis = json.loads(
        (case.dir / "perfweave-experiment" / "analysis" / "waitstates.json").read_text()
    )
    metrics = {m["id"]: m for m in analysis["metrics"]}

    def outer(m):  # a pattern that is no part of another: patterns include their parts
        up = metrics[m]["parent"]
        while up and up not in PATTERNS:
            up = metrics[up]["parent"]
        return up is None

    mp, pop = report["mpi_profile"], report["pop"]
    # SerE and TE of the ideal-network replay, which has an ideal runtime for this program
    assert pop["ideal"]["replay"]["t_ideal_s"] is not None
    ideal = pop["ideal"]["replay"]["multiplicative"]
    return {
        "elapsed": (report["wall_s"], "s"),
        "app_time": (mp["app_time_s"]["max"], "s"),
        "compute": (mp["outside_mpi_s"]["max"], "s"),
        "mpi_pct": (mp["mpi_pct"]["mean"], "%"),
        "io_pct": (report["io"]["io_pct"], "%"),
        "wait": (sum(metrics[m]["total"] for m in PATTERNS if m in metrics and outer(m)), "s"),
        "overhead": (metrics["overhead"]["total"], "s"),
        "PE": (100 * pop["multiplicative"]["parallel_efficiency"], "%"),
        "LB": (100 * pop["multiplicative"]["load_balance"], "%"),
        "CommE": (100 * pop["multiplicative"]["communication_efficiency"], "%"),
        "SerE": (100 * ideal["serialisation_efficiency"], "%"),
        "TE": (100 * ideal["transfer_efficiency"], "%"),
    }


def job_stderr(case):
    return subprocess.CompletedProcess([], 0, "", (case.dir / "rfm_job.err").read_text())


def check_figures(proc, cases):
    """Every case passed and the perflog line of each of ReframeWork's holds its report's
    figures."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {env for name, env in cases if name == "ReframeWork"} == set(FLAVORS), proc.stdout
    for (name, environ), case in cases.items():
        if name != "ReframeWork":
            continue
        assert case.result == "pass", f"{name} {environ}:\n{proc.stdout}"
        for kept in KEPT:
            assert (case.dir / kept).exists(), f"{environ}: {kept} not kept"
        assert (case.dir / "perfweave-experiment" / "traces").is_dir()
        expected = expected_figures(case)
        got = {k: v[:2] for k, v in case.variables.items()}
        assert got.keys() == expected.keys(), environ
        for k, (value, unit) in expected.items():
            assert got[k] == (pytest.approx(value, rel=1e-12, abs=1e-15), unit), (environ, k)
        # the program's own clocks: the last rank spins longest, outside MPI; its app
        # time holds that and its MPI time
        work = reported_by_rank(job_stderr(case), "work")
        assert sorted(work) == list(range(RANKS)), environ
        assert work[RANKS - 1] <= got["compute"][0] <= got["app_time"][0] <= got["elapsed"][0]


@pytest.fixture(scope="module")
def first_run(site, tmp_path_factory):
    """The checks in the `mpirun` partition, one case at a time: ReframeWork's Open MPI
    case is the reference of test_reference_fails_a_slower_run, which runs its cases so
    too (side by side on 2 cores, each case's spins overshot theirs by up to 8 %)."""
    out = tmp_path_factory.mktemp("first") / "out"
    return reframe(site, out, "mpirun", "--exec-policy", "serial")


def test_perflog_holds_the_report_figures(first_run):
    check_figures(*first_run)


def test_program_without_mpi(first_run):
    """Without MPI the report has no MPI profile: the perflog holds the wall time and the
    I/O share alone. The test's own modifier (env) runs under perfweave, after its --."""
    proc, cases = first_run
    case = cases[("SerialWork", "openmpi")]
    assert case.result == "pass", proc.stdout
    report = json.loads((case.dir / "perfweave-report.json").read_text())
    assert report["command"] == ["env", "PW_RFM_MODIFIER=kept", "./burn7030", "0.2"]
    assert not report["mpi_profile"]["mpi"]
    assert {k: v[:2] for k, v in case.variables.items()} == {
        "elapsed": (report["wall_s"], "s"),
        "io_pct": (report["io"]["io_pct"], "%"),
    }
    # the program's own clock: it burnt 0.2 s at least, inside the command's wall time
    heavy, light = reported(job_stderr(case), "heavy", "light")
    assert 0.2 <= heavy + light <= report["wall_s"]


def test_reference_fails_a_slower_run(site, first_run, tmp_path):
    """The first run's compute seconds (Open MPI) as the reference, within 10 %: the same
    work passes, 20 % more fails. serial: the two runs do not share the cores."""
    first = first_run[1][("ReframeWork", "openmpi")]
    ref = first.variables["compute"][0]
    proc, again = reframe(
        site,
        tmp_path / "out",
        "mpirun",
        "-n",
        "ReframeWork",
        "-p",
        "openmpi",
        "-P",
        f"slowdown=1.0,{SLOWDOWN}",
        "-S",
        f"compute_ref={ref!r}",
        "--exec-policy",
        "serial",
    )
    assert proc.returncode != 0, proc.stdout  # a failed case fails the session
    by_slowdown = {c.record["slowdown"]: c for c in again.values()}
    assert sorted(by_slowdown) == [1.0, SLOWDOWN], proc.stdout
    asked = float(first.record["work_ms"]) * int(first.record["steps"]) * 1.5e-3
    for slowdown, case in by_slowdown.items():
        value, unit, got_ref, lower, upper = case.variables["compute"]
        assert (got_ref, lower, upper, unit) == (ref, -THRESHOLD, THRESHOLD, "s")
        # the program's own clock: the last rank spun at least the time asked of it
        work = reported_by_rank(job_stderr(case), "work")[RANKS - 1]
        assert work >= slowdown * asked
        within = abs(value - ref) <= THRESHOLD * ref
        assert case.result == ("pass" if within else "fail")
        assert within == (slowdown == 1.0), f"compute {value} s against {ref} s:\n{proc.stdout}"
    assert "compute=" in proc.stdout and "expected" in proc.stdout  # ReFrame says why


def test_slurm_partition(site, slurm, tmp_path):
    check_figures(*reframe(site, tmp_path / "out", "slurm"))


def test_job_script(site, tmp_path):
    """reframe --dry-run writes the job scripts and runs nothing: perfweave's words come
    first on the launch line, quoted for the shell (an experiment name with a space), the
    launcher's own after its --; the reports after the launch. The plugin reads no
    report then."""
    proc, cases = reframe(
        site, tmp_path / "out", "mpirun", "--dry-run", "-S", "perfweave_experiment=an exp"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pw = str(BIN / "perfweave")
    launch = {  # perfweave's options, the launcher (or the test's modifier), the program
        ("ReframeWork", "openmpi"): ["--trace", "--io", "--", "mpirun", "-np", "2"]
        + ["--oversubscribe", "./reframe_work", "150", "4"],
        ("ReframeWork", "mpich"): ["--trace", "--io", "--", "mpirun", "-np", "2"]
        + ["./reframe_work", "150", "4"],
        ("SerialWork", "openmpi"): ["--io", "--", "env", "PW_RFM_MODIFIER=kept"]
        + ["./burn7030", "0.2"],
    }
    assert set(cases) == set(launch), proc.stdout
    for key, case in cases.items():
        stage = case.record["stagedir"]
        exp = os.path.join(stage, "an exp")
        lines = [shlex.split(x) for x in open(os.path.join(stage, "rfm_job.sh"))]
        at = lines.index([pw, "run", "-o", exp, *launch[key]])
        assert lines[at + 1 :] == [
            shlex.split(f"if [ -d {shlex.quote(exp)}/traces ]; then {pw} analyze")
            + [exp, ">", "perfweave-analyze.txt;", "fi"],
            [pw, "report", exp, ">", "perfweave-report.txt"],
            [pw, "report", "--json", exp, ">", "perfweave-report.json"],
        ]
