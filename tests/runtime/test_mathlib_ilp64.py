"""The mathlib module under an ILP64 library: Debian 12's libopenblas64
(libopenblas64-pthread-dev) has 64-bit integers under the usual names (dgemm_,
cblas_dgemm: it exports no NAME_64_ symbol, checked here with nm), so the LP64 wrappers
answer its calls: a Fortran dimension is read through its pointer (the low 32 bits of
the INTEGER*8: exact below 2^31), a CBLAS integer passed by value is taken and passed on
as the whole 64-bit register or stack slot (gen_wrappers.py WIDE). The program
(tests/runtime/programs/ml_ilp64.c: 3 dgemm_ and 3 cblas_dgemm with int64_t integers)
must give the same results with and without perfweave, and exact calls and flops."""

import subprocess

from harness import bare, site_lines
from test_mathlib import per_routine

LIB = "/usr/lib/x86_64-linux-gnu/libopenblas64.so.0"
OUT = "dgemm_ c0 80.0 cblas_dgemm c0 210.0\n"


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True)
    assert out.returncode == 0, f"{library} (libopenblas64-pthread-dev) is missing"
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


def test_ilp64_openblas_user_calls_and_flops(build, run_pw):
    names = exported(LIB)
    assert {"dgemm_", "cblas_dgemm"} <= names
    # no 64_-suffixed twins in Debian's build: the NAME_64_ wrappers have nothing to answer
    assert not {"dgemm_64_", "cblas_dgemm64_"} & names
    prog = build(None, "ml_ilp64.c", ("-lopenblas64",))
    assert bare([prog]).stdout == OUT
    r = run_pw([prog])
    assert r.proc.stdout == OUT
    ml = r.open().mathlib
    assert len(ml.processes) == 1 and not ml.notes
    assert per_routine(ml, 0) == {
        "dgemm_": (3, 3 * 2.0 * 96 * 80 * 40),
        "cblas_dgemm": (3, 3 * 2.0 * 50 * 60 * 70),
    }
    c = ml.calls
    assert all("libopenblas64" in lib for lib in c["library"])
    assert (c["dim0_sum"][c["routine"] == "dgemm_"] == 3 * 96).all()
    assert set(c["chars"][c["routine"] == "cblas_dgemm"]) == {"CNN"}
    lines = site_lines("ml_ilp64.c")
    sites = {s["routine"]: s["where"] for s in r.report()["mathlib"]["callsites"]}
    assert sites == {
        "dgemm_": f"ml_ilp64.c:{lines['f']}",
        "cblas_dgemm": f"ml_ilp64.c:{lines['c']}",
    }
