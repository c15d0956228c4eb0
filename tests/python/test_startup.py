"""Start-up and shutdown apart from the app time (analysis/phases.py, report/summary.py):
an experiment written by hand as the short run of issue 22 (2 ranks, 0.23 s and 0.22 s
in MPI_Init, 5 ms of app time of which MPI_Recv 95.5 %, 20 ms from MPI_Finalize to
exit) after 150 ms of the program's own before MPI_Init, with one sample per ms of each
rank's life. Its numbers
are known by construction; the text, JSON and HTML reports must say the same ones, each
percentage with what it is of."""

import html
import json
import re

import numpy as np
import pytest

from perfweave.analysis import phases
from perfweave.cli import main
from perfweave._format import ACTIVITIES
from perfweave.readers.samples import SAMPLE_FRAMES, SAMPLE_DTYPE, SAMPLES_VERSION

S, MS = 1_000_000_000, 1_000_000
APP = "/nonexistent/app"
RECORDED = ACTIVITIES  # the activities the runtime records (format.h)
FUNCS = {
    "functions": ["MPI_Init", "MPI_Recv", "MPI_Finalize"],
    "families": ["other", "p2p", "other"],
}
T0 = 5 * S  # the runtime's start on each rank
BEFORE, APP_MS, SHUTDOWN = 150, 5, 20  # ms: before MPI_Init, app time, shutdown
INIT = {0: 230, 1: 220}  # ms in MPI_Init
RECV_NS = 4_775_000  # per rank: 95.5 % of 5 ms


def times(rank):
    """(t_init_enter, t_init_leave, t_fini_enter, exit) of a rank, ns."""
    enter = T0 + BEFORE * MS
    leave = enter + INIT[rank] * MS
    fini = leave + APP_MS * MS
    return enter, leave, fini, fini + SHUTDOWN * MS


def write_samples(exp, rank):
    """One sample in the middle of each ms of the rank's life: compute before MPI_Init,
    mpi_other in MPI_Init and from MPI_Finalize on, in the app time 4 in MPI_Recv
    (mpi_p2p) and 1 computing."""
    enter, leave, fini, end = times(rank)
    t = np.arange(T0 + MS // 2, end, MS)
    rec = np.zeros(len(t), SAMPLE_DTYPE)
    rec["t"] = t
    rec["activity"] = RECORDED.index("mpi_other")
    rec["activity"][t < enter] = 0
    in_app = np.flatnonzero((t >= leave) & (t < fini))
    assert len(in_app) == APP_MS
    rec["activity"][in_app[:4]] = RECORDED.index("mpi_p2p")
    rec["activity"][in_app[4:]] = 0
    rec["depth"] = 1
    rec["object"][:, 0] = 0
    rec["object"][:, 1:] = -1
    rec["offset"][:, 0] = 0x101
    rec["counters"] = -1
    d = exp / "samples"
    d.mkdir(exist_ok=True)
    rec.tofile(d / f"rank-{rank}.samples")
    meta = {
        "format": "perfweave-samples",
        "version": SAMPLES_VERSION,
        "rank": rank,
        "pid": 100 + rank,
        "host": "node01",
        "frames": SAMPLE_FRAMES,
        "counters": [],
        "samples": len(rec),
        "t_start": T0,
        "t_end": end,
        "activities": RECORDED,
        "objects": [[APP, ""]],
        "threads": [
            {
                "tid": 100 + rank,
                "taken": len(rec),
                "kept": len(rec),
                "thinned": 0,
                "interval_ns": MS,
            }
        ],
    }
    (d / f"rank-{rank}.json").write_text(json.dumps(meta))
    return len(rec)


@pytest.fixture
def short_run(experiment_dir, pwprof):
    exp = experiment_dir("short", wall_seconds=0.4)
    ranks, sites = [], []
    for r in (0, 1):
        enter, leave, fini, _ = times(r)
        ranks.append(
            dict(
                rank=r,
                pid=100 + r,
                t_start=T0,
                t_init_enter=enter,
                t_init_leave=leave,
                t_fini_enter=fini,
                t_end=fini,
                app_ns=fini - leave,
                mpi_ns=RECV_NS,
                mpi_calls=2,
                nthreads=1,
                table_capacity=64,
            )
        )
        sites += [
            dict(rank=r, fn=0, object=0, offset=0x201, count=1, total_ns=leave - enter),
            dict(rank=r, fn=1, object=0, offset=0x301, count=1, total_ns=RECV_NS, bytes_recv=8),
        ]
    pwprof(
        exp / "profile.pwprof",
        dict(FUNCS, world_size=2, hosts=["node01"], objects=[APP], mpi_flavor="openmpi"),
        ranks=ranks,
        sites=sites,
    )
    samples = sum(write_samples(exp, r) for r in (0, 1))
    return exp, samples


def report(exp, capsys, *args):
    assert main(["report", *args, str(exp)]) == 0
    return capsys.readouterr().out


def test_windows_and_phases_of_samples(short_run):
    from perfweave.readers.experiment import open_experiment

    exp, _ = short_run
    win = phases.windows(open_experiment(exp).profile)
    assert win == {r: times(r)[:3] for r in (0, 1)}
    enter, leave, fini, _ = times(0)
    t = [enter - 1, enter, leave - 1, leave, fini - 1, fini, fini + 1]
    assert phases.of_samples(t, win[0]).tolist() == [0, 1, 1, 2, 2, 3, 3]
    assert phases.of_samples(t, None).tolist() == [phases.APP] * len(t)


def test_start_up_is_apart_from_the_app_time(short_run, capsys):
    exp, samples = short_run
    data = json.loads(report(exp, capsys, "--json"))
    su = data["startup"]
    assert su["ranks"] == 2 and su["shutdown_ranks"] == 2
    assert su["init_s"]["max"] == pytest.approx(0.230) and su["init_s"]["mean"] == pytest.approx(
        0.225
    )
    assert su["app_time_s"]["mean"] == pytest.approx(0.005)
    assert su["shutdown_s"]["max"] == pytest.approx(0.020)
    assert su["before_init_s"]["max"] == pytest.approx(0.150)
    assert [p["init_s"] for p in su["per_rank"]] == pytest.approx([0.230, 0.220])
    # the samples: one per ms, each standing for 1 ms
    total = 2 * (BEFORE + APP_MS + SHUTDOWN) + sum(INIT.values())
    assert samples == total == 800
    pct = su["samples_pct"]
    assert pct["init"] == pytest.approx(100 * 450 / total)
    assert pct["shutdown"] == pytest.approx(100 * 40 / total)
    assert pct["before_init"] == pytest.approx(100 * 300 / total)
    assert pct["app"] == pytest.approx(100 * 10 / total)
    sm = data["samples"]
    assert sm["app_samples"] == 10
    # the split is of the app time's 10 samples: 8 in MPI_Recv, 2 computing; of all the
    # samples MPI (MPI_Init and MPI_Finalize included) would be 498 of 800
    assert sm["time_split"] == pytest.approx(
        {"compute": 20.0, "MPI": 80.0, "I/O": 0.0, "threads": 0.0}
    )
    assert sm["activity_pct"]["mpi_other"] == pytest.approx(100 * 490 / total)
    # the advice: MPI_Recv's share is of the app time, and the start-up is said
    rules = {a["rule"]: a for a in data["advice"]}
    assert "MPI_Recv takes 95.5 % of the app time" in rules["communication_bound"]["text"]
    assert "of the run" not in json.dumps(data["advice"])
    start = rules["startup"]
    assert "0.225 s per rank in MPI_Init on average (at most 0.23 s" in start["text"]
    assert "against 0.005 s of app time" in start["text"]
    assert start["severity"] == pytest.approx(100 * 225 / 230)


def _numbers(text):
    """The app time's, the start-up line's and the time split's figures in a report's
    text."""
    text = " ".join(text.split())
    a = re.search(
        r"app time ([\d.]+)ms mean, [\d.]+ms min, [\d.]+ms max \(MPI_Init to "
        r"MPI_Finalize\)",
        text,
    )
    m = re.search(
        r"MPI_Init ([\d.]+)ms max, ([\d.]+)ms mean per rank \(([\d.]+) % of the "
        r"samples\); shutdown \(after MPI_Finalize\) ([\d.]+)ms max, ([\d.]+)ms mean "
        r"\(([\d.]+) % of the samples\); before MPI_Init ([\d.]+)ms max \(([\d.]+) % "
        r"of the samples\)",
        text,
    )
    s = re.search(
        r"compute ([\d.]+) %, MPI ([\d.]+) % \(of the (\d+) samples in the app "
        r"time\)",
        text,
    )
    assert a and m and s, text
    return [float(x) for x in a.groups() + m.groups() + s.groups()]


def test_text_json_and_html_agree(short_run, capsys, tmp_path):
    exp, _ = short_run
    data = json.loads(report(exp, capsys, "--json"))
    text = report(exp, capsys, "--full")
    page = tmp_path / "r.html"
    report(exp, capsys, "--html", str(page))
    body = html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))
    su, sm = data["startup"], data["samples"]
    expected = [
        1e3 * su["app_time_s"]["mean"],
        1e3 * su["init_s"]["max"],
        1e3 * su["init_s"]["mean"],
        su["samples_pct"]["init"],
        1e3 * su["shutdown_s"]["max"],
        1e3 * su["shutdown_s"]["mean"],
        su["samples_pct"]["shutdown"],
        1e3 * su["before_init_s"]["max"],
        su["samples_pct"]["before_init"],
        sm["time_split"]["compute"],
        sm["time_split"]["MPI"],
        sm["app_samples"],
    ]
    assert 1e3 * data["mpi_profile"]["app_time_s"]["mean"] == pytest.approx(expected[0])
    # the values by construction; the reports round them (3 decimals of ms, 1 of %)
    assert expected == pytest.approx(
        [5, 230, 225, 100 * 450 / 800, 20, 20, 100 * 40 / 800, 150, 100 * 300 / 800, 20, 80, 10],
        abs=1e-9,
    )
    for shown in (_numbers(text), _numbers(body)):
        assert shown == pytest.approx(expected, abs=0.05 + 1e-9)
    # the start-up line in the text's header, and the same advice in all three
    assert "  start-up   MPI_Init 230.000ms max, 225.000ms mean per rank" in text
    flat_text, flat_body = " ".join(text.split()), " ".join(body.split())
    for a in data["advice"]:
        assert " ".join(a["text"].split()) in flat_text, a["rule"]
        assert " ".join(a["text"].split()) in flat_body, a["rule"]
    # every table title of percentages names what they are of
    assert "MPI time per rank (MPI% and outside%: of the rank's app time)" in text
    assert (
        "every % here is of the samples" in flat_text
        and "every % here is of the samples" in flat_body
    )


def test_without_samples_the_shutdown_is_not_measured(short_run, capsys):
    exp, _ = short_run
    for f in (exp / "samples").iterdir():
        f.unlink()
    data = json.loads(report(exp, capsys, "--json"))
    assert data["startup"]["shutdown_s"] is None and data["startup"]["samples_pct"] is None
    assert data["startup"]["init_s"]["max"] == pytest.approx(0.230)
    text = " ".join(report(exp, capsys).split())
    assert "shutdown (after MPI_Finalize) not measured (no samples)" in text


def test_no_start_up_line_without_mpi_times(experiment_dir, pwprof, capsys):
    # an imported trace's profile (or one of before these times): no line, no rule
    exp = experiment_dir("old")
    pwprof(
        exp / "profile.pwprof",
        dict(FUNCS, world_size=1, objects=[APP]),
        ranks=[dict(rank=0, app_ns=S, mpi_ns=S // 2, mpi_calls=1)],
    )
    data = json.loads(report(exp, capsys, "--json"))
    assert data["startup"] is None
    assert "start-up" not in report(exp, capsys)
