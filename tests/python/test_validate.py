"""perfweave validate: the kernel's software events as perfweave counts them against the
kernels' own truth in the same run (pages touched and getrusage's minor faults;
clock_gettime's thread CPU time), the repetition formula, and the sources that cannot be
validated on this machine named with their reason."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perfweave import sources, validation
from perfweave.papi import kernel_countable, kernel_event

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")


def perfweave(*args):
    return subprocess.run([PERFWEAVE, *args], capture_output=True, text=True, timeout=120)


def counted(name):
    why = kernel_countable(kernel_event(name))
    if why:
        pytest.fail(f"perf::{name} cannot be counted here ({why}): this test has nothing to check")


def rows(doc, event, kernel):
    return [r for r in doc["rows"] if r["event"] == event and r["kernel"] == kernel]


def test_repetitions_eq5():
    # Eq. 5: floor(514 - 0.246 N) below 2048, then 10
    assert [validation.repetitions(n) for n in (0, 16, 1000, 2047, 2048, 10**6)] == [
        514,
        510,
        268,
        10,
        10,
        10,
    ]


def test_page_faults_touch():
    """touch maps N fresh pages per repetition and writes one byte into each: N faults a
    repetition. The thread's getrusage minor faults over the same window are the truth
    that the kernel did fault each page; perf::PAGE-FAULTS may exceed N by no more than
    getrusage does, plus 16 for the Python between the counter's reads and getrusage's."""
    counted("PAGE-FAULTS")
    res = perfweave("validate", "--kernels", "touch", "--sizes", "100,700", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    got = rows(doc, "perf::PAGE-FAULTS", "touch")
    assert [r["size"] for r in got] == [100, 700]
    for r in got:
        reps = r["repetitions"]
        assert reps == validation.repetitions(r["size"])
        pages = r["size"] * reps
        assert r["expected_per_rep"] * reps == pages
        minflt = r["truth_count"]
        assert minflt >= pages, r  # the kernel really took a fault on every page
        measured = round(r["measured_per_rep"] * reps)
        assert abs(measured - pages) <= (minflt - pages) + 16, r
        assert r["ok"] is True


def test_no_faults_in_prepared_kernels():
    """GEMM's data sets are written before the window: no page fault in it."""
    counted("PAGE-FAULTS")
    doc = validation.validate(["gemm"], sizes=[16], reps=50)
    (r,) = rows(doc, "perf::PAGE-FAULTS", "gemm")
    assert r["expected_per_rep"] == 0
    assert r["measured_per_rep"] * 50 <= r["truth_count"] + 16, r


def test_task_clock_against_kernel_cpu_time():
    """perf::TASK-CLOCK and the kernel's clock_gettime(CLOCK_THREAD_CPUTIME_ID) both read
    the thread's scheduler run time; the counter's window holds the kernel's plus the
    ctypes call and a getrusage each side: 1 % + 2 ms."""
    counted("TASK-CLOCK")
    doc = validation.validate(["gemm", "s1cf"], sizes=[48], reps=None)
    for kernel in ("gemm", "s1cf"):
        (r,) = rows(doc, "perf::TASK-CLOCK", kernel)
        cpu = r["expected_per_rep"] * r["repetitions"]
        measured = r["measured_per_rep"] * r["repetitions"]
        assert cpu > 1e6, r  # a millisecond at least, so the bound says something
        assert measured >= cpu * 0.999, r  # the window holds the kernel's
        assert measured - cpu <= 0.01 * cpu + 2e6, r


def test_sources_not_validated_here_are_named():
    """Each source this machine lacks is named with the reason `perfweave components`
    gives (here: PAPI's perf_event components disabled, pmcd without perfevent)."""
    doc = validation.validate(["touch"], sizes=[8], reps=2)
    why = {(n["source"], n["why"]) for n in doc["not_validated"]}
    papi = sources.probe_papi()
    if not papi["available"]:
        assert ("papi", papi["why"]) in why
    for item in papi["items"]:
        if item.startswith("perf_event: disabled"):
            assert ("papi", f"core and software events: {item}") in why
        if item.startswith("perf_event_uncore: disabled"):
            assert ("papi", f"memory traffic: {item}") in why
    pcp = sources.probe_pcp()
    if not pcp["available"]:
        assert ("pcp", pcp["why"]) in why
    elif not any(i.startswith("perfevent.hwcounters") for i in pcp["items"]):
        assert any(s == "pcp" and "no perfevent.hwcounters" in w for s, w in why), why


def test_pmcd_unreachable_is_named(monkeypatch):
    down = sources._source("pcp", "PCP", False, why="pmcd not reachable (test)")
    monkeypatch.setattr(sources, "probe_pcp", lambda: down)
    doc = validation.validate(["touch"], sizes=[8], reps=2)
    assert {"source": "pcp", "why": "pmcd not reachable (test)"} in doc["not_validated"]


def test_text_output_lists_rows_and_missing_sources():
    args = ("validate", "--kernels", "touch", "--sizes", "64", "--repetitions", "5")
    res, js = perfweave(*args), perfweave(*args, "--json")
    assert res.returncode == 0 and js.returncode == 0, res.stderr + js.stderr
    assert re.search(r"perf +perf::PAGE-FAULTS +touch +64 +5 +64.00 faults", res.stdout)
    missing = json.loads(js.stdout)["not_validated"]
    text = res.stdout.split("not validated on this machine:\n", 1)
    listed = text[1].splitlines() if len(text) > 1 else []
    assert listed == [f"  {n['source']}: {n['why']}" for n in missing]


@pytest.mark.parametrize(
    "args",
    [
        ["--kernels", "fft"],
        ["--sizes", "0"],
        ["--kernels", "s2cf", "--sizes", "10"],
        ["--papi-read", ":64"],
    ],
)
def test_user_errors_are_one_line(args):
    res = perfweave("validate", *args)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfweave: "), res.stderr
    assert "Traceback" not in res.stderr


def test_plot(tmp_path):
    out = tmp_path / "v.png"
    res = perfweave("validate", "--kernels", "touch", "--sizes", "32", "--plot", str(out))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert res.returncode != 0
        assert res.stderr.strip().splitlines() == [
            f"perfweave: error: validate: --plot {out}: matplotlib is not installed "
            "(pip install matplotlib)"
        ]
        assert not out.exists()
        return
    assert res.returncode == 0, res.stderr
    assert out.stat().st_size > 0


def test_pcp_page_faults_touch():
    """The node's page faults through pmcd (mem.vmstat.pgfault) over touch's repetitions:
    at least the pages touched (other processes only add). Without pmcd, the reason."""
    pcp = sources.probe_pcp()
    doc = validation.validate(["touch"], sizes=[300], reps=None)
    got = rows(doc, f"{validation.PCP_FAULTS} (node)", "touch")
    if not pcp["available"]:
        assert {"source": "pcp", "why": pcp["why"]} in doc["not_validated"]
        assert not got
        return
    (r,) = got
    pages = 300 * validation.repetitions(300)
    assert r["measured_per_rep"] * r["repetitions"] >= pages, r
    assert r["ok"] is True


class _PapiOnPerfEvent:
    """A PAPI whose event sets count with perfweave's own perf_event_open, standing for a
    machine where PAPI's perf_event component is active (here libpfm4 disables it): the
    counts are the kernel's, so validate's PAPI path is checked against the same truth."""

    def __init__(self):
        self.sets = {}

    def PAPI_create_eventset(self, ref):
        ref._obj.value = len(self.sets) + 1
        self.sets[ref._obj.value] = []
        return 0

    def PAPI_add_named_event(self, es, name):
        config = kernel_event(name.decode())
        if config is None:
            return -7  # PAPI_ENOEVNT
        self.sets[es.value].append(config)
        return 0

    def PAPI_start(self, es):
        from perfweave.papi import open_kernel_event

        self.fds = [open_kernel_event(c)[0] for c in self.sets[es.value]]
        return 0

    def PAPI_stop(self, es, values):
        for i, fd in enumerate(self.fds):
            values[i] = int.from_bytes(os.read(fd, 8), "little")
            os.close(fd)
        return 0

    def PAPI_cleanup_eventset(self, es):
        return 0

    def PAPI_destroy_eventset(self, ref):
        return 0

    def PAPI_strerror(self, rc):
        return b"Event does not exist"


def test_papi_path(monkeypatch):
    counted("PAGE-FAULTS")
    from perfweave import papi

    active = sources._source("papi", "PAPI", True, items=["perf_event: perf_event"])
    monkeypatch.setattr(sources, "probe_papi", lambda: active)
    monkeypatch.setattr(papi, "open_papi", lambda: (_PapiOnPerfEvent(), None))
    events = [("perf::PAGE-FAULTS", "read", 64), ("NO_SUCH_EVENT", "write", 64)]
    doc = validation.validate(["touch", "gemm"], sizes=[200], papi_events=events)
    (faults,) = rows(doc, "perf::PAGE-FAULTS", "touch")[1:]  # perf's row, then PAPI's
    assert faults["source"] == "papi"
    pages = 200 * faults["repetitions"]
    assert faults["truth_count"] >= pages
    assert abs(faults["measured_per_rep"] * faults["repetitions"] - pages) <= (
        faults["truth_count"] - pages + 16
    )
    (clock,) = [r for r in rows(doc, "perf::TASK-CLOCK", "touch") if r["source"] == "papi"]
    assert clock["ok"], clock
    # an event PAPI does not know: named with PAPI's reason, the rest still validated
    assert {
        "source": "papi",
        "why": "perf::PAGE-FAULTS, NO_SUCH_EVENT: PAPI: Event does not exist",
    } in doc["not_validated"]


def test_traffic_rows_models(monkeypatch):
    """The traffic rows' expected bytes a repetition are the paper's models, worked out by
    hand for N = 16; the events here (page faults, 64 bytes each) count none in kernels
    whose data are written before the window."""
    from perfweave import papi

    active = sources._source("papi", "PAPI", True, items=["perf_event: perf_event"])
    monkeypatch.setattr(sources, "probe_papi", lambda: active)
    monkeypatch.setattr(papi, "open_papi", lambda: (_PapiOnPerfEvent(), None))
    events = [("perf::PAGE-FAULTS", "read", 64), ("perf::MINOR-FAULTS", "write", 64)]
    doc = validation.validate(
        ["gemm", "gemv", "s1cf", "s2cf"], sizes=[16], reps=3, papi_events=events
    )
    model = {  # (read, write) bytes
        "gemm": (3 * 16 * 16 * 8, 16 * 16 * 8),  # A, B and C's write-allocate; C
        "gemv": ((16 * 16 + 16 + 16) * 8, 16 * 8),  # M N + M + N; y
        "s1cf": (2 * 16**3 * 16, 16**3 * 16),  # in and out's write-allocate; out
        "s2cf": (16**3 * 16, 16**3 * 16),  # one read per write
    }
    for kernel, (read, write) in model.items():
        got = [r for r in doc["rows"] if r["source"] == "papi" and r["kernel"] == kernel]
        assert [r["expected_per_rep"] for r in got] == [read, write], got
        assert [r["unit"] for r in got] == ["B", "B"]
        assert all(r["measured_per_rep"] * 3 <= 16 * 64 for r in got), got
