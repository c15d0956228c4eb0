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
