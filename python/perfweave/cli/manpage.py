"""perfweave manpage: the man page perfweave.1, written from the parsers (cli/shell.py)."""

import sys


def setup_parser(sub):
    p = sub.add_parser(
        "manpage",
        help="print the man page perfweave(1) (roff)",
        description="Print perfweave's man page in roff, written from its own options: a "
        "section per verb with its usage, arguments and options. Read it with "
        "`perfweave manpage | man -l -`; installs from a wheel put it in share/man/man1.",
        usage="perfweave manpage [-o FILE]",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead of stdout")
    p.set_defaults(func=main)


def main(args):
    from perfweave.cli.shell import manpage

    text = manpage()
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0
