"""perfweave completion: the shell completion script, written from the parsers (cli/shell.py)."""

import sys


def setup_parser(sub):
    p = sub.add_parser(
        "completion",
        help="print the shell completion script for bash, zsh or fish",
        description="Print a completion script for SHELL, written from perfweave's own "
        "options (verbs, each verb's options and their values). bash: "
        "`source <(perfweave completion bash)` in ~/.bashrc; zsh: save it as _perfweave in "
        "a directory of $fpath; fish: save it as ~/.config/fish/completions/perfweave.fish. "
        "Installs from a wheel also put the bash and zsh scripts under share/ (docs/doctor.md).",
        usage="perfweave completion {bash,zsh,fish}",
    )
    p.add_argument(
        "shell",
        choices=["bash", "zsh", "fish"],
        metavar="SHELL",
        help="the shell: bash, zsh or fish",
    )
    p.set_defaults(func=main)


def main(args):
    from perfweave.cli.shell import SHELLS

    sys.stdout.write(SHELLS[args.shell]())
    return 0
