"""The perfweave command: one module per verb, each with setup_parser(sub) and main(args)."""

import os
import sys

from perfweave import __version__, progress
from perfweave.errors import PerfweaveError

# the verbs in the order --help lists them: name -> its module in this package
VERBS = {
    "run": "run",
    "report": "report",
    "analyze": "analyze",
    "export": "export",
    "import": "import_",
    "components": "components",
    "pop": "pop",
    "overhead": "overhead",
    "boundness": "boundness",
    "placement": "placement",
    "compare": "compare",
    "doctor": "doctor",
    "completion": "completion",
    "manpage": "manpage",
    "validate": "validate",
    "snapshot": "snapshot",
}


def build_parser(verbs=VERBS):
    """The command line's parser, with the verbs named (all, by default)."""
    # argparse is imported here: the interpreter that gives a run's verdict imports this
    # package (cli/run.py finish) and parses nothing
    import argparse

    class _Formatter(argparse.HelpFormatter):
        """argparse's, with the terminal's width asked when it formats, not when it is
        made: add_argument makes one to check each option, and argparse asks
        shutil.get_terminal_size, whose module imports bz2, lzma and zlib (1 ms of each
        run's start, docs/performance.md "The launch path")."""

        def __init__(self, prog, *args, width=None, **kwargs):
            super().__init__(prog, *args, width=1 << 16 if width is None else width, **kwargs)
            self._given = (width, args, kwargs)

        def format_help(self):
            width, args, kwargs = self._given
            if width is None:  # the width and the help column HelpFormatter would have
                plain = argparse.HelpFormatter(self._prog, *args, **kwargs)
                self._width, self._max_help_position = plain._width, plain._max_help_position
            return super().format_help()

    class _Parser(argparse.ArgumentParser):
        def __init__(self, *args, formatter_class=_Formatter, **kwargs):
            super().__init__(*args, formatter_class=formatter_class, **kwargs)

        def error(self, message):
            self.exit(2, f"perfweave: error: {message} (see perfweave --help)\n")

    parser = _Parser(
        prog="perfweave", description="Measure and explain the performance of parallel programs."
    )
    parser.add_argument("--version", action="version", version=f"perfweave {__version__}")
    quiet = "no progress bars, notes or next steps on stderr: errors and warnings only"
    parser.add_argument("-q", "--quiet", action="store_true", help=quiet)
    # prog: the verbs' prefix, which argparse would find by formatting this usage
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=_Parser, prog="perfweave")
    for verb in verbs:
        __import__(f"{__name__}.{VERBS[verb]}", fromlist=["setup_parser"]).setup_parser(sub)
    for p in sub.choices.values():  # --quiet after the verb too
        p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=quiet)
    return parser


class _Args:
    """The parsed line argparse's Namespace would be."""

    def __init__(self, **members):
        self.__dict__.update(members)


def _run_line(argv):
    """`perfweave run`'s line as its parser would parse it, without argparse when it is
    plain options, `--` and the command (options.run_line): argparse is 5 ms of the start
    of every run (docs/performance.md, "The launch path"). None otherwise."""
    if argv[:1] != ["run"]:
        return None
    from perfweave import options

    line = options.run_line(argv[1:])
    if line is None:
        return None
    from perfweave.cli import run

    values, command = line
    return _Args(verb="run", func=run.main, command=command, **values)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # --quiet before the verb is taken here, so that `perfweave --quiet run` keeps run's
    # path without argparse
    quiet = argv[:1] in (["-q"], ["--quiet"])
    argv = argv[1:] if quiet else argv
    try:
        # A command line that starts with a verb is that verb's parser's alone, which its
        # siblings do not change: only its module (and what it imports) is imported, so
        # `perfweave run` imports no other verb's. perfweave's own --help, --version and
        # errors come from the whole parser.
        args = _run_line(argv)
        if args is None:
            parser = build_parser([argv[0]] if argv and argv[0] in VERBS else VERBS)
            args = parser.parse_args(argv)
        if not args.verb:
            parser.print_help()
            return 2
        args.argv = argv  # the line as written (cli/run.py: what --all leaves to it)
        progress.start(quiet or getattr(args, "quiet", False))
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
