"""A runtime module is declared once, in runtime/modules/modules.def: the build takes its
sources from there (CMakeLists.txt), and options.json says which module owns each option.
These checks keep the declarations whole: an option no module of the list (nor the core)
owns, or a module source the build would not compile, fails here."""

import json
import re
from pathlib import Path

from perfweave import _format

ROOT = Path(__file__).resolve().parents[2]


def _modules_def():
    """{module: [its sources]} from modules.def's lines, in the list's order."""
    out = {}
    for line in (ROOT / "runtime/modules/modules.def").read_text().splitlines():
        m = re.match(r"PW_MODULE\((\w+)(.*)\)", re.sub(r"/\*.*\*/", "", line).rstrip())
        if m:
            rest = re.sub(r"GEN\([^)]*\)", "", m.group(2))
            out[m.group(1)] = re.findall(r'"([^"]+)"', rest)
    return out


def test_every_runtime_option_is_owned_by_a_listed_module_or_the_core():
    modules = _modules_def()
    assert list(modules) == _format.MODULES
    options = json.loads((ROOT / "python/perfweave/options.json").read_text())["options"]
    owners = {o["name"]: o.get("module") for o in options}
    for o in options:
        if o.get("runtime"):
            assert o.get("module") in set(modules) | {"core"}, o["name"]
        else:
            assert o.get("module") == "cli", o["name"]
    # a module's switch is its own option, named after it
    for name in ("io", "example", "mathlib", "counters", "mpi"):
        assert owners[name] == name
    assert owners["sample"] == "samples" and owners["node_interval"] == "timeline"


def test_every_module_source_is_built():
    modules = _modules_def()
    listed = {s for sources in modules.values() for s in sources}
    assert all((ROOT / "runtime/modules" / s).is_file() for s in listed)
    assert all(sources for sources in modules.values())
    # the MPI flavour libraries' sources are CMakeLists.txt's own (one library per MPI)
    cmake = re.sub(r"#.*", "", (ROOT / "CMakeLists.txt").read_text())
    flavour = set(re.findall(r"runtime/modules/(\w+\.c)", cmake))
    on_disk = {p.name for p in (ROOT / "runtime/modules").glob("*.c")}
    assert on_disk == listed | flavour, on_disk ^ (listed | flavour)
    assert not flavour & listed  # no second list of the modules' sources
