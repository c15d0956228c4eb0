"""`perfweave run` options, declared once in options.json.

The same list gives the argparse options (and so `--help`) and the environment
variables the C runtime reads (runtime/core/gen_options.py writes its header
from the same file).
"""

import json
import os
from functools import lru_cache

from perfweave.errors import PerfweaveError


@lru_cache(maxsize=1)
def spec():
    # beside this file, as in every install (importlib.resources costs the launch path
    # a tenth of its imports)
    with open(os.path.join(os.path.dirname(__file__), "options.json")) as f:
        return json.load(f)["options"]


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
            )


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


def validate(values_by_name):
    """Returns an error message for values the runtime would reject, else None."""
    if values_by_name.get("callsite_depth", 1) < 1 or values_by_name.get("callsite_depth") > 16:
        return "--callsite-depth must be between 1 and 16"
    if values_by_name.get("max_callsites", 16) < 16:
        return "--max-callsites must be at least 16"
    if values_by_name.get("clock_sync_rounds", 0) < 0:
        return "--clock-sync-rounds must not be negative"
    return None
