"""The example module (runtime/modules/example.c, --example), the template of a runtime
module: its wrapper counts and times the program's sched_yield calls, and its dump writes
example/HOST.PID.json. The program counts its own calls and times its loops around them:
the file must hold exactly that count, from exactly its threads, and no more time than
the loops took. Off by default: no file, and the program sees the same results."""
import json

from harness import bare

THREADS, CALLS = 3, 2000


def program_values(stdout):
    return {k: int(v) for k, v in (line.split() for line in stdout.splitlines())}


def test_example_module_counts_the_programs_calls(build, run_pw):
    prog = build(None, "yield_count.c", ("-pthread",))
    r = run_pw([prog, THREADS, CALLS], ["--example"])
    got = program_values(r.proc.stdout)
    assert got["calls"] == THREADS * CALLS and got["rc"] == 0
    files = list((r.exp / "example").iterdir())
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert files[0].name == f"{data['host']}.{got['pid']}.json"
    assert data["format"] == "perfweave-example" and data["version"] == 1
    assert data["function"] == "sched_yield" and data["state"] == "complete"
    assert (data["rank"], data["pid"]) == (-1, got["pid"])
    assert data["threads"] == THREADS  # the main thread made no call
    assert data["calls"] == THREADS * CALLS
    # each call is timed inside its thread's loop
    assert 0 < data["max_ns"] <= data["total_ns"] <= got["loop_ns"]


def test_example_module_off_by_default(build, run_pw):
    prog = build(None, "yield_count.c", ("-pthread",))
    ref = program_values(bare([prog, THREADS, CALLS]).stdout)
    r = run_pw([prog, THREADS, CALLS])
    got = program_values(r.proc.stdout)
    assert (got["calls"], got["rc"]) == (ref["calls"], ref["rc"]) == (THREADS * CALLS, 0)
    assert not (r.exp / "example").exists()
