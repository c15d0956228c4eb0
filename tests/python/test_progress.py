"""Progress and feedback (perfweave/progress.py): a bar on stderr while a long verb runs,
only when stderr is a terminal, erased when it ends; nothing more than the usual lines
without a terminal; nothing but errors with --quiet; one line naming the next step after
analyze and import, and after every export format how to open its file. Bars for
analyze, import, report, compare, overhead and every export format. The traces come from
bench/tracegen.py: R ranks of 17 events an iteration, so the event count is known; the
profiles of the profile exports from dd under `perfweave run --io`."""

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
RANKS, ITERS = 8, 2000
EVENTS = RANKS * ITERS * 17  # tracegen.py: 17 events a rank and iteration
ARROW = "\u2192"


@pytest.fixture(scope="module")
def exp(tmp_path_factory):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import tracegen

    out = tmp_path_factory.mktemp("progress") / "exp"
    tracegen.write(out, RANKS, EVENTS)
    return out


def perfweave(*args):
    return subprocess.run([PERFWEAVE, *map(str, args)], capture_output=True, text=True, timeout=120)


def on_terminal(*args):
    """Run perfweave with stderr on a pseudo-terminal (stdout a pipe, as `> file` or a
    pager): (status, stdout, what the terminal received)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        [PERFWEAVE, *map(str, args)], stdout=subprocess.PIPE, stderr=slave, text=True
    )
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            raise AssertionError(f"no end after 120 s: {seen!r}")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = proc.stdout.read()
    proc.stdout.close()
    return proc.wait(timeout=60), out, seen.decode()


def screen(raw):
    """The lines a terminal shows at the end: each line as its last carriage return
    left it (the terminal's own line discipline writes \\r\\n for \\n)."""
    lines = raw.replace("\r\n", "\n").split("\n")
    return [ln.split("\r")[-1].rstrip() for ln in lines if ln.split("\r")[-1].strip()]


def untimed(report):
    """A report without the analysis's own times, which differ between two runs."""
    return re.sub(r"\d+\.\d+ s\b", "T s", report)


def test_counts_as_perfweave_wait_says_them():
    from perfweave import progress

    assert [progress.count(n) for n in (0, 999_999, 1_000_000, 1_234_567)] == [
        "0",
        "999999",
        "1.0 M",
        "1.2 M",
    ]


def analysed(exp):
    return (
        f"perfweave: analysed {EVENTS} events of {RANKS} ranks {ARROW} run "
        f"`perfweave pop {exp}` or `perfweave report {exp}`"
    )


def test_a_bar_on_a_terminal_erased_at_the_end(exp):
    status, out, raw = on_terminal("analyze", "--no-save", exp)
    assert status == 0, raw
    # bars were drawn: the traces' reading, rank by rank, then the patterns' steps
    assert re.search(r"reading (traces|rank \d+'s trace).*\d+/8", raw), raw
    assert re.search(r"wait states.*\d/6", raw), raw
    # and erased: the terminal ends with the next step alone, as without a terminal
    assert screen(raw) == [analysed(exp)], raw
    assert untimed(out) == untimed(perfweave("analyze", "--no-save", exp).stdout)


def test_no_bar_without_a_terminal(exp):
    res = perfweave("analyze", "--no-save", exp)
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [analysed(exp)]
    assert "Late Sender" in res.stdout


@pytest.mark.parametrize("line", [("--quiet", "analyze"), ("analyze", "-q")])
def test_quiet_prints_nothing_but_the_result(exp, line):
    status, out, raw = on_terminal(*line, "--no-save", exp)
    assert status == 0, raw
    assert raw == ""
    assert untimed(out) == untimed(perfweave("analyze", "--no-save", exp).stdout)


def test_quiet_still_says_an_error(tmp_path):
    status, out, raw = on_terminal("--quiet", "analyze", tmp_path / "none")
    assert status == 2 and out == ""
    assert screen(raw) == [f"perfweave: error: {tmp_path / 'none'}: no such experiment directory"]


def test_import_names_the_next_step(exp, tmp_path):
    pytest.importorskip("otf2", reason="the OTF2 round trip needs the otf2 package")
    archive = tmp_path / "t.otf2"
    res = perfweave("export", exp, "--format", "otf2", "-o", archive)
    assert res.returncode == 0, res.stderr
    back = tmp_path / "back"
    res = perfweave("import", archive, "-o", back)
    assert res.returncode == 0, res.stderr
    # OTF2's events (an MPI call's enter, leave and message events) are more than the
    # trace's records: the count is the summary's, and every one was imported
    n, of = map(
        int, re.match(r"perfweave: imported (\d+) of (\d+) events of 8 ranks", res.stdout).groups()
    )
    assert n == of > EVENTS
    assert res.stderr.splitlines() == [
        f"perfweave: imported {RANKS} ranks, {n} events {ARROW} run "
        f"`perfweave report {back}` or `perfweave pop {back}`"
    ]
    # --quiet: neither the summary nor the next step
    res = perfweave("--quiet", "import", archive, "-o", tmp_path / "quiet")
    assert res.returncode == 0, res.stderr
    assert res.stdout == res.stderr == ""
    # on a terminal: the import's bars, erased, then the next step
    status, out, raw = on_terminal("import", archive, "-o", tmp_path / "tty")
    assert status == 0, raw
    assert re.search(r"(reading t\.otf2|building the traces).*\d/\d", raw), raw
    assert screen(raw) == [
        f"perfweave: imported {RANKS} ranks, {n} events {ARROW} run "
        f"`perfweave report {tmp_path / 'tty'}` or `perfweave pop {tmp_path / 'tty'}`"
    ], raw


def opens(fmt, out):
    """The next-step line after an export: how to open what it wrote."""
    from perfweave.cli.export import OPEN_WITH

    return f"perfweave: wrote {out} {ARROW} {OPEN_WITH[fmt].format(path=out)}"


@pytest.mark.parametrize(
    "fmt, name, bar",
    [
        ("chrome", "t.json", r"Chrome trace: writing.*\d+/8"),
        ("otf2", "t.otf2", r"OTF2: writing.*\d+/8"),
    ],
)
def test_a_bar_while_exporting_traces(exp, tmp_path, fmt, name, bar):
    out = tmp_path / name
    status, stdout, raw = on_terminal("export", exp, "--format", fmt, "-o", out)
    assert status == 0, raw
    assert re.search(bar, raw), raw
    # erased: the summary on stdout, the terminal keeps how to open the file
    assert screen(raw) == [opens(fmt, out)], raw
    assert stdout.startswith("perfweave: wrote ")
    res = perfweave("export", exp, "--format", fmt, "-o", out, "--force")
    assert res.returncode == 0 and res.stderr.splitlines() == [opens(fmt, out)]


@pytest.fixture(scope="module")
def io_exp(tmp_path_factory):
    """dd under `perfweave run --io` (no MPI): a sampled call-path profile and an I/O
    profile, what the profile exports read (sampled each 1 ms over 20 MiB of writes: on a
    quiet machine 50 writes were over before the first sample)."""
    d = tmp_path_factory.mktemp("io")
    res = perfweave(
        "run", "--io", "--sample-interval-ms", "1", "-o", d / "exp", "--", "dd",
        "if=/dev/zero", f"of={d / 'out'}", "bs=4k", "count=5000",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return d / "exp"


@pytest.mark.parametrize(
    "fmt, bar",
    [
        ("caliper", r"Caliper: [a-z ]+.*\d/3"),
        ("cube", r"CUBE: [a-z ]+.*\d/4"),
        ("darshan", r"darshan: writing.*\d/1"),
    ],
)
def test_a_bar_while_exporting_profiles(io_exp, tmp_path, fmt, bar):
    """A bar on a terminal, erased; the next step (how to open the file) on a terminal and
    without one; nothing with --quiet."""
    out = tmp_path / f"p.{fmt}"
    status, stdout, raw = on_terminal("export", io_exp, "--format", fmt, "-o", out)
    assert status == 0, raw
    assert re.search(bar, raw), raw
    assert screen(raw) == [opens(fmt, out)], raw
    res = perfweave("export", io_exp, "--format", fmt, "-o", out, "--force")
    assert res.returncode == 0 and res.stderr.splitlines() == [opens(fmt, out)]
    status, stdout, raw = on_terminal("--quiet", "export", io_exp, "--format", fmt, "-o", out,
                                      "--force")  # fmt: skip
    assert status == 0 and raw == "" and stdout == ""


def test_a_bar_while_reporting_and_comparing(io_exp):
    """report: a bar over its sections; compare: over the experiments it reads; both
    erased, the output the same as without a terminal."""
    status, out, raw = on_terminal("report", io_exp)
    assert status == 0, raw
    assert re.search(r"report: [a-z_]+.*\d+/\d+", raw), raw
    assert screen(raw) == [], raw
    assert untimed(out) == untimed(perfweave("report", io_exp).stdout)
    status, out, raw = on_terminal("compare", io_exp, io_exp)
    assert status == 0, raw
    assert re.search(r"compare: reading.*\d/2", raw), raw
    assert screen(raw) == [], raw
    res = perfweave("compare", io_exp, io_exp)
    assert res.returncode == 0 and res.stderr == "" and untimed(out) == untimed(res.stdout)
    status, out, raw = on_terminal("--quiet", "compare", io_exp, io_exp)
    assert status == 0 and raw == ""


@pytest.mark.parametrize("verb", [["report"], ["compare", "X"]])
def test_html_pages_say_how_to_open_them(io_exp, tmp_path, verb):
    page = tmp_path / "page.html"
    args = [verb[0], "--html", page, io_exp] + [io_exp] * (len(verb) - 1)
    res = perfweave(*args)
    assert res.returncode == 0, res.stderr
    assert page.stat().st_size > 0
    assert res.stderr.splitlines() == [
        f"perfweave: wrote {page} {ARROW} open file://{page.resolve()} in a web browser"
    ]
    res = perfweave("--quiet", *args)
    assert res.returncode == 0 and res.stderr == ""


def test_a_bar_over_the_runs_of_a_sweep():
    # bare and profile, a warm-up round and two: 6 runs of true
    status, stdout, raw = on_terminal(
        "overhead", "--modes", "profile", "-n", "2", "--calibrate", "none", "--", "true"
    )
    assert status == 0, raw
    assert re.search(r"overhead.*0/6", raw), raw
    assert screen(raw) == []
    assert "profile" in stdout
