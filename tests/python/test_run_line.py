"""`perfweave run`'s line parsed without argparse (options.run_line, 5 ms off each run's
start: docs/performance.md, "The launch path") means what argparse makes of it with the
parser of the same table: the same values and command for every line run_line takes, and
every other line left to argparse (None), which parses, explains or refuses it. The
options' table the launch path reads (perfweave/_options.py, generated at build) is
options.json's."""

import json
from pathlib import Path

import pytest

import perfweave
from perfweave import options
from perfweave.cli import _run_line, build_parser

COMMAND = ["mpirun", "-n", "2", "./a.out", "--", "-o", "x", "--sample"]

# lines run_line takes: every kind of option of the table, written whole, then `--`
TAKEN = [
    [],
    ["-o", "exp"],
    ["--output", "exp", "-o", "again"],  # the last one wins
    ["--output=exp"],
    ["--output="],  # an empty value, joined
    ["-o", ""],  # an empty value, a word of its own
    ["--counters=perf::TASK-CLOCK,perf::PAGE-FAULTS"],
    ["--counters", "a=b"],
    ["--callsite-depth", "4", "--max-callsites=64"],
    ["--clock-sync-rounds=-1"],  # a joined value may start with '-'
    ["--callsite-depth", " 7 "],  # int() takes the spaces, as argparse's type does
    ["--sample", "--no-histograms", "--trace", "--no-trace"],
    ["--mpi", "none", "--sample-interval-ms", "2", "--io", "--mathlib", "--verbose"],
]
# lines left to argparse: help, abbreviations, joined short values, values that start
# with '-', no `--`, no command, bad values, unknown words
LEFT = [
    ["--help"],
    ["-h"],
    ["--samp"],  # ambiguous
    ["--callsite"],  # an abbreviation argparse takes
    ["-oexp"],
    ["-o=exp"],
    ["-o", "-x"],
    ["--clock-sync-rounds", "-1"],  # argparse takes it as a negative number
    ["--callsite-depth", "x"],
    ["--callsite-depth=x"],
    ["--callsite-depth="],
    ["--sample=1"],
    ["--output"],
    ["-o"],
    ["--version"],
    ["--nonsense"],
    ["prog"],
]


def argparse_line(words):
    """(values, command) of `perfweave run WORDS`, by argparse: None where it refuses."""
    try:
        args = build_parser(["run"]).parse_args(["run", *words])
    except SystemExit:
        return None
    return options.values(args), args.command


@pytest.mark.parametrize("opts", TAKEN, ids=lambda w: " ".join(w) or "none")
def test_a_plain_line_means_what_argparse_makes_of_it(opts, monkeypatch):
    monkeypatch.setenv("PERFWEAVE_MAX_CALLSITES", "32")  # defaults from the environment
    monkeypatch.setenv("PERFWEAVE_HISTOGRAMS", "0")
    words = [*opts, "--", *COMMAND]
    ours = options.run_line(words)
    assert ours is not None, words
    assert ours == argparse_line(words)
    # what the command line hands to the run
    args = _run_line(["run", *words])
    assert args.verb == "run" and args.command == COMMAND
    assert options.values(args) == ours[0]


@pytest.mark.parametrize("opts", LEFT, ids=" ".join)
def test_any_other_line_is_left_to_argparse(opts, capsys):
    for words in ([*opts, "--", *COMMAND], opts):
        assert options.run_line(words) is None, words
        assert _run_line(["run", *words]) is None
    capsys.readouterr()


def test_the_command_is_everything_after_the_first_separator():
    for words in (["--", "--"], ["--", "-o", "--", "x"], ["-o", "e", "--", "--sample"]):
        assert options.run_line(words) == argparse_line(words)
    assert options.run_line(["--"]) is None  # no command: argparse's error


def test_the_launch_path_reads_the_table_options_json_declares():
    source = Path(__file__).resolve().parents[2] / "python" / "perfweave" / "options.json"
    assert options.spec() == json.loads(source.read_text())["options"]
    installed = Path(perfweave.__file__).parent / "options.json"
    assert options.spec() == json.loads(installed.read_text())["options"]
