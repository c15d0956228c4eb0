"""Shell completion (bash, zsh, fish) and the man page, written from the command line's
parsers (cli/__init__.py build_parser, whose `perfweave run` options come from
options.json): the parsers are the one declaration of the verbs and their options, so a
new option is completed and documented without an edit here.

argparse has no public way to list a parser's actions: `_actions` and the sub-parsers'
`_choices_actions` are read, as argparse's own help formatter does."""

import argparse
import re

# the metavars whose values are directories or files: completed as paths; other values
# are completed from their choices, or not at all
_PATHS = re.compile(r"(EXP|REF|DIR|FILE|PATH|OUT|ARCHIVE|OUTPUT|LOG|A|B)")


class Option:
    """One option or positional of a verb, as the completions and the man page need it."""

    def __init__(self, action):
        self.flags = list(action.option_strings)
        # store_true, BooleanOptionalAction, version and help take no value
        self.takes_value = action.nargs != 0
        self.metavar = _metavar(action)
        self.choices = [str(c) for c in action.choices] if action.choices else []
        self.help = (action.help or "").replace("%%", "%")
        self.paths = bool(_PATHS.fullmatch(self.metavar or ""))


def _metavar(action):
    if action.metavar is not None:
        return action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    if action.nargs == 0:
        return None
    return action.dest.upper()


class Verb:
    def __init__(self, name, summary, parser):
        self.name = name
        self.summary = summary or ""
        self.usage = (parser.usage or parser.format_usage()).replace("usage: ", "").strip()
        self.description = parser.description or self.summary
        acts = [a for a in parser._actions if a.help != argparse.SUPPRESS]
        # a verb of actions (perfweave placement sweep): the actions' options and usage
        # are the verb's too
        usages = []
        for sub in [a for a in acts if isinstance(a, argparse._SubParsersAction)]:
            for p in sub.choices.values():
                have = {f for a in acts for f in a.option_strings}
                acts += [
                    a
                    for a in p._actions
                    if a.help != argparse.SUPPRESS and not set(a.option_strings) & have
                ]
                usages.append((p.usage or p.format_usage()).replace("usage: ", "").strip())
        self.usage = "; ".join(usages) or self.usage
        self.options = [Option(a) for a in acts if a.option_strings]
        self.positionals = [Option(a) for a in acts if not a.option_strings]


def describe():
    """(perfweave's own options, [Verb]) in --help's order."""
    from perfweave.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {a.dest: a.help for a in sub._choices_actions}
    verbs = [Verb(name, summaries.get(name), p) for name, p in sub.choices.items()]
    top = [Option(a) for a in parser._actions if a.option_strings]
    return top, verbs


def _words(options):
    return " ".join(f for o in options for f in o.flags)


def bash():
    """A bash completion function for perfweave: verbs, each verb's options, the values of
    options with choices, paths for EXP/FILE values and positionals; after `--` (perfweave
    run's COMMAND) bash's own completion of commands and files."""
    top, verbs = describe()
    cases = []
    for v in verbs:
        valued = [f for o in v.options if o.takes_value for f in o.flags]
        case = [
            f"        {v.name})",
            f'            opts="{_words(v.options)}"',
            f'            valued=" {" ".join(valued)} "',
        ]
        given = [c for o in v.positionals for c in o.choices]
        if given:
            case.append(f'            given="{" ".join(given)}"')
        choices = [o for o in v.options if o.choices]
        if choices:
            case.append('            case "$prev" in')
            case += [
                f'                {"|".join(o.flags)}) words="{" ".join(o.choices)}" ;;'
                for o in choices
            ]
            case.append("            esac")
        cases.append("\n".join(case) + " ;;")
    return _BASH.format(
        verbs=" ".join(v.name for v in verbs), top=_words(top), cases="\n".join(cases)
    )


_BASH = r"""# bash completion for perfweave (perfweave completion bash); written from its parsers
_perfweave() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}}
    local verb="" i words="" opts="" valued="" given=""
    COMPREPLY=()
    # --name=VALUE: bash splits the line at '=' (COMP_WORDBREAKS)
    if [[ $cur == "=" ]]; then
        cur="" prev=${{COMP_WORDS[COMP_CWORD-1]}}
    elif [[ $prev == "=" ]]; then
        prev=${{COMP_WORDS[COMP_CWORD-2]}}
    fi
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            --) if [[ -n $verb ]]; then
                    # the measured command: bash's own completion of commands and files
                    compopt -o default -o bashdefault 2>/dev/null
                    ((i == COMP_CWORD - 1)) && COMPREPLY=($(compgen -c -- "$cur"))
                    return 0
                fi ;;
            -*) ;;
            *) [[ -z $verb ]] && verb=${{COMP_WORDS[i]}} ;;
        esac
    done
    if [[ -z $verb ]]; then
        COMPREPLY=($(compgen -W "{verbs} {top}" -- "$cur"))
        return 0
    fi
    case "$verb" in
{cases}
        *) return 0 ;;
    esac
    if [[ $valued == *" $prev "* ]]; then
        if [[ -n $words ]]; then
            COMPREPLY=($(compgen -W "$words" -- "$cur"))
        else
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ -n $given ]]; then
        COMPREPLY=($(compgen -W "$given" -- "$cur"))
    else
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
}}
complete -F _perfweave perfweave
"""


def _first_sentence(text):
    """The help up to its first '.', ';' or ':' outside parentheses, for the one-line
    descriptions of zsh and fish."""
    text = " ".join(text.split())
    depth, end = 0, len(text)
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if depth == 0 and c in ".;:" and text[i + 1 : i + 2] in ("", " "):
            end = i
            break
    short = text[:end]
    return short if len(short) <= 100 else short[:97] + "..."


def _zsh_quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def zsh():
    """A zsh completion function (#compdef perfweave) with _arguments per verb."""
    top, verbs = describe()
    lines = [
        "#compdef perfweave",
        "# zsh completion for perfweave (perfweave completion zsh); written from its parsers",
        "_perfweave() {",
        "    local -a verbs",
        "    verbs=(",
    ]
    for v in verbs:
        lines.append("        " + _zsh_quote(f"{v.name}:{_first_sentence(v.summary)}"))
    lines += [
        "    )",
        "    if (( CURRENT == 2 )); then",
        "        _describe -t verbs 'perfweave verb' verbs",
        "        _arguments " + " ".join(_zsh_spec(o) for o in top),
        "        return",
        "    fi",
        "    local verb=$words[2]",
        "    shift words",
        "    (( CURRENT-- ))",
        "    case $verb in",
    ]
    for v in verbs:
        specs = [_zsh_spec(o) for o in v.options]
        specs += [_zsh_quote(_zsh_positional(v, o)) for o in v.positionals]
        lines.append(f"        {v.name}) _arguments -s \\")
        lines += [f"            {s} \\" for s in specs[:-1]] + [f"            {specs[-1]} ;;"]
    lines += ["    esac", "}", '_perfweave "$@"', ""]
    return "\n".join(lines)


def _zsh_escape(text):
    return re.sub(r"([\[\]:\\])", r"\\\1", text)


def _zsh_value(o):
    if not o.takes_value:
        return ""
    name = _zsh_escape(o.metavar or "value")
    if o.choices:
        return f":{name}:({' '.join(o.choices)})"
    return f":{name}:_files" if o.paths else f":{name}: "


def _zsh_spec(o):
    """The option's _arguments spec, quoted for the shell."""
    what = _zsh_quote(f"[{_zsh_escape(_first_sentence(o.help))}]{_zsh_value(o)}")
    if len(o.flags) == 1:
        eq = "=" if o.takes_value and o.flags[0].startswith("--") else ""
        return _zsh_quote(o.flags[0] + eq) + what
    # one spec per spelling (the shell's brace expansion, outside quotes), each excluding
    # the others
    return _zsh_quote("(" + " ".join(o.flags) + ")") + "{" + ",".join(o.flags) + "}" + what


def _zsh_positional(verb, o):
    if o.metavar == "COMMAND":  # perfweave run's and overhead's, after --
        return "*::command:_normal"
    action = "_files" if o.paths or not o.choices else f"({' '.join(o.choices)})"
    return f"*:{_zsh_escape(o.metavar.lower())}:{action}"


def fish():
    """fish completions: one `complete` line per verb and per option."""
    top, verbs = describe()
    names = " ".join(v.name for v in verbs)
    lines = [
        "# fish completion for perfweave (perfweave completion fish); written from its parsers"
    ]
    for o in top:
        lines.append(f"complete -c perfweave -n __fish_use_subcommand {_fish_flags(o)}")
    for v in verbs:
        lines.append(
            f"complete -c perfweave -f -n 'not __fish_seen_subcommand_from {names}' "
            f"-a {v.name} -d {_fish_quote(_first_sentence(v.summary))}"
        )
        for o in v.options:
            lines.append(
                f"complete -c perfweave -n '__fish_seen_subcommand_from {v.name}' {_fish_flags(o)}"
            )
    return "\n".join(lines) + "\n"


def _fish_quote(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_flags(o):
    words = []
    for f in o.flags:
        words.append(f"-l {f[2:]}" if f.startswith("--") else f"-s {f[1:]}")
    if o.takes_value:
        words.append("-r")
        if o.choices:
            words.append("-f -a " + _fish_quote(" ".join(o.choices)))
        elif not o.paths:
            words.append("-f")
    return " ".join(words) + " -d " + _fish_quote(_first_sentence(o.help))


SHELLS = {"bash": bash, "zsh": zsh, "fish": fish}


def _roff(text):
    """Text as roff reads it: backslashes and hyphens escaped, no line starting a request."""
    # \: after a comma: a line may break inside a long list (--skip-exe's default)
    text = text.replace("\\", "\\e").replace("-", "\\-").replace(",", ",\\:")
    return "\n".join(
        "\\&" + ln if ln.startswith((".", "'")) else ln for ln in " ".join(text.split()).split("\n")
    )


def _roff_option(o):
    flags = ", ".join(f"\\fB{_roff(f)}\\fR" for f in o.flags) or f"\\fI{_roff(o.metavar)}\\fR"
    if o.flags and o.takes_value:
        flags += f" \\fI{_roff(o.metavar)}\\fR"
    text = _roff(o.help)
    if o.choices:
        text += " (one of: " + ", ".join(_roff(c) for c in o.choices) + ")"
    return [".TP", flags, text]


def manpage():
    """perfweave.1: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, then a section per verb with its
    usage, description, arguments and options."""
    from perfweave import __version__

    top, verbs = describe()
    out = [
        f'.TH PERFWEAVE 1 "" "perfweave {__version__}" "User Commands"',
        # left-aligned and unhyphenated: long option values (--skip-exe's default) leave
        # nothing to justify, and names (perfweave, option names) are not to be split
        ".ad l",
        ".nh",
        ".SH NAME",
        "perfweave \\- measure and explain the performance of parallel programs",
        ".SH SYNOPSIS",
        ".B perfweave",
        "[\\fB\\-\\-version\\fR] [\\fB\\-h\\fR] \\fIVERB\\fR [\\fIoptions\\fR] [\\fIarguments\\fR]",
        ".SH DESCRIPTION",
        "perfweave records MPI programs with a runtime preloaded into every process, and "
        "reports, analyses, exports and compares the experiments it writes. "
        "Each verb is described in its own section below; \\fBperfweave\\fR \\fIVERB\\fR "
        "\\fB\\-\\-help\\fR prints the same.",
        ".SS Verbs",
    ]
    for v in verbs:
        out += [".TP", f"\\fB{v.name}\\fR", _roff(v.summary)]
    out.append(".SH OPTIONS")
    for o in top:
        out += _roff_option(o)
    for v in verbs:
        out += [
            f'.SH "PERFWEAVE {v.name.upper()}"',
            ".nf",
            _roff(v.usage),
            ".fi",
            ".PP",
            _roff(v.description),
        ]
        if v.positionals:
            out.append(".SS Arguments")
            for o in v.positionals:
                out += _roff_option(o)
        out.append(".SS Options")
        for o in v.options:
            out += _roff_option(o)
    out += [
        ".SH ENVIRONMENT",
        "Each runtime option of \\fBperfweave run\\fR is also read from the environment "
        "variable named in its description (PERFWEAVE_\\fINAME\\fR).",
        ".SH SEE ALSO",
        "\\fBperfweave doctor\\fR (what this machine supports), "
        "\\fBperfweave completion\\fR (shell completion), "
        "and the guides in the docs/ directory of perfweave's sources.",
        "",
    ]
    return "\n".join(out)
