"""The perfweave command: one module per verb, each with setup_parser(sub) and main(args)."""

import argparse
import os
import sys

from perfweave import __version__
from perfweave.cli import analyze, components, export, import_, report, run
from perfweave.errors import PerfweaveError

VERBS = [run, report, analyze, export, import_, components]


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"perfweave: error: {message} (see perfweave --help)\n")


def build_parser():
    parser = _Parser(
        prog="perfweave", description="Measure and explain the performance of parallel programs."
    )
    parser.add_argument("--version", action="version", version=f"perfweave {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser)
    for verb in VERBS:
        verb.setup_parser(sub)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not args.verb:
            parser.print_help()
            return 2
        status = args.func(args)
        sys.stdout.flush()  # a full disk under a redirected stdout shows here
        return status
    except PerfweaveError as e:
        print(f"perfweave: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        # ENOSPC, EDQUOT, EIO writing an output: one line, not a traceback
        try:
            # what stdout still buffers would fail again at exit, with a traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            print(
                f"perfweave: error: {e.filename or 'the output'}: {e.strerror or e}",
                file=sys.stderr,
            )
        except OSError:
            pass
        return 2
