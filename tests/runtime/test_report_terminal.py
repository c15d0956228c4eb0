"""The default text report of a small run fits a terminal: trace_basic.c on 4 ranks,
traced, sampled and analysed (every section of the report present), under each MPI.
MPICH's library version string is over 1,000 characters on one line; Open MPI's is
short. Expected: no line over 100 characters, at most 111 lines (the report of such a
run was 157 lines before; 98-99 before the start-up line of issue 22, 2 lines, was
added; issue 33 added a line of root causes in the wait states and the POP factors'
section, a line after a blank one, and shows the clock condition only when it fails;
issue 35 the communication matrix, 8 lines: a blank, its title, a table of the top 4
pairs with its header, and the line saying where the rest is: 103 before it; issue 35
point 7 the I/O profile on by default, 2 lines, a blank and one, when the program's I/O
is under 1 % of the wall time, and its I/O share in the samples' split, which wraps
that line's header once more: 111 before it),
every table cut to --max-rows with the rows left out counted in an "N more" line, the
full names in --json and in --full."""

import json
import re
import subprocess

from harness import PERFWEAVE

WIDTH, MAX_LINES = 100, 114


def report(exp, *args):
    res = subprocess.run(
        [PERFWEAVE, "report", *args, str(exp)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def section(lines, title):
    """The lines of the section whose title starts with title, up to the next blank."""
    i = next(k for k, ln in enumerate(lines) if ln.startswith(title))
    end = next((k for k in range(i + 1, len(lines)) if not lines[k]), len(lines))
    return lines[i + 1 : end]


def test_default_report_fits_a_terminal(mpi, build, run_pw):
    prog = build(mpi, "trace_basic.c")
    r = run_pw(mpi.launch(4) + [prog], options=["--trace"])
    res = subprocess.run(
        [PERFWEAVE, "analyze", str(r.exp)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(report(r.exp, "--json"))
    text = report(r.exp)
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH, max(lines, key=len)
    assert len(lines) <= MAX_LINES, text
    for title in (
        "Where the time goes",
        "Advice",
        "MPI time per rank",
        "Balance",
        "MPI functions by time",
        "MPI call sites",
        "Wait states",
        "Message sizes",
        "Node timeline",
    ):
        assert any(ln.startswith(title) for ln in lines), (title, text)

    # 11 MPI functions (Send, Recv, Irecv, Isend, Waitall, Comm_split, Barrier, Bcast,
    # Comm_free, Comm_rank, Comm_size): 4 rows and "7 more"
    fns = data["mpi_profile"]["functions"]
    assert len(fns) == 11, [f["name"] for f in fns]
    rows = section(lines, "MPI functions by time")
    assert len(rows) == 1 + 4 + 1, rows  # header, 4 rows, the hint
    assert rows[-1].startswith("  (7 more functions; --max-rows N or --full"), rows
    sites = data["mpi_profile"]["callsites_total"]
    rows = section(lines, "MPI call sites")
    assert rows[-1].startswith(f"  ({sites - 4} more call sites;"), rows

    # the MPI library: its whole version string in --json, its name and version on the
    # text's one MPI line (issue 22)
    lib = data["mpi_profile"]["mpi_library"]
    [mpi_line] = [ln for ln in lines if ln.startswith("  MPI        ")]
    name = {"mpich": "MPICH", "openmpi": "Open MPI"}[mpi.name]
    assert re.fullmatch(
        rf"  MPI        {name} v?[0-9.]+ \(perfweave runtime: {mpi.name}\)", mpi_line
    ), mpi_line
    assert lib.startswith(name) and len(lib) > len(mpi_line) - 13 - len(
        f" (perfweave runtime: {mpi.name})"
    )

    # --max-rows and --full show more
    more = report(r.exp, "--max-rows", "20").splitlines()
    assert len(section(more, "MPI functions by time")) == 1 + 11
    full = report(r.exp, "--full")
    assert mpi_line in full.splitlines()
    assert len(full.splitlines()) > len(lines)
