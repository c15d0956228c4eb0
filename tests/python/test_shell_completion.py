"""Shell completion and the man page (cli/shell.py): every option of every verb, as the
parsers declare them, is in each script and in perfweave.1; bash completes verbs, options
and option values when its function runs with COMP_WORDS set as bash sets them."""

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfweave.cli import VERBS, build_parser
from perfweave.cli.shell import SHELLS, manpage

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")


def declared():
    """{verb: [option strings]} walked from the parsers themselves, apart from shell.py's
    own walk: what the scripts must hold."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        verb: [s for a in p._actions for s in a.option_strings] for verb, p in sub.choices.items()
    }


def test_every_verb_and_option_declared_is_walked():
    options = declared()
    assert list(options) == list(VERBS)
    # perfweave run's options are options.json's, each with its --no- form for a bool
    from perfweave import options as table

    for opt in table.spec():
        assert table.flag(opt) in options["run"]
        if opt["type"] == "bool":
            assert "--no-" + opt["name"].replace("_", "-") in options["run"]


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_completion_scripts_hold_every_option_of_every_verb(shell):
    text = subprocess.run(
        [PERFWEAVE, "completion", shell], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    for verb, flags in declared().items():
        # the verb's own part of the script: its case (bash, zsh) or its lines (fish)
        if shell == "bash":
            part = re.search(rf"\n        {verb}\)\n(.*?) ;;\n", text, re.S).group(1)
            words = set(re.search(r'opts="([^"]*)"', part).group(1).split())
        elif shell == "zsh":
            part = re.search(rf"\n        {verb}\) _arguments(.*?) ;;\n", text, re.S).group(1)
            words = set(re.findall(r"(?<![\w-])(--?[\w-]+)", part.split("[", 1)[0] + part))
        else:
            lines = [ln for ln in text.splitlines() if f"__fish_seen_subcommand_from {verb}'" in ln]
            words = {"--" + w for ln in lines for w in re.findall(r" -l (\S+)", ln)}
            words |= {"-" + w for ln in lines for w in re.findall(r" -s (\S+)", ln)}
        missing = [f for f in flags if f not in words]
        assert not missing, f"{shell}: {verb} lacks {missing}"


def test_manpage_has_a_section_per_verb_with_every_option():
    text = manpage()
    sections = re.split(r'\n\.SH "PERFWEAVE ([A-Z]+)"\n', text)
    by_verb = dict(zip(sections[1::2], sections[2::2]))
    options = declared()
    assert sorted(by_verb) == sorted(v.upper() for v in options)
    for verb, flags in options.items():
        section = by_verb[verb.upper()]
        for f in flags:
            assert f"\\fB{f.replace('-', chr(92) + '-')}\\fR" in section, (verb, f)


def test_manpage_formats_without_errors(tmp_path):
    """groff reads the page without an error; man -l shows each verb's section."""
    page = tmp_path / "perfweave.1"
    subprocess.run([PERFWEAVE, "manpage", "-o", page], check=True, timeout=60)
    groff = subprocess.run(
        ["groff", "-man", "-Tutf8", "-z", "-ww", page], capture_output=True, text=True
    )
    assert groff.returncode == 0 and not groff.stderr, groff.stderr
    shown = subprocess.run(
        ["man", "-l", "-Tutf8", page], capture_output=True, text=True, timeout=60
    ).stdout
    plain = re.sub(".\b", "", shown)
    for verb in VERBS:
        assert f"PERFWEAVE {verb.upper()}" in plain
    assert "--callsite-depth" in plain


def complete(words, script):
    """COMPREPLY of the bash function for the command line `words` (the last one being
    completed), as bash sets COMP_WORDS and COMP_CWORD on a <TAB>."""
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script}\nCOMP_WORDS=({line})\nCOMP_CWORD={len(words) - 1}\n"
        '_perfweave\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.splitlines() if w]


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory):
    if not shutil.which("bash"):
        pytest.fail("bash is needed for the completion tests")
    path = tmp_path_factory.mktemp("completion") / "perfweave.bash"
    path.write_text(SHELLS["bash"]())
    return path


def test_bash_completes_verbs_and_options(bash_script):
    assert complete(["perfweave", "ru"], bash_script) == ["run"]
    assert complete(["perfweave", "co"], bash_script) == ["components", "compare", "completion"]
    assert complete(["perfweave", "run", "--tr"], bash_script) == ["--trace", "--trace-buffer"]
    # an option of another verb is not offered
    assert complete(["perfweave", "report", "--tr"], bash_script) == []
    assert complete(["perfweave", "run", "--trace", "--no-sa"], bash_script) == [
        "--no-sample",
        "--no-sample-libunwind",
    ]
    # a value with choices
    assert complete(["perfweave", "export", "--format", "c"], bash_script) == [
        "chrome",
        "caliper",
        "cube",
    ]
    assert complete(["perfweave", "completion", ""], bash_script) == ["bash", "zsh", "fish"]
    # --format=c<TAB> and --format=<TAB>, as bash splits them at '='
    assert complete(["perfweave", "export", "--format", "=", "c"], bash_script) == [
        "chrome",
        "caliper",
        "cube",
    ]
    assert len(complete(["perfweave", "export", "--format", "="], bash_script)) == 5


def test_bash_completes_paths_and_the_measured_command(bash_script, tmp_path):
    (tmp_path / "run1.pwx").mkdir()
    (tmp_path / "other").mkdir()
    exp = str(tmp_path / "run")
    assert complete(["perfweave", "report", exp], bash_script) == [exp + "1.pwx"]
    assert complete(["perfweave", "run", "-o", exp], bash_script) == [exp + "1.pwx"]
    # after --: commands (bash's compgen -c), not perfweave's options
    got = complete(["perfweave", "run", "--trace", "--", "mpirun.openm"], bash_script)
    # once per directory of PATH that has it (/bin and /usr/bin): readline shows it once
    assert set(got) == ({"mpirun.openmpi"} if shutil.which("mpirun.openmpi") else set())
    assert complete(["perfweave", "run", "--", "prog", "--tr"], bash_script) == []


def zsh_calls(script, words):
    """What the zsh function hands to zsh's _describe and _arguments for the command line
    `words` (the last being completed), each argument as zsh's quoting and brace expansion
    leave it: those two are stand-ins that print their arguments."""
    program = (
        f"source {script}\n"
        "_describe() { print -r -- describe; print -rl -- ${(P)4} }\n"
        '_arguments() { print -r -- arguments; print -rl -- "$@" }\n'
        f"words=({' '.join(repr(w) for w in words)}); CURRENT={len(words)}\n"
        "_perfweave\n"
    )
    out = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True)
    assert out.returncode == 0 and not out.stderr, out.stderr
    return out.stdout.splitlines()


def test_zsh_script_gives_verbs_and_each_verbs_options(tmp_path):
    zsh_script = tmp_path / "_perfweave"
    zsh_script.write_text(SHELLS["zsh"]())
    out = subprocess.run(["zsh", "-n", zsh_script], capture_output=True, text=True)
    assert out.returncode == 0 and not out.stderr, out.stderr
    verbs = zsh_calls(zsh_script, ["perfweave", "ru"])
    assert verbs[0] == "describe"
    assert [v.split(":")[0] for v in verbs[1 : verbs.index("arguments")]] == list(VERBS)
    specs = zsh_calls(zsh_script, ["perfweave", "run", "--tr"])
    assert specs[:2] == ["arguments", "-s"]
    # one spec per spelling, each excluding the other: -o EXP completes paths
    assert any(s.startswith("(-o --output)-o[") and s.endswith(":EXP:_files") for s in specs)
    assert any(s.startswith("(-o --output)--output[") for s in specs)
    assert any(s.startswith("(--trace --no-trace)--trace[") for s in specs)
    assert any(s.startswith("--trace-buffer=[") for s in specs)
    assert specs[-1] == "*::command:_normal"
    for verb, flags in declared().items():
        specs = zsh_calls(zsh_script, ["perfweave", verb, "-"])
        given = {re.match(r"(?:\([^)]*\))?([^=\[]+)", s).group(1) for s in specs[2:]}
        assert set(flags) <= given, (verb, set(flags) - given)


def test_fish_completes(tmp_path):
    """fish's own `complete -C` completes from the fish script as bash does from its."""
    fish_script = tmp_path / "perfweave.fish"
    fish_script.write_text(SHELLS["fish"]())

    def fish(line):
        out = subprocess.run(
            ["fish", "--no-config", "-c", f"source {fish_script}; complete -C '{line}'"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and not out.stderr, out.stderr
        return sorted(ln.split("\t")[0] for ln in out.stdout.splitlines())

    assert fish("perfweave ru") == ["run"]
    assert fish("perfweave run --tr") == ["--trace", "--trace-buffer"]
    assert fish("perfweave export --format c") == ["caliper", "chrome", "cube"]


def test_install_puts_the_page_and_scripts_under_share():
    """The build writes them (scripts/gen_shell_files.py) as the commands print them, and
    the wheel's data puts them in the environment's share/, where man and bash-completion
    look (CMakeLists.txt)."""
    share = Path(sys.prefix) / "share"
    for path, args in (
        ("man/man1/perfweave.1", ["manpage"]),
        ("bash-completion/completions/perfweave", ["completion", "bash"]),
        ("zsh/site-functions/_perfweave", ["completion", "zsh"]),
    ):
        printed = subprocess.run(
            [PERFWEAVE, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("PERFWEAVE_")},
        ).stdout
        assert (share / path).read_text() == printed, path
