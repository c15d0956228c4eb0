"""What a long verb is doing: a progress bar on stderr when stderr is a terminal, and the
lines that are not errors (notes, what to run next), all silenced by `perfweave --quiet`.

The analyses, readers and exporters report their steps through task() and never print;
the command line decides once (cli/__init__.py main, start) whether a bar is drawn. Used
as a library (perfweave.api), nothing is drawn. tqdm is imported only when a bar is
drawn: `perfweave run`'s launch path imports this module but never tqdm
(tests/python/test_launch_path.py)."""

import os
import sys

# quiet: --quiet; bars: draw bars (set by start, on a terminal only)
_state = {"quiet": False, "bars": False}


def start(quiet=False, stream=None):
    """Set up the command line's feedback: bars when stream (stderr) is a terminal and
    not quiet."""
    stream = sys.stderr if stream is None else stream
    _state["quiet"] = bool(quiet)
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced by an object without it
        tty = False
    _state["bars"] = tty and not quiet


def quiet():
    return _state["quiet"]


def say(line, file=None):
    """Print a line that is not an error (a note, a summary, the next step) on stderr,
    unless --quiet."""
    if _state["quiet"]:
        return
    try:
        print(line, file=sys.stderr if file is None else file, flush=True)
    except OSError:  # stderr on a full disk: the verb goes on
        pass


def next_step(done, *commands):
    """The line that names what to run next after what was done: 'perfweave: DONE ->
    run `perfweave COMMAND` or `perfweave COMMAND`'."""
    run = " or ".join(f"`perfweave {c}`" for c in commands)
    say(f"perfweave: {done} \u2192 run {run}")


def then(done, how):
    """The line that says how to go on where the next step is another tool's: 'perfweave:
    DONE -> HOW'."""
    say(f"perfweave: {done} \u2192 {how}")


def html_next_step(path):
    """How to open an HTML page a verb wrote (report --html, compare --html)."""
    from pathlib import Path

    return f"open file://{Path(path).resolve()} in a web browser"


def count(n):
    """An event count as the next-step lines say it (as perfweave-wait does): 1.2 M
    from a million on, else the number."""
    return f"{n / 1e6:.1f} M" if n >= 1_000_000 else str(n)


class Task:
    """Steps of one long piece of work: step() as each is done, close() (or a with
    block) at the end, which clears the bar. Without a bar every call does nothing."""

    def __init__(self, what, total, unit):
        self._bar = None
        if _state["bars"] and total:
            try:
                from tqdm import tqdm
            except ImportError:  # perfweave installed without its dependencies
                return
            # a terminal that says it has no width (a pseudo-terminal nobody sized) would
            # get an empty bar from tqdm: 80 columns then
            try:
                sized = os.get_terminal_size(sys.stderr.fileno()).columns > 0
            except (OSError, ValueError, AttributeError):
                sized = False
            # leave=False: the bar is erased at the end, and the verb's own lines follow
            # as they would without a terminal
            self._bar = tqdm(
                total=total, desc=what, unit=unit, file=sys.stderr, leave=False,
                dynamic_ncols=sized, ncols=None if sized else 80, mininterval=0.1,
            )  # fmt: skip

    def step(self, n=1, what=None):
        if self._bar is not None:
            if what is not None:
                self._bar.set_description_str(what, refresh=False)
            self._bar.update(n)

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def task(what, total, unit="step"):
    """A Task of total steps (ranks, events, bytes: unit) described by what."""
    return Task(what, total, unit)
