"""perfweave compare without running programs: Welch's test against the t distribution
integrated numerically, the callpath table's subtree sums, imported OTF2 experiments
(tests/data/otf2, their MPI calls counted from the archive) and the command's errors."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import otf2
import pytest

import perfweave
from perfweave.analysis.callpaths import UNKNOWN_CALLER, CallpathMetrics, place
from perfweave.analysis.compare import welch

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
PING_PONG = Path(__file__).parents[1] / "data" / "otf2" / "pipit-ping-pong" / "traces.otf2"


def _pw(*args):
    """perfweave ARGS, its output captured."""
    return subprocess.run([PERFWEAVE, *args], capture_output=True, text=True, timeout=300)


def _t_two_sided(t, df):
    """P(|T| > |t|) for Student's t with df degrees of freedom, by integrating its
    density (Simpson's rule) from 0 to |t|: independent of the continued fraction."""
    x = np.linspace(0, abs(t), 20001)
    logc = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    f = np.exp(logc) * (1 + x * x / df) ** (-(df + 1) / 2)
    h = x[1] - x[0]
    area = h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())
    return 1 - 2 * area


@pytest.mark.parametrize(
    "x,y",
    [
        ([1, 2, 3, 4, 5], [2, 4, 6, 8, 10]),
        ([10.1, 10.3, 9.9], [12.0, 12.5, 11.7, 12.2]),
        ([0.5, 0.52], [0.49, 0.53, 0.51, 0.50, 0.55, 0.48]),
    ],
)
def test_welch_matches_the_t_distribution(x, y):
    x, y = np.array(x, float), np.array(y, float)
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    t = (x.mean() - y.mean()) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    assert welch(x, y) == pytest.approx(_t_two_sided(t, df), abs=1e-7)


def test_welch_degenerate_cases():
    assert math.isnan(welch([1.0], [2.0, 3.0]))  # one value: no variance to test with
    assert welch([2.0, 2.0], [2.0, 2.0]) == 1.0
    assert welch([2.0, 2.0], [3.0, 3.0]) == 0.0


def test_callpath_inclusive_and_paths():
    cm = CallpathMetrics.from_literal(
        ["main/solve/spin", "main/solve", "main/io", "main/exchange/MPI_Send"],
        [0, 1],
        time=[[1.0, 2.0], [0.5, 0.0], [0.25, 0.25], [0.0, 0.0]],
        visits=[[0, 0], [0, 0], [0, 0], [10, 12]],
    )
    paths = cm.paths()
    assert paths == [cm.path(i) for i in range(len(paths))]
    assert all(cm.parent[i] < i for i in range(len(paths)))
    inc = cm.inclusive("time")
    assert inc[paths.index(("main",))].tolist() == [1.75, 2.25]
    assert inc[paths.index(("main", "solve"))].tolist() == [1.5, 2.0]
    assert cm.inclusive("visits")[paths.index(("main", "exchange"))].tolist() == [10, 12]
    assert not cm.metrics["time"].inclusive and cm.metrics["visits"].unit == "count"


def _mpi_calls(archive):
    """{MPI function: calls} of an OTF2 archive, from its Enter events."""
    out = {}
    with otf2.reader.open(str(archive)) as tr:
        for _, ev in tr.events:
            if isinstance(ev, otf2.events.Enter) and ev.region.name.startswith("MPI_"):
                out[ev.region.name] = out.get(ev.region.name, 0) + 1
    return out


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("imported") / "pingpong"
    res = _pw("import", str(PING_PONG), "-o", str(out))
    assert res.returncode == 0, res.stderr
    return out


def test_imported_experiments(imported):
    calls = _mpi_calls(PING_PONG)
    calls = {k: v for k, v in calls.items() if k not in ("MPI_Init", "MPI_Finalize")}
    df = perfweave.compare(str(imported), str(imported), by="mpi-call", metric="visits")
    assert dict(zip(df["key"], df["a"])) == calls
    assert (df["delta"] == 0).all() and not df["regression"].any()
    assert (df["only_in"] == "").all()
    # call paths: no call sites in an OTF2 trace: the MPI calls under the unknown caller
    cp = perfweave.compare(str(imported), str(imported), by="callpath", metric="visits")
    assert dict(zip(cp["key"], cp["a"])) == {f"[unknown caller]/{k}": v for k, v in calls.items()}
    res = _pw("compare", "--json", str(imported), str(imported))
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    # no samples in an import: said, not a table of zeros
    assert doc["comparisons"][0]["rows"] == []
    assert any("no samples" in n for n in doc["notes"])
    # both sides traced: the POP factors side by side, alike
    pops = [s["pop"] for s in doc["sides"]]
    assert pops[0] and pops[0] == pops[1] and 0 < pops[0]["load_balance"] <= 1


@pytest.mark.parametrize(
    "args,message",
    [
        (["A"], "two experiments or more"),
        (["A", "/nonexistent/exp"], "no such experiment directory"),
        (["--by", "line", "A", "A"], "--by line"),
        (["--metric", "io_time", "A", "A"], "--metric io_time"),
        (["--top", "-1", "A", "A"], "--top"),
        (["A", ","], "no experiment"),
        (["--inclusive", "--by", "mpi-call", "A", "A"], "--inclusive"),
    ],
)
def test_bad_arguments(imported, args, message):
    args = [str(imported) if a == "A" else a for a in args]
    res = _pw("compare", *args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr
    assert res.stdout == ""


def test_call_site_placement():
    """A call site's own path (caller, MPI function) under the sampled paths that end
    with it: per rank where that rank's samples are; its own path where none is."""
    sampled = {
        ("main", "phase_a", "exchange", "MPI_Allreduce"): np.array([3.0, 0.0]),
        ("main", "phase_b", "exchange", "MPI_Allreduce"): np.array([1.0, 2.0]),
        ("main", "phase_b", "exchange"): np.array([0.5, 0.5]),
        ("main", "solve"): np.array([4.0, 4.0]),
    }
    notes = []
    got = place(("exchange", "MPI_Allreduce"), sampled, 2, notes)
    assert got == [
        ("main", "phase_a", "exchange", "MPI_Allreduce"),
        ("main", "phase_b", "exchange", "MPI_Allreduce"),
    ]
    assert len(notes) == 1 and "2 sampled paths" in notes[0]
    # the MPI call never sampled: under the caller's sampled path
    assert place(("solve", "MPI_Barrier"), sampled, 2, []) == [("main", "solve", "MPI_Barrier")] * 2
    # nowhere in the samples: its own path, rooted at its outermost known frame
    assert place(("init", "MPI_Bcast"), sampled, 2, []) == [("init", "MPI_Bcast")] * 2
    assert place((UNKNOWN_CALLER, "MPI_Send"), sampled, 2, []) == [(UNKNOWN_CALLER, "MPI_Send")] * 2
