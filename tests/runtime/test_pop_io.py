"""perfweave pop's useful time where the experiment measured I/O (--io --trace): time in
I/O calls outside MPI is not useful, and is shown per location. programs/pop_io.c
writes and fsyncs a known amount between MPI calls and measures, by its own clock, its
I/O and its computation."""

import json
import re
import subprocess

import numpy as np
from harness import PERFWEAVE

# As in test_pop_runs.py: a rank preempted between its own clock reading and the
# wrapper's moves that time between the accounts (seen 4 ms in a run)
USEFUL_S = 0.006
LINE = re.compile(r"rank (\d+) compute_s ([\d.]+) io_s ([\d.]+) bytes (\d+)")


def test_io_is_not_useful(mpi, build, run_pw, tmp_path):
    prog = build(mpi, "pop_io.c")
    out = tmp_path / "out"
    out.mkdir()
    r = run_pw(mpi.launch(2) + [prog, out, 10, 0.01], options=["--trace"])  # --io: the default
    own = {int(m[1]): (float(m[2]), float(m[3]), int(m[4])) for m in LINE.finditer(r.proc.stdout)}
    assert sorted(own) == [0, 1], r.proc.stdout
    compute, io, nbytes = (np.array([own[k][i] for k in (0, 1)]) for i in range(3))
    assert list(nbytes) == [10 * 4 << 20, 20 * 4 << 20]  # the program wrote what it meant to
    p = subprocess.run(
        [PERFWEAVE, "pop", "--json", str(r.exp)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    u = json.loads(p.stdout)["useful"]
    assert [(x["rank"], x["thread"]) for x in u["locations"]] == [(0, 0), (1, 0)]
    # the check tells I/O from useful time only if the I/O is well above the tolerance
    assert io.min() > 3 * USEFUL_S, io
    assert np.abs(np.array(u["io_seconds"]) - io).max() < USEFUL_S, (u["io_seconds"], io)
    assert np.abs(np.array(u["seconds"]) - compute).max() < USEFUL_S, (u["seconds"], compute)
    # with --no-io the I/O column is absent, and the I/O counts as useful
    r2 = run_pw(mpi.launch(2) + [prog, out, 10, 0.01], options=["--trace", "--no-io"])
    p = subprocess.run(
        [PERFWEAVE, "pop", "--json", str(r2.exp)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["useful"]["io_seconds"] is None
