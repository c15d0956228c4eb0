"""Launching a program under the runtime (`perfweave run`), one module per part:

- `command`: the command line: its launcher and program, the ranks it starts, the programs
  of an MPMD launch (and whether one is statically linked), and the command line that
  runs it with the runtime in every task;
- `run`: the run itself: the experiment's directory and experiment.json, the command
  started, and the run's end (experiment.json's last members, the verdict);
- `watch`: the start-up watch: perfweave-wait (runtime/launch/wait.c) exec'd in this
  process waits for the command, forwards signals, watches the ranks' start-up and ends
  the run; or the wait here, where it cannot be exec'd;
- `verdict`: how the run ended: the Verdict on a run that recorded fewer ranks than it
  started (imported only at the run's end).
- `overhead`: not part of a run: `perfweave overhead`'s runs of a command bare and
  under `perfweave run` in each mode, interleaved, with their memory and calibration
  loops (analysis/overhead.py makes the figures).

This package holds what they share: where the runtime's libraries and programs are,
and the signal module.

`perfweave run` imports this package and nothing heavier before the program starts
(tests/python/test_launch_path.py checks it): the run's fixed cost is this set-up, the
launcher's own, and perfweave-wait's end of the run (runtime/launch/wait.c). So paths
are strings here, times come from the time module, and the command starts through
fork and exec: pathlib, datetime and subprocess, with what they import, cost each
interpreter of a run (this one and the verdict's, cli/run.py finish) about as much as
the rest of its set-up; json, re, enum (which signal's module imports) and collections
about as much again (docs/performance.md, "The launch path").
"""

import os

# the signal module's functions and numbers, without its enums (for run.py and watch.py)
try:
    import _signal as signals  # noqa: F401
except ImportError:  # an interpreter without CPython's module
    import signal as signals  # noqa: F401


def _libdir():
    """The directory of the runtime's libraries and programs."""
    package = os.path.dirname(os.path.dirname(__file__))
    return os.environ.get("PERFWEAVE_LIBDIR") or os.path.join(package, "lib")


def library_dir():
    """The directory of the runtime's libraries and programs, a Path."""
    from pathlib import Path

    return Path(_libdir())


def built_flavors(libdir=None):
    prefix = "libperfweave-mpi-"
    try:
        names = os.listdir(libdir or _libdir())
    except OSError:
        return []
    return sorted(n[len(prefix) : -3] for n in names if n.startswith(prefix) and n.endswith(".so"))


# The program `perfweave run` becomes once the command has started (runtime/launch/wait.c),
# installed beside the runtime library.
WAITER = "perfweave-wait"
