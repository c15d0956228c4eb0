"""perfweave never changes the descriptor numbers a program gets: open and dup return the
lowest free number (POSIX), and programs rely on it (a shell redirecting output closes a
descriptor and dup2()s onto it). The node timeline's thread opens /proc and /sys files
every tick; in the program's descriptor table those would take the number the program
just freed (or make its dup2 fail with EBUSY while the open is under way): caught with
a shell redirect, `sh: 1: 2: Device or resource busy`. fd_numbers.c frees and retakes
one number ~10^5 times while that thread ticks every millisecond."""

import json

from harness import bare
from perfweave.readers.timeline import read_timelines

FAST_NODE = ["--node-interval", "1"]


def counts(stdout):
    out = {}
    for line in stdout.splitlines():
        words = line.split()
        if words and words[0] in ("first", "rounds"):
            out.update({k: int(v) for k, v in zip(words[::2], words[1::2])})
    return out


def ticks(exp):
    [tl] = read_timelines(exp)
    meta = json.loads((exp / "timeline" / f"{tl.host}.json").read_text())
    return meta["ticks"]


def test_descriptor_numbers_are_the_programs(build, run_pw):
    prog = build(None, "fd_numbers.c")
    want = counts(bare([prog, "0.2"]).stdout)
    assert want["moved"] == want["busy"] == want["failed"] == 0
    r = run_pw([prog, "1"], FAST_NODE)
    got = counts(r.proc.stdout)
    assert got["rounds"] > 1000, got
    assert got["moved"] == got["busy"] == got["failed"] == 0, got
    # the node thread ticked all along the loop (~1 ms ticks over 1 s)
    assert ticks(r.exp) > 200
    # descriptors perfweave keeps for the run are out of the low numbers: the program's
    # first open() gets the number it gets without perfweave, sampled (the default:
    # libunwind's pipe, made at its init, is closed, never used) or not
    assert got["first"] == want["first"], got
    r = run_pw([prog, "0.2"], FAST_NODE + ["--no-sample"])
    assert counts(r.proc.stdout)["first"] == want["first"]


def test_descriptor_numbers_under_mpi(mpi, build, run_pw):
    prog = build(mpi, "fd_numbers.c", ("-DWITH_MPI",))
    r = run_pw(mpi.launch(2) + [prog, "1"], FAST_NODE)
    lines = [l for l in r.proc.stdout.splitlines() if l.startswith("rounds")]
    assert len(lines) == 2, r.proc.stdout
    for line in lines:
        got = counts(line)
        assert got["rounds"] > 1000 and got["moved"] == got["busy"] == got["failed"] == 0, line
    assert ticks(r.exp) > 200


def test_no_thread_keeps_a_copy_of_the_programs_descriptors(build, run_pw):
    """The node thread copies the descriptor table (unshare) and must close every copied
    descriptor: one it kept would hold a pipe's write end open after the program closed
    it, and the pipe's reader would never see EOF (a live Open MPI singleton hung so in
    MPI_Init, its daemon's pipe held by that thread). fd_churn.c makes and closes pipes
    from its first instruction while the thread starts, then looks for their write ends
    in every thread's table."""
    prog = build(None, "fd_churn.c")
    for _ in range(3):
        r = run_pw([prog, "0.3"], FAST_NODE)
        words = r.proc.stdout.split()
        assert words[:1] == ["pipes"] and int(words[1]) > 1000, r.proc.stdout
        assert words[2:] == ["leaked", "0"], r.proc.stdout
