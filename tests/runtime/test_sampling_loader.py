"""Sampling while the dynamic loader changes the list of modules (dlopen and dlclose in a
loop, under 1 ms sampling with libunwind and with frame pointers): the program runs to
its end with the same output as without perfweave, and is sampled all along."""

import subprocess

import pytest

from harness import PROGRAMS, bare, reported
from perfweave.readers.samples import read_samples


@pytest.mark.parametrize("unwinder", ["libunwind", "frame pointers"])
def test_dlopen_dlclose_loop_under_sampling(build, build_dir, run_pw, unwinder):
    plugin = build_dir / "libplugin.so"
    if not plugin.exists():
        res = subprocess.run(
            ["gcc", "-g", "-O1", "-shared", "-fPIC", "-o", str(plugin), str(PROGRAMS / "plugin.c")],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0, res.stderr
    prog = build(None, "dlopen_loop.c", ("-ldl",))
    ref = bare([prog, plugin, 0.3])
    # a buffer for every sample of the run (no thinning: see --sample-capacity)
    opts = ["--sample-interval-ms", "1", "--sample-capacity", "4000"] + (
        [] if unwinder == "libunwind" else ["--no-sample-libunwind"]
    )
    r = run_pw([prog, plugin, 1.5], opts, timeout=60, check=False)
    assert r.proc.returncode == ref.returncode == 0, r.proc.stderr
    assert r.proc.stdout == ref.stdout == "loops 1 sum 1\n"
    [p] = read_samples(r.exp)
    # ~1000 at 1 ms (+-50 % jitter) over 1.5 s on an idle core: a sample per 1 ms of the
    # program's CPU time at least, less the handler's own (30 % margin, test_sampling.py)
    [cpu_s] = reported(r.proc, "cpu")
    assert len(p.records) >= 0.7 * cpu_s / 0.001, (len(p.records), cpu_s)
    if unwinder == "libunwind":
        assert p.meta["unwinder"] == "libunwind"
