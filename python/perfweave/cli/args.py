"""Argument types shared by the verbs."""

import argparse


def positive(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def seconds_window(text):
    """START:END in seconds (END may be empty: to the end), START >= 0 and before END."""
    start, sep, end = text.partition(":")
    try:
        a = float(start)
        b = float(end) if end else None
    except ValueError:
        a = b = None
    if not sep or a is None or a < 0 or (b is not None and b <= a) or a != a:
        raise argparse.ArgumentTypeError(
            f"expected START:END in seconds, START >= 0 and before END, got {text!r}"
        )
    return a, b


def runner_options(p, output, json, run_options="perfweave run options added to every run's"):
    """The options of a verb that runs a command repeatedly under perfweave run (boundness,
    placement sweep): -o DIR, --run-options, --json, --timeout; the help of the first three
    given."""
    p.add_argument("-o", "--output", metavar="DIR", help=output)
    p.add_argument("--run-options", default="", metavar="OPTS", help=run_options)
    p.add_argument("--json", action="store_true", help=json)
    p.add_argument("--timeout", type=positive, metavar="S", help="give up on a run after S seconds")
