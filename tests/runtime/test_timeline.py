"""The node timeline (perfweave run, node-level sources) against ground truth: bytes a
program sends over the loopback interface, the same bytes as pmcd counts them (PCP),
CPU time a program burns, one sampler per node, sources that are absent said so. The
timeline is read through the Python API (perfweave.open(...).timelines, the model); the
report's node-timeline section (its per-series totals and rates, its labels of the ranks'
series, its activity over time) is read from `perfweave report --json`: its own figures."""

import json
import re
import shutil
import subprocess

import pytest

from harness import PERFWEAVE
from perfweave import _format

MIB = 1 << 20


def pcp_raw(metric, instance):
    """pmcd's current raw value of a counter instance (pmval -r), or None."""
    res = subprocess.run(
        ["pmval", "-r", "-s", "1", "-i", instance, metric],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if res.returncode:
        return None
    vals = [ln.split()[-1] for ln in res.stdout.splitlines() if ln.strip()[:1].isdigit()]
    return float(vals[-1]) if vals else None


def pcp_up():
    return (
        shutil.which("pminfo")
        and subprocess.run(
            ["pminfo", "-f", "kernel.all.cpu.user"], capture_output=True, timeout=30
        ).returncode
        == 0
    )


def test_loopback_bytes_and_cpu_time(build, run_pw):
    prog = build(None, "loopback.c")
    r = run_pw([prog, 120, 800], ["--node-interval", "50"])
    assert "received 125829120 bytes" in r.proc.stdout
    [tl] = r.open().timelines
    sent = 120 * MIB
    # every byte crosses lo once: received (rx) and sent (tx) count it; TCP/IP headers
    # and ACKs add well under 1 %, other loopback traffic during the run little
    for what in ("lo.rx_bytes", "lo.tx_bytes"):
        got = tl.total(tl.index("net", what))
        assert sent <= got <= 1.05 * sent, (what, got)
    # the program's own CPU time, as getrusage gave it at the end: 0.8 s burnt (plus the
    # copies of 120 MiB) on an idle machine, 0.1 s seen beside busy loops, for it burns
    # 0.8 s of wall time. /proc counts in 10 ms ticks (one at either end of the series),
    # and the series starts after the process's start-up (15 ms seen under load)
    meta = json.loads((r.exp / "timeline" / f"{tl.host}.json").read_text())
    pid = int((r.exp / "timeline" / f"{tl.host}.pids").read_text().split()[0])
    cpu = tl.total(tl.index("proc", f"{pid}.cpu_ns")) / 1e9
    (used,) = re.findall(r"^cpu ([\d.]+)$", r.proc.stdout, re.M)
    assert float(used) - 0.04 <= cpu <= float(used) + 0.02, (cpu, used)
    # samples every 50 ms over the run, the sampler's own cost reported
    dur = (tl.t[-1] - tl.t[0]) / 1e9
    assert 0.9 <= dur <= 10 and len(tl.t) >= 0.6 * dur / 0.05
    assert meta["complete"] and meta["interval_ms"] == 50
    assert list(meta) == list(_format.JSON["timeline"])  # the writer writes what is declared
    assert 0 < meta["sampler_cpu_ns"] < 0.2 * dur * 1e9
    # rates: the transfer runs at hundreds of MB/s on loopback, peak above the mean
    rate = tl.rates()[:, tl.index("net", "lo.rx_bytes")]
    assert rate.max() >= sent / dur

    rep = r.report()["node_timeline"]["nodes"][0]
    row = next(s for s in rep["series"] if s["name"] == "lo.rx_bytes")
    assert sent <= row["total"] <= 1.05 * sent and row["peak_rate"] >= row["mean_rate"] > 0
    text = r.text_report()
    assert "Node timeline: " in text and "lo.rx_bytes" in text and "sampler thread" in text


def test_absent_sources_are_named_and_the_run_succeeds(build, run_pw):
    prog = build(None, "loopback.c")
    r = run_pw([prog, 1], ["--pcp", "no.such.metric"])
    [tl] = r.open().timelines
    absent = tl.absent
    # this machine has no GPU and no InfiniBand (the test suite's premise)
    assert "nvml" in absent and "libnvidia-ml" in absent["nvml"]
    assert "infiniband" in absent and "InfiniBand" in absent["infiniband"]
    assert "no.such.metric" in " ".join(absent) or "pcp" in absent
    text = r.text_report()
    assert "absent     nvml: " in text and "absent     infiniband: " in text
    comps = json.loads(
        subprocess.run(
            [PERFWEAVE, "components", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    )
    by = {s["source"]: s for s in comps["sources"]}
    assert set(by) >= {"papi", "pcp", "nvml", "infiniband", "rapl", "net", "proc"}
    assert not by["nvml"]["available"] and by["nvml"]["why"]
    assert not by["infiniband"]["available"] and by["infiniband"]["why"]
    assert by["net"]["available"] and "lo" in by["net"]["items"]
    assert by["proc"]["available"]


def test_pcp_metric_matches_pmval(build, run_pw):
    if not pcp_up():
        pytest.fail("pmcd is not running: make test starts it (scripts/install-deps.sh)")
    prog = build(None, "loopback.c")
    metric = "network.interface.in.bytes"
    before = pcp_raw(metric, "lo")
    r = run_pw(
        [prog, 80, 300], ["--pcp", f"kernel.all.cpu.user,{metric}", "--node-interval", "100"]
    )
    after = pcp_raw(metric, "lo")
    [tl] = r.open().timelines
    ours = tl.total(tl.index("pcp", f"{metric}[lo]"))
    # pmval's two readings enclose the sampler's interval, which holds the 80 MiB
    assert before is not None and after is not None
    assert 80 * MIB <= ours <= after - before <= 1.1 * ours, (ours, after - before)
    # the same bytes as /proc/net/dev counted them
    assert ours == pytest.approx(tl.total(tl.index("net", "lo.rx_bytes")), rel=0.05)
    # user CPU of all CPUs (ms, a counter): at least the 0.3 s the program burnt
    user = tl.total(tl.index("pcp", "kernel.all.cpu.user"))
    dur_ms = (tl.t[-1] - tl.t[0]) / 1e6
    assert 250 <= user <= 2 * dur_ms + 200
    assert tl.series[tl.index("pcp", "kernel.all.cpu.user")]["kind"] == "counter"


def test_one_sampler_per_node_with_every_rank(mpi, build, run_pw):
    prog = build(mpi, "barrier_late.c")
    r = run_pw(mpi.launch(4) + [prog])
    files = sorted(p.name for p in (r.exp / "timeline").iterdir())
    [tl] = r.open().timelines
    assert sum(f.endswith(".values") for f in files) == 1
    pids = (r.exp / "timeline" / f"{tl.host}.pids").read_text().split()
    assert len(pids) == 4
    rep = r.report()["node_timeline"]["nodes"][0]
    ranks = {s["label"].split(".")[0] for s in rep["series"] if s["source"] == "proc"}
    assert ranks == {f"rank {i}" for i in range(4)}


def test_node_interval_zero_disables(build, run_pw):
    prog = build(None, "loopback.c")
    r = run_pw([prog, 1], ["--node-interval", "0"])
    assert not (r.exp / "timeline").exists()
    assert not r.open().timelines


def test_activity_over_time_tells_the_phases_apart(mpi, build, run_pw):
    """Each rank's time in MPI by family, sampled from its activity page: a compute
    phase, a collective phase and a point-to-point phase of 0.6 s each."""
    prog = build(mpi, "phases.c")
    r = run_pw(mpi.launch(3) + [prog, 600], ["--node-interval", "50"])
    phases = {
        ln.split()[1]: (int(ln.split()[2]), int(ln.split()[3]))
        for ln in r.proc.stdout.splitlines()
        if ln.startswith("phase ")
    }
    assert set(phases) == {"compute", "coll", "p2p"}
    [tl] = r.open().timelines
    pids = (r.exp / "timeline" / f"{tl.host}.pids").read_text().split()
    assert len(pids) == 3

    def share(pid, fam, a, b):
        # a window inside the phase, one tick and more away from its ends
        d, dt = tl.window(tl.index("proc", f"{pid}.mpi_{fam}_ns"), a + 100_000_000, b - 100_000_000)
        return d / dt

    for pid in pids:
        a, b = phases["compute"]
        assert all(share(pid, f, a, b) < 0.05 for f in ("p2p", "coll", "other"))
        a, b = phases["coll"]
        assert share(pid, "coll", a, b) > 0.8 and share(pid, "p2p", a, b) < 0.05
        a, b = phases["p2p"]
        assert share(pid, "p2p", a, b) > 0.7 and share(pid, "coll", a, b) < 0.25
    ot = r.report()["node_timeline"]["nodes"][0]["over_time"]
    assert ot["processes"] == 3 and {"p2p", "coll"} <= set(ot["activity"])
    outside = [s["activity_pct"]["outside_mpi"] for s in ot["slices"]]
    assert max(outside) > 90 and min(outside) < 20
    assert "outside MPI" in r.text_report()
