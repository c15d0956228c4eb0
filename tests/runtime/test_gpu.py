"""The gpu module (runtime/modules/gpu.c) against a fake CUPTI and a fake CUDA runtime
built here from CUPTI's own headers (programs/fake_cupti.c, fake_cudart.c: there is no GPU
on CI). The program (programs/gpu_app.c) writes every record the fake made, with its
start and end, and its own clock around the first launch and each wait: kernels, copies,
memsets, waits and API calls must come out exactly (counts, bytes, ns), each device's busy
time must be the union of the intervals it wrote, the first activity must lie within the
program's clock bracket (2 ms: the measured offset's error under load, when CUPTI cannot
take perfweave's clock), records CUPTI dropped must be counted, a process whose CUPTI is
missing must get one report line, and a process without CUDA no gpu/ data."""

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import perfweave
from harness import FLAVORS, PROGRAMS, bare

ROOT = Path(__file__).resolve().parents[2]
SKEW_NS = 5_000_000_000_000  # fake_cupti.c FAKE_SKEW_NS: its own clock's offset
BRACKET_NS = 2_000_000
OPENMPI = FLAVORS["openmpi"]


@pytest.fixture(scope="module")
def fake_cuda(build_dir):
    """{"cupti": folder with libcudart.so.12 and libcupti.so.12, "bare": folder with only
    libcudart.so.12}, built against the CUDA wheels' headers (make install)."""
    inc = subprocess.run(
        [sys.executable, ROOT / "scripts" / "cuda_headers.py"], capture_output=True, text=True
    ).stdout
    assert inc, "the CUDA header wheels are not installed (make install installs them)"
    flags = [f"-isystem{d}" for d in inc.split(";")]
    out = {}
    for name, libs in (("cupti", ("cupti", "cudart")), ("bare", ("cudart",))):
        d = build_dir / f"fakecuda-{name}"
        d.mkdir(exist_ok=True)
        for lib in libs:
            so = f"lib{lib}.so.12"
            cmd = ["gcc", "-shared", "-fPIC", "-O1", *flags, f"-Wl,-soname,{so}", "-o",
                   str(d / so), str(PROGRAMS / f"fake_{lib}.c"), "-ldl", "-lpthread"]  # fmt: skip
            res = subprocess.run(cmd, capture_output=True, text=True)
            assert res.returncode == 0, res.stderr
        (d / "libcudart.so").unlink(missing_ok=True)
        (d / "libcudart.so").symlink_to("libcudart.so.12")
        out[name] = d
    return out


def linked(d):
    return (f"-L{d}", "-Wl,--no-as-needed", "-lcudart", f"-Wl,-rpath,{d}", "-ldl")


def truth(d):
    """Per rank: what the program did (its truth-R.txt files)."""
    out = {}
    for f in sorted(Path(d).glob("truth-*.txt")):
        t = defaultdict(list)
        for line in f.read_text().splitlines():
            p = line.split(" ")
            t[p[0]].append(p[1:])
        out[int(f.stem.split("-")[1])] = t
    return out


def expected_kernels(t):
    rows = defaultdict(list)
    for name, dev, stream, *gb, s, e in t["K"]:
        key = (name, int(dev), int(dev) + 1, int(stream), *map(int, gb))
        rows[key].append(int(e) - int(s))
    return {k: (len(v), sum(v), min(v), max(v)) for k, v in rows.items()}


def expected_copies(t):
    rows = defaultdict(lambda: [0, 0, 0])
    for direction, src, dst, dev, stream, nbytes, s, e in t["C"]:
        r = rows[(direction, src, dst, int(dev), int(dev) + 1, int(stream))]
        r[0] += 1
        r[1] += int(nbytes)
        r[2] += int(e) - int(s)
    return {k: tuple(v) for k, v in rows.items()}


def union_ns(t):
    """Device 0's busy time: the union of the kernels' and copies' intervals."""
    iv = sorted((int(p[-2]), int(p[-1])) for p in t["K"] + t["C"])
    total, end = 0, None
    for s, e in iv:
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total, iv[0][0]


def check_rank(doc, t, clock):
    """One rank's gpu/ file against what its program did."""
    assert doc["status"] == "active" and doc["note"] == "" and doc["clock"] == clock
    made, dropped = map(int, t["E"][0])
    assert (doc["records"], doc["dropped"], doc["lost"]) == (made - dropped, dropped, 0)
    kernels = {tuple(r[:10]): tuple(r[10:]) for r in doc["kernels"]}
    assert kernels == expected_kernels(t)
    copies = {tuple(r[:6]): tuple(r[6:]) for r in doc["copies"]}
    assert copies == expected_copies(t)
    syncs = {(r[0], r[2]): r for r in doc["syncs"]}
    assert set(syncs) == {(ty, int(st)) for ty, st, *_ in t["S"]}
    for ty, st, s, e, host_ns in t["S"]:
        row = syncs[(ty, int(st))]
        assert (row[3], row[4]) == (1, int(e) - int(s))
        # the record lies within the program's own bracket of the call
        assert int(host_ns) - BRACKET_NS <= row[4] <= int(host_ns)
    apis = {r[1]: r[2] for r in doc["apis"]}
    assert apis == {
        "cudaLaunchKernel": len(t["K"]),
        "cudaMemcpy": sum(c[0] != "memset" for c in t["C"]),
        "cudaMemset": 1,
        "cudaStreamSynchronize": 1,
        "cudaDeviceSynchronize": 1,
    }
    busy, first = union_ns(t)
    ((dev, busy_ns, first_ns, _),) = doc["busy"]
    assert (dev, busy_ns) == (0, busy)
    before, after = map(int, t["T"][0])
    if clock == "callback":
        assert first_ns == first  # CUPTI's times are perfweave's clock's
    else:  # the fake's own clock, put on perfweave's by the offset measured at the start
        assert first_ns == first + doc["clock_offset_ns"]
        assert abs(doc["clock_offset_ns"] + SKEW_NS) <= BRACKET_NS
    assert before - BRACKET_NS <= first_ns <= after + BRACKET_NS


def test_gpu_activity_exact_per_rank(mpi, build, run_pw, fake_cuda, tmp_path):
    prog = build(mpi, "gpu_app.c", linked(fake_cuda["cupti"]))
    r = run_pw([*mpi.launch(2), prog, "linked", tmp_path, 0])
    t = truth(tmp_path)
    assert sorted(t) == [0, 1]
    for rank, tr in t.items():
        doc = json.loads((r.exp / "gpu" / f"rank-{rank}.json").read_text())
        assert doc["pid"] == int(tr["P"][0][0])
        check_rank(doc, tr, "callback")
    # the model, the analysis' tables, the report
    g = perfweave.open(r.exp).gpu
    assert [p.rank for p in g.processes] == [0, 1] and not g.notes
    df = perfweave.open(r.exp).table("gpu", "kernels")
    names = {
        m: subprocess.run(["c++filt", m], capture_output=True, text=True).stdout.strip()
        for m in set(df["mangled"])
    }
    assert names["_Z7stencilPKdPdi"] == "stencil(double const*, double*, int)"
    assert all(df["name"] == df["mangled"].map(names))
    assert df.groupby("rank")["launches"].sum().tolist() == [len(t[0]["K"]), len(t[1]["K"])]
    rep = r.report()["gpu"]
    assert rep["launches"] == sum(len(x["K"]) for x in t.values())
    assert rep["copy_bytes"] == sum(int(c[5]) for x in t.values() for c in x["C"])
    waits = {w["rank"]: w["gpu_wait_s"] for w in rep["per_rank"]}
    for rank, tr in t.items():
        assert waits[rank] == pytest.approx(sum(int(e) - int(s) for _, _, s, e, _ in tr["S"]) / 1e9)
    htod = [c for c in rep["copies"] if c["direction"] == "HtoD"]
    assert all(c["rate_gbs"] == pytest.approx(c["bytes"] / c["time_s"] / 1e9) for c in htod)
    text = r.text_report()
    assert "GPU activity (CUDA, through CUPTI)" in text
    assert "mini::reduce<double>(double const*, double*, int)" in text


def test_gpu_opened_later_offset_clock(build, run_pw, fake_cuda, tmp_path, monkeypatch):
    """CUDA opened by the program after its start (found through CUDA_INJECTION64_PATH,
    which the driver reads at cuInit), and a CUPTI that cannot take perfweave's clock: the
    offset measured at activation puts its times on perfweave's clock."""
    prog = build(OPENMPI, "gpu_app.c", ("-ldl",))
    monkeypatch.setenv("FAKE_CUPTI_NO_TIMESTAMP_CALLBACK", "1")
    r = run_pw([prog, fake_cuda["cupti"] / "libcudart.so.12", tmp_path, 0])
    doc = json.loads((r.exp / "gpu" / "rank-0.json").read_text())
    assert doc["cuda"] == str(fake_cuda["cupti"] / "libcudart.so.12")
    check_rank(doc, truth(tmp_path)[0], "offset")


def test_gpu_drops_counted(build, run_pw, fake_cuda, tmp_path):
    prog = build(OPENMPI, "gpu_app.c", linked(fake_cuda["cupti"]))
    r = run_pw([prog, "linked", tmp_path, 300], ["--gpu-buffers", "1", "--gpu-buffer-kb", "8"])
    (tr,) = truth(tmp_path).values()
    doc = json.loads((r.exp / "gpu" / "rank-0.json").read_text())
    made, dropped = map(int, tr["E"][0])
    assert dropped > 0 and doc["dropped"] == dropped and doc["records"] == made - dropped
    assert doc["buffers"] == 1
    rep = r.report()["gpu"]
    assert rep["dropped"] == dropped
    assert f"{dropped:,} records dropped by CUPTI" in " ".join(r.text_report().split())


def test_gpu_missing_cupti_and_no_cuda(build, run_pw, fake_cuda, tmp_path):
    prog = build(OPENMPI, "gpu_app.c", linked(fake_cuda["bare"]))
    ref = bare([prog, "linked", tmp_path, 0])
    r = run_pw([prog, "linked", tmp_path, 0])
    assert r.proc.stdout == ref.stdout == "rank 0 done\n"
    doc = json.loads((r.exp / "gpu" / "rank-0.json").read_text())
    assert doc["status"] == "no-cupti" and doc["kernels"] == [] and doc["records"] == 0
    assert str(fake_cuda["bare"]) in doc["note"]
    rep = r.report()["gpu"]
    assert rep["lines"] == [f"rank 0: {doc['note']}"] and rep["active"] == 0
    assert f"rank 0: {doc['note']}" in r.text_report()
    # a process without CUDA: nothing
    plain = build(OPENMPI, "barrier_late.c")
    r = run_pw([plain])
    assert not (r.exp / "gpu").exists() and "gpu" not in r.report()
