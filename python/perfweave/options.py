"""`perfweave run` options, declared once in options.json.

The same list gives the argparse options (and so `--help`), the line parser of `perfweave
run` (run_line) and the environment variables the C runtime reads: runtime/core/
gen_options.py writes the runtime's header and this package's _options.py from it at build.
"""

import os

from perfweave.errors import PerfweaveError


def spec():
    """options.json's options, from the table generated from it (perfweave/_options.py): a
    module, whose import is a fraction of json's (with re and enum, 4 ms of every run's
    start)."""
    from perfweave._options import OPTIONS

    return OPTIONS


def env_name(opt):
    return "PERFWEAVE_" + opt["name"].upper()


def flag(opt):
    return "--" + opt["name"].replace("_", "-")


def _from_env(opt):
    """The option's default, or the value of its PERFWEAVE_ variable when set."""
    text = os.environ.get(env_name(opt)) if opt.get("runtime") else None
    if text is None or text == "":
        return opt["default"]
    try:
        if opt["type"] == "bool":
            return text.lower() not in ("0", "false", "no", "off")
        return int(text) if opt["type"] == "int" else text
    except ValueError:
        raise PerfweaveError(f"{env_name(opt)}={text!r}: not an integer") from None


# a repeatable option's values (options.json "repeat": true) are joined by this, in order
REPEAT_SEPARATOR = ";"


def _joined(argparse):
    """argparse action of a repeatable option: the first value on the line replaces the
    default, each later one is joined to it (REPEAT_SEPARATOR)."""

    class Joined(argparse.Action):
        def __call__(self, parser, namespace, value, option_string=None):
            seen = namespace.__dict__.setdefault("_repeated", set())
            old = getattr(namespace, self.dest)
            joined = f"{old}{REPEAT_SEPARATOR}{value}" if self.dest in seen and old else value
            seen.add(self.dest)
            setattr(namespace, self.dest, joined)

    return Joined


def add_arguments(parser):
    import argparse

    for opt in spec():
        names = [opt["flag"], flag(opt)] if opt.get("flag") else [flag(opt)]
        default = _from_env(opt)
        if "(default:" in opt["help"]:
            help_text = opt["help"]
        else:
            help_text = f"{opt['help']} (default: {default!r})"
        if opt.get("runtime"):
            help_text += f" [env {env_name(opt)}]"
        help_text = help_text.replace("%", "%%")
        if opt["type"] == "bool":
            parser.add_argument(
                *names,
                dest=opt["name"],
                default=default,
                action=argparse.BooleanOptionalAction,
                help=help_text,
            )
        else:
            kind = int if opt["type"] == "int" else str
            parser.add_argument(
                *names,
                dest=opt["name"],
                default=default,
                type=kind,
                metavar=opt.get("metavar"),
                help=help_text,
                **({"action": _joined(argparse)} if opt.get("repeat") else {}),
            )


def run_line(words):
    """(values by name, command) of `perfweave run`'s words after `run`, when they are
    options of the table, each written whole (`--name VALUE`, `--name=VALUE`, `-o VALUE`,
    `--flag`, `--no-flag`), then `--` and the command: what argparse makes of them with
    the parser add_arguments gives (last one wins; defaults as there, PERFWEAVE_ variables
    included). None for every other line (--help, an abbreviation, a value joined to a
    short flag or starting with '-', no `--`, an error): argparse parses, explains or
    refuses those. argparse and its imports are 5 ms of a run's start; the two are
    compared on lines of every kind (tests/python/test_run_line.py)."""
    table = {}
    for opt in spec():
        for name in [flag(opt)] + ([opt["flag"]] if opt.get("flag") else []):
            table[name] = (opt, True)
        if opt["type"] == "bool":
            table["--no-" + opt["name"].replace("_", "-")] = (opt, False)
    values = {opt["name"]: _from_env(opt) for opt in spec()}
    repeated = set()
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return (values, words[i + 1 :]) if i + 1 < len(words) else None
        name, joined, text = word.partition("=") if word.startswith("--") else (word, "", "")
        opt, on = table.get(name, (None, None))
        if opt is None:
            return None
        if opt["type"] == "bool":
            if joined:
                return None
            values[opt["name"]] = on
            i += 1
            continue
        if not joined:
            if i + 1 == len(words) or words[i + 1].startswith("-"):
                return None
            text = words[i + 1]
            i += 1
        if opt["type"] == "int":
            try:
                text = int(text)
            except ValueError:
                return None
        if opt.get("repeat") and opt["name"] in repeated and values[opt["name"]]:
            text = f"{values[opt['name']]}{REPEAT_SEPARATOR}{text}"
        repeated.add(opt["name"])
        values[opt["name"]] = text
        i += 1
    return None


def values(args):
    return {opt["name"]: getattr(args, opt["name"]) for opt in spec()}


def runtime_env(values_by_name):
    """Environment variables for the runtime, from option values."""
    env = {}
    for opt in spec():
        if not opt.get("runtime"):
            continue
        v = values_by_name.get(opt["name"], opt["default"])
        if opt["type"] == "bool":
            v = "1" if v else "0"
        env[env_name(opt)] = str(v)
    return env


# --filter's kinds of rule (runtime/core/filter.c reads the normalised list)
FILTER_KINDS = (
    "include", "exclude", "include-region", "exclude-region", "include-path", "exclude-path"
)  # fmt: skip
FILTER_MAX_RULES, FILTER_MAX_GLOB = 256, 127


def filter_rules(text):
    """--filter's value as the runtime reads it: 'KIND:GLOB' rules joined by ';', one glob
    each, in order; from 'KIND:GLOB,GLOB;...' or '@FILE' (a Score-P filter file: its
    SCOREP_REGION_NAMES_BEGIN .. END blocks, EXCLUDE and INCLUDE of names with * and ?,
    each rule for functions and regions alike). Raises ValueError, its message one line."""
    if text.startswith("@"):
        rules = _scorep_rules(text[1:])
    else:
        rules = []
        for part in (p.strip() for p in text.split(";")):
            if not part:
                continue
            kind, sep, globs = part.partition(":")
            if not sep or kind.strip() not in FILTER_KINDS:
                raise ValueError(
                    f"--filter: '{part}': a rule is KIND:NAME,... with KIND one of "
                    + ", ".join(FILTER_KINDS)
                )
            names = [g.strip() for g in globs.split(",") if g.strip()]
            if not names:
                raise ValueError(f"--filter: '{part}': no name")
            rules += [f"{kind.strip()}:{g}" for g in names]
    if not rules:
        raise ValueError("--filter: no rule")
    for r in rules:
        if len(r.partition(":")[2]) > FILTER_MAX_GLOB:
            raise ValueError(f"--filter: a name longer than {FILTER_MAX_GLOB} characters")
    if len(rules) > FILTER_MAX_RULES:
        raise ValueError(f"--filter: more than {FILTER_MAX_RULES} rules")
    return ";".join(rules)


def _scorep_rules(path):
    """The rules of a Score-P filter file (the region-name blocks)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"--filter: {path}: {e.strerror}") from None
    rules, inside, mode = [], False, None
    for n, line in enumerate(lines, 1):
        where = f"--filter: {path}: line {n}"
        for word in line.split("#", 1)[0].split():
            if word == "SCOREP_REGION_NAMES_BEGIN" and not inside:
                inside, mode = True, None
            elif word == "SCOREP_REGION_NAMES_END" and inside:
                inside = False
            elif word.startswith("SCOREP_"):
                raise ValueError(f"{where}: {word} is not supported (region names only)")
            elif not inside:
                raise ValueError(f"{where}: '{word}' outside SCOREP_REGION_NAMES_BEGIN .. END")
            elif word in ("EXCLUDE", "INCLUDE"):
                mode = word.lower()
            elif word == "MANGLED":
                raise ValueError(f"{where}: MANGLED names are not supported")
            elif mode is None:
                raise ValueError(f"{where}: '{word}' before EXCLUDE or INCLUDE")
            else:
                rules += [f"{mode}:{word}", f"{mode}-region:{word}"]
    if inside:
        raise ValueError(f"--filter: {path}: no SCOREP_REGION_NAMES_END")
    return rules


def validate(values_by_name):
    """Returns an error message for values the runtime would reject, else None."""
    if values_by_name.get("filter"):
        try:
            filter_rules(values_by_name["filter"])
        except ValueError as e:
            return str(e)
    if values_by_name.get("callsite_depth", 1) < 1 or values_by_name.get("callsite_depth") > 16:
        return "--callsite-depth must be between 1 and 16"
    if values_by_name.get("max_callsites", 16) < 16:
        return "--max-callsites must be at least 16"
    if values_by_name.get("clock_sync_rounds", 0) < 0:
        return "--clock-sync-rounds must not be negative"
    return None


def given(words):
    """The names of the options written on a `perfweave run` line (its words after
    `run`, up to `--` or the command), by their whole flag, `--no-` form, short flag or
    a prefix of one long flag only (argparse's abbreviations): what `--all` leaves as
    the line says."""
    flags = {}
    for opt in spec():
        flags[flag(opt)] = opt
        if opt.get("flag"):
            flags[opt["flag"]] = opt
        if opt["type"] == "bool":
            flags["--no-" + opt["name"].replace("_", "-")] = opt
    names = set()
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--" or not word.startswith("-"):
            break
        name, joined, _ = word.partition("=") if word.startswith("--") else (word[:2], "", "")
        opt = flags.get(name)
        if opt is None and name.startswith("--"):
            matches = {id(o): o for f, o in flags.items() if f.startswith(name)}
            opt = next(iter(matches.values())) if len(matches) == 1 else None
        if opt is not None:
            names.add(opt["name"])
            if opt["type"] != "bool" and not joined and not (word != name):
                i += 1  # its value
        i += 1
    return names
