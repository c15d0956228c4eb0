"""The text report and the HTML page agree on every number (report_numbers.py), on
reports built in memory: an MPI profile of 3 ranks with message sizes, counters and
deep call sites (a profile file written from literals and read as a run's), and the
sections of other modules from their models built from literals (the communication
matrix, I/O, math libraries, the example module) or their data (the wait states). A
number the HTML dropped, or wrote another way, fails naming its section, the number and
its text line. The page's charts colour each activity from one table, and `report
--html FILE` prints one line."""

import json
import re
from types import SimpleNamespace

import pytest
from report_numbers import assert_agree, disagreements, page_text
from test_report_sections import example_model

from perfweave.analysis.comm_matrix import COLL, RECV, SEND
from perfweave.analysis.comm_matrix import analyze as comm_analyze
from perfweave.analysis.io import analyze as io_analyze
from perfweave.analysis.mathlib import analyze as ml_analyze
from perfweave.analysis.samples.classification import ACTIVITIES
from perfweave.model.io import IoProfile
from perfweave.model.mathlib import MathLib
from perfweave.readers.experiment import open_experiment
from perfweave.report import data as report_data
from perfweave.report import html as report_html
from perfweave.report.section import Page
from perfweave.report.sections import message_sizes, mpi_profile
from perfweave.report.sections.example import SECTION as EXAMPLE
from perfweave.report.widgets import ACTIVITY_COLOURS, PALETTE

S = 1_000_000_000
FNS = ["MPI_Init", "MPI_Send", "MPI_Recv", "MPI_Allreduce", "MPI_Put", "MPI_Finalize"]
FAMS = ["other", "p2p", "p2p", "coll", "rma", "other"]


@pytest.fixture
def mpi_exp(experiment_dir, pwprof):
    """3 ranks of 10 s app time; rank r spends (r + 1) x 0.3 s in MPI_Send of 4 KiB
    messages, 0.25 s in MPI_Recv, 1.5 s in MPI_Allreduce, 0.125 s in MPI_Put; counters
    per site; a message-size histogram per function."""
    exp = experiment_dir("mpi", command=["mpiexec", "-n", "3", "./solver", "64"])
    ranks = [
        dict(
            rank=r,
            host=r // 2,
            pid=100 + r,
            app_ns=10 * S,
            mpi_ns=0,
            mpi_calls=0,
            t_init_enter=0,
            t_init_leave=S // 20,
            table_capacity=64,
        )
        for r in range(3)
    ]
    sites, hist, counts = [], [], []
    per_fn = {1: (300, 4096), 2: (250, 4096), 3: (1500, 8), 4: (125, 65536)}  # ms, bytes
    for r in range(3):
        for f, (ms, size) in per_fn.items():
            t = ms * 1_000_000 * (r + 1 if f == 1 else 1)
            calls = 100 * (f + 1)
            sent = size * calls if f in (1, 3, 4) else 0
            recv = size * calls if f in (2, 3) else 0
            counts += [
                dict(
                    site=len(sites),
                    event=0,
                    inside=7 * calls,
                    before=11 * calls,
                    inside_ns=t,
                    before_ns=3 * t,
                )
            ]
            sites.append(
                dict(
                    rank=r,
                    fn=f,
                    object=0,
                    offset=0x40 * f,
                    count=calls,
                    total_ns=t,
                    min_ns=t // calls // 2,
                    max_ns=2 * t // calls,
                    bytes_sent=sent,
                    bytes_recv=recv,
                )
            )
            hist.append(
                dict(
                    rank=r,
                    fn=f,
                    bucket=size.bit_length(),
                    count=calls,
                    bytes=size * calls,
                    total_ns=t,
                )
            )
        mpi_ns = sum(s["total_ns"] for s in sites if s["rank"] == r)
        ranks[r].update(mpi_ns=mpi_ns, mpi_calls=sum(s["count"] for s in sites if s["rank"] == r))
    pwprof(
        exp / "profile.pwprof",
        {
            "functions": FNS,
            "families": FAMS,
            "objects": ["/opt/app/solver"],
            "hosts": ["node-a", "node-b"],
            "world_size": 3,
            "counters": ["perf::PAGE-FAULTS"],
            "mpi_library": "Open MPI v4.1.4, package: Debian",
            "mpi_flavor": "openmpi",
        },
        ranks,
        sites,
        hist=hist,
        counts=counts,
    )
    return exp


def comm_matrix_data():
    """Rank 0 sends rank 1 three messages of 1000 bytes, rank 2 one of 10 bytes; an
    Allreduce on every rank (test_comm_matrix_analysis.py's profile)."""
    from test_comm_matrix_analysis import profile

    p = profile(
        3,
        [
            dict(
                rank=0,
                fn="MPI_Send",
                peer=1,
                dir=SEND,
                messages=3,
                bytes_sent=3000,
                total_ns=2_000_000,
            ),
            dict(
                rank=1,
                fn="MPI_Recv",
                peer=0,
                dir=RECV,
                messages=3,
                bytes_recv=3000,
                total_ns=5_000_000,
            ),
            dict(
                rank=0, fn="MPI_Send", peer=2, dir=SEND, messages=1, bytes_sent=10, total_ns=100_000
            ),
        ]
        + [
            dict(
                rank=r,
                fn="MPI_Allreduce",
                peer=-1,
                dir=COLL,
                messages=4,
                bytes_sent=32,
                bytes_recv=32,
                total_ns=7_000_000,
            )
            for r in range(3)
        ],
    )
    return comm_analyze(p)


def io_model():
    return IoProfile.from_literal(
        [{"rank": 0, "wall_s": 10.0, "busy_s": 3.0}, {"rank": 1, "wall_s": 10.0, "busy_s": 0.5}],
        [("out.dat", 0xEF53, False), ("in.dat", 0xEF53, False)],
        [
            {
                "process": 0,
                "file": 0,
                "layer": "posix",
                "writes": 2000,
                "opens": 2,
                "bytes_written": 200_000,
                "time_ns": {"write": 3e9, "open": 2e6},
            },
            {
                "process": 1,
                "file": 1,
                "layer": "stdio",
                "reads": 17,
                "opens": 1,
                "bytes_read": 123_456,
                "time_ns": {"read": 4.9e8, "open": 1e7},
            },
        ],
    )


def mathlib_data():
    ml = MathLib.from_literal(
        [
            {
                "rank": 0,
                "t_end": 10 * S,
                "calls": [
                    {
                        "routine": "dgemm_",
                        "dims": (64, 64, 64),
                        "chars": "NN",
                        "count": 300,
                        "total_ns": 750_000_000,
                        "flops": 300 * 2.0 * 64**3,
                        "bytes": 300 * 8.0 * 3 * 64**2,
                        "library": "/usr/lib/libopenblas.so.0",
                    },
                    {
                        "routine": "dgetrf_",
                        "dims": (300, 300),
                        "count": 3,
                        "total_ns": 125_000_000,
                        "flops": 3 * 18e6,
                        "library": "/usr/lib/libopenblas.so.0",
                    },
                ],
                "plans": [{"routine": "fftw_plan_dft_1d", "dims": (64,), "executes": 9}],
            }
        ]
    )
    return ml_analyze(ml).to_json()


def example_data():
    ex = example_model()
    return EXAMPLE.collect(SimpleNamespace(example=ex), {}, 10)["example"]


def wait_states_data():
    """perfweave analyze's wait states as the report holds them (sections/wait_states.py
    summarize): a Late Sender and a Wait at Barrier, their root cause on rank 0."""
    return {
        "complete": True,
        "clock": None,
        "patterns": [
            {"id": "late_sender", "name": "Late Sender", "time_s": 0.2125, "pct": 2.13,
             "callpath": "main > MPI_Recv", "ranks": []},
            {"id": "wait_barrier", "name": "Wait at Barrier", "time_s": 0.0375, "pct": 0.38,
             "callpath": "main > MPI_Barrier", "ranks": []},
        ],
        "root_causes": {
            "cost_s": 0.25, "pct": 2.5, "critical_path_s": 9.875,
            "causes": [
                {"rank": 0, "callpath": "main > compute", "cost_s": 0.25, "short_s": 0.2125,
                 "long_s": 0.0375, "saves_s": 0.125}
            ],
            "critical_path": [{"rank": 0, "callpath": "main > compute", "time_s": 7.5}],
        },
    }  # fmt: skip


@pytest.fixture
def report(mpi_exp):
    """The report of mpi_exp with the other modules' sections added, and an experiment
    for the sections that read files for their charts."""
    exp = open_experiment(mpi_exp)
    data = report_data.collect(exp, top=20)
    io = io_model()
    data.update(
        comm_matrix=comm_matrix_data(),
        io=io_analyze(io).to_json(),
        mathlib=mathlib_data(),
        example=example_data(),
        wait_states=wait_states_data(),
    )
    return data, SimpleNamespace(path=mpi_exp, io=io, timelines=())


def test_every_number_of_the_text_is_in_the_page(report):
    data, exp = report
    for key in ("mpi_profile", "comm_matrix", "io", "mathlib", "example", "wait_states"):
        assert data.get(key), key  # every section here has something to show
    assert_agree(data, exp)
    # and the whole page holds them: the sections' parts are the page's
    page = report_html.render(data, exp)
    for k in ("1.500s", "4.0KiB", "3,000", "node-b"):
        assert k in page


def test_a_number_missing_from_the_page_is_named(report, monkeypatch):
    """The check fails on a page that drops a number or writes it another way: the
    longest MPI_Send call (rank 2's, 9 ms) written "0.009s" instead of the text's
    "9.000ms"."""
    data, exp = report
    html_of = mpi_profile.SECTION.html

    def html_written_otherwise(d, page):
        return [p.replace("9.000ms", "0.009s") for p in html_of(d, page)]

    monkeypatch.setattr(mpi_profile.SECTION, "html", html_written_otherwise)
    bad = disagreements(data, exp)
    assert bad and {s for s, _, _ in bad} == {"mpi_profile"}
    assert ("mpi_profile", "9.000") in {(s, n) for s, n, _ in bad}
    with pytest.raises(AssertionError, match="section mpi_profile: '9.000'"):
        assert_agree(data, exp)


def test_page_shows_the_per_rank_chart_and_size_histograms(report):
    """The per-rank chart: a bar per rank, its segments the rank's time outside MPI and
    in each family (p2p: Send and Recv; rank r's Send (r + 1) x 0.3 s) in the
    activities' colours; a histogram of calls per size range per function."""
    data, exp = report
    page = Page(exp)
    svg = "".join(mpi_profile.SECTION.html(data, page))
    segs = re.findall(
        r'<rect x="[\d.]+" y="\d+" width="[\d.]+" height="14" fill="(#\w+)" '
        r'data-activity="(\w+)"><title>rank (\d) \([^)]*\): ([^<]*) ([\d.]+)(ms|s)</title>',
        svg,
    )
    got = {(int(r), act): float(v) * (1e-3 if u == "ms" else 1) for _, act, r, _, v, u in segs}
    for r in range(3):
        assert got[(r, "mpi_p2p")] == pytest.approx(0.3 * (r + 1) + 0.25, abs=1e-3)
        assert got[(r, "mpi_coll")] == pytest.approx(1.5, abs=1e-3)
        assert got[(r, "mpi_rma")] == pytest.approx(0.125, abs=1e-3)
        mpi = 0.3 * (r + 1) + 0.25 + 1.5 + 0.125
        assert got[(r, "compute")] == pytest.approx(10 - mpi, abs=1e-3)
    assert all(ACTIVITY_COLOURS[act] == fill for fill, act, *_ in segs)
    sizes = "".join(message_sizes.SECTION.html(data, page))
    for fn, size in (("MPI_Send", "4.0KiB-8.0KiB"), ("MPI_Allreduce", "8B-15B")):
        assert f"<h3>{fn}: calls per message size</h3>" in sizes
        assert size in page_text([sizes])


def test_one_colour_per_activity(report):
    """The table: every activity (the format's and the samples' own) its colour, all
    different; the page hands the same table to its scripts, and its SVG charts use it."""
    assert list(ACTIVITY_COLOURS)[: len(ACTIVITIES)] == list(ACTIVITIES)
    assert len(PALETTE) >= len(ACTIVITIES)
    shown = [ACTIVITY_COLOURS[a] for a in ACTIVITIES]
    assert len(set(shown)) == len(shown)
    data, exp = report
    page = report_html.render(data, exp)
    m = re.search(r'<script type="application/json" id="pw-activities">(.*?)</script>', page)
    assert json.loads(m.group(1))["colours"] == ACTIVITY_COLOURS
    fills = re.findall(r'fill="(#\w+)" data-activity="(\w+)"', page)
    assert fills and all(ACTIVITY_COLOURS[a] == f for f, a in fills)


def test_html_option_writes_the_page_and_one_line(mpi_exp, tmp_path, capsys):
    """`report --html FILE` prints one line, on stderr, where the page is and how to open
    it (not the text report as well); with --json the JSON report is stdout."""
    from perfweave.cli import main

    page = tmp_path / "r.html"
    assert main(["report", "--html", str(page), str(mpi_exp)]) == 0
    out = capsys.readouterr()
    line = f"perfweave: wrote {page} \u2192 open file://{page.resolve()} in a web browser\n"
    assert out.out == "" and out.err == line and "MPI_Allreduce" in page.read_text()
    page.unlink()
    assert main(["report", "--html", str(page), "--json", str(mpi_exp)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["mpi_profile"]["ranks"] == 3
    assert out.err == line and page.exists()
