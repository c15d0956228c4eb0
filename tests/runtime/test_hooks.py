"""Hooks between modules (pw.h "hooks", docs/architecture.md "Hooks between modules"): a
module offers a hook by name in its start and another finds it by that name. A program run
under the runtime looks the modules' hooks up as a module would, after their starts: the
counters module's four and the io module's one are there when those modules are on and
absent (NULL) when they are off; a name nobody offers is absent; a hook offered from outside
the modules is found as offered; an offer that comes after a look-up is reported, since
the module that looked goes without it. What each hook does is tested where it serves:
test_counters.py (call_enter, call_leave, app_begin), test_sampling_tree_counters.py
(read_events), test_io_mpi.py (pw_io_file_call)."""

COUNTERS = [
    "pw_counters_call_enter",
    "pw_counters_call_leave",
    "pw_counters_app_begin",
    "pw_counters_read_events",
]
IO = ["pw_io_file_call"]
ABSENT = "pw_no_such_hook"


def found(stdout):
    return {k: v == "1" for k, v in (line.split() for line in stdout.splitlines())}


def test_modules_hooks_are_found_when_offered_and_null_when_not(build, run_pw):
    prog = build(None, "hook_registry.c")
    names = [*COUNTERS, *IO, ABSENT]
    on = run_pw([prog, *names], ["--counters", "perf::TASK-CLOCK", "--io"]).proc
    got = found(on.stdout)
    assert got == {
        **dict.fromkeys(COUNTERS + IO, True),
        ABSENT: False,
        "own": True,
        "late_hook": False,
    }
    late = [line for line in on.stderr.splitlines() if "late_hook" in line]
    assert late == [
        "perfweave: hook late_hook offered after a module looked it up: that module goes without it"
    ]
    off = run_pw([prog, *names], ["--no-io"]).proc  # the I/O profile is on by default
    assert found(off.stdout) == {**dict.fromkeys(names, False), "own": True, "late_hook": False}
