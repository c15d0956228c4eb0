"""perfweave analyze: automatic wait-state analysis of an experiment's event traces."""

import json
import sys
from pathlib import Path

from perfweave import writing
from perfweave.cli.args import positive


def setup_parser(sub):
    p = sub.add_parser(
        "analyze",
        help="find wait states in an experiment's event traces",
        description="Search the event traces of an experiment (perfweave run --trace) for "
        "wait states: Late Sender and Receiver, waits at barriers and "
        "collectives, MPI-2 one-sided (RMA) active-target patterns. Prints the "
        "metric tree with the time of each pattern and where it occurs, and "
        "saves the result in the experiment (analysis/waitstates.json) for "
        "perfweave report. Run under mpirun with --parallel to spread the "
        "ranks over several processes (mpi4py).",
        usage="perfweave analyze [--json] [--parallel] [--top N] [--per-rank] [--[no-]root-causes] "
        "[--correct-clocks [--min-latency SECONDS]] [--no-save] EXP",
    )
    p.add_argument("experiment", metavar="EXP", help="experiment directory")
    p.add_argument(
        "--json", action="store_true", help="print the result as JSON (docs/wait-states.md)"
    )
    p.add_argument(
        "--parallel",
        action="store_true",
        help="analyse with every process of this MPI job (mpirun -n K perfweave "
        "analyze --parallel EXP), each owning a block of ranks",
    )
    p.add_argument(
        "--top",
        type=positive,
        default=5,
        metavar="N",
        help="call paths to show per wait state (default 5)",
    )
    p.add_argument(
        "--per-rank", action="store_true", help="also print each rank's time in each wait state"
    )
    p.add_argument(
        "--correct-clocks",
        action="store_true",
        help="correct the times with a controlled logical clock where messages or "
        "collectives violate the clock condition, and compute the wait states on the "
        "corrected times (serial analysis only)",
    )
    p.add_argument(
        "--min-latency",
        type=nonnegative_seconds,
        default=None,
        metavar="SECONDS",
        help="the minimum message latency the correction keeps between a send and its "
        "receive (default 0)",
    )
    p.add_argument(
        "--root-causes",
        dest="root_causes",
        action="store_true",
        default=None,
        help="also compute the critical path and the delay analysis (docs/wait-states.md, "
        "'Root causes') for traces of more than 4 000 000 MPI calls (the default up to that; "
        "it holds the whole trace's event graph in one process: with --parallel, the first)",
    )
    p.add_argument(
        "--no-root-causes",
        dest="root_causes",
        action="store_false",
        help="skip the critical path and the delay analysis",
    )
    p.add_argument(
        "--no-save",
        dest="save",
        action="store_false",
        help="do not write analysis/waitstates.json into the experiment",
    )
    p.set_defaults(func=main)


def nonnegative_seconds(text):
    import argparse

    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"not a time in seconds >= 0: {text!r}")
    return v


def exchange(parallel):
    from perfweave.analysis.exchange import MPI, Local
    from perfweave.errors import PerfweaveError

    if not parallel:
        return Local(0)
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise PerfweaveError("--parallel needs mpi4py (pip install mpi4py)") from None
    try:
        return MPI(0)
    except Exception as e:  # an MPI library mpi4py cannot load
        raise PerfweaveError(f"--parallel: cannot start MPI through mpi4py ({e})") from None


def keep_freed_memory():
    """Make fresh memory cheap for the analysis, a batch job that allocates and frees
    large temporaries all the time and exits when done:
    - keep memory numpy frees in the process (glibc: no mmap for large blocks, no heap
      trimming) instead of returning it to the kernel, where every later first touch
      of a page costs a fault again (on virtual machines a fault in the hypervisor);
    - no transparent huge pages for numpy's arrays: numpy asks for them (madvise) on
      every large array, and the kernel then compacts memory on the fault path to find
      2 MiB pages; measured here, 3.7 s per GiB of tables against 0.7 s without, and
      the analysis (mostly streaming passes) gains nothing from them in return."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-4, 0)  # M_MMAP_MAX
        libc.mallopt(-1, 2**31 - 1)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass  # not glibc: its defaults
    import numpy as np

    for mod in ("_core", "core"):  # numpy >= 2, older
        setter = getattr(getattr(np, mod, None), "multiarray", None)
        setter = getattr(setter, "_set_madvise_hugepage", None)
        if setter is not None:
            setter(False)
            break


def main(args):
    keep_freed_memory()
    from perfweave.analysis import waitstates
    from perfweave.errors import PerfweaveError
    from perfweave.readers.experiment import read_meta
    from perfweave.report import waitstates as render

    exp = Path(args.experiment)
    if not exp.is_dir():
        raise PerfweaveError(f"{exp}: no such experiment directory")
    read_meta(exp)
    if args.min_latency is not None and not args.correct_clocks:
        raise PerfweaveError("--min-latency is an option of --correct-clocks")
    ex = exchange(args.parallel)
    try:
        result = waitstates.analyze(
            exp,
            ex,
            correct_clocks=args.correct_clocks,
            min_latency_ns=None if args.min_latency is None else round(args.min_latency * 1e9),
            root_causes=args.root_causes,
        )
    except BaseException as e:
        if ex.parallel and ex.nproc > 1:
            # the other processes would wait for this one in a collective forever
            msg = str(e) if isinstance(e, PerfweaveError) else f"{type(e).__name__}: {e}"
            print(f"perfweave: error: analysis process {ex.me}: {msg}", file=sys.stderr, flush=True)
            ex.comm.Abort(2)
        raise
    if result is None:  # not the first process of a parallel analysis
        return 0
    render.name_paths(result)
    if args.save:
        save(exp, result)
    next_steps(exp, result)
    if args.json:
        # one write: json.dump writes piece by piece, thousands of small writes that
        # cost 0.25 s for 0.5 MB when mpirun forwards the output
        sys.stdout.write(json.dumps(result.to_json(), indent=1) + "\n")
    else:
        sys.stdout.write(render.render(result, top=args.top))
        if args.per_rank:
            sys.stdout.write(render.render_per_rank(result))
    return 0


def next_steps(exp, result):
    """What to run after the wait states: the POP metrics of the same traces, and the
    report, which shows the saved wait states beside the profile."""
    from perfweave import progress

    progress.next_step(
        f"analysed {progress.count(result.events)} events of {result.world_size} ranks",
        f"pop {exp}",
        f"report {exp}",
    )


def save(exp, result):
    """Write the WaitStatesResult into the experiment (analysis/waitstates.json)."""
    from perfweave.readers.results import WAITSTATES_FILE  # numpy: not for every verb

    path = Path(exp) / WAITSTATES_FILE
    try:
        path.parent.mkdir(exist_ok=True)
        writing.write_atomic(path, json.dumps(result.to_json()))
    except OSError as e:
        print(
            f"perfweave: warning: cannot save {path} ({e.strerror}); the result is only printed",
            file=sys.stderr,
        )
