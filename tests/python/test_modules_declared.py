"""A runtime module is declared once, in runtime/modules/modules.def: the build takes its
sources from there (CMakeLists.txt), and options.json says which module owns each option.
These checks keep the declarations whole: an option no module of the list (nor the core)
owns, or a module source the build would not compile, fails here."""

import ast
import importlib
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
    # every module is switched by an option of its own, named after it where an option
    # has its name (a new module is checked without an entry here)
    for name in modules:
        assert name in owners.values(), f"module {name} owns no option"
        if name in owners:
            assert owners[name] == name, name
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


# The example module's own files (docs/architecture.md "Adding a module": what a new
# module copies) and the registrations the walkthrough names, each one entry.
EXAMPLE_FILES = {
    "runtime/modules/example.c",
    "runtime/modules/example.h",
    "include/perfweave/format/example.h",
    "python/perfweave/model/example.py",
    "python/perfweave/readers/example.py",
    "python/perfweave/analysis/example.py",
    "python/perfweave/report/sections/example.py",
}
EXAMPLE_REGISTRATIONS = {
    "python/perfweave/options.json": r'\{"name": "example", "module": "example",',
    "runtime/modules/modules.def": r'^PW_MODULE\(example, "example\.c"\)',
    "python/perfweave/report/sections/__init__.py": r'^    "example",',
}


def _code_words(path):
    """The words of a source file's code: C, CMake and Make with their comments removed;
    Python's names and its strings that are not docstrings (ast)."""
    text = path.read_text(errors="replace")
    if path.suffix == ".py":
        tree = ast.parse(text)
        docs = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        parts = []
        for n in ast.walk(tree):
            if isinstance(n, ast.Name):
                parts.append(n.id)
            elif isinstance(n, ast.Attribute):
                parts.append(n.attr)
            elif isinstance(n, ast.alias):
                parts.append(n.name)
            elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                parts.append(n.name)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
                parts.append(n.value)
        return " ".join(parts)
    if path.suffix in (".c", ".h", ".def"):
        return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    return re.sub(r"#[^\n]*", " ", text)


def test_the_example_module_is_its_files_and_its_registrations():
    """The Done-when of issue 32: a module is added by copying the example and touching
    only the places docs/architecture.md names. The example's name is in the code of its
    own files and of the three registrations, nowhere else (a special case elsewhere would
    be one more step the walkthrough does not say), and each registration is there."""
    for rel, pattern in EXAMPLE_REGISTRATIONS.items():
        assert re.search(pattern, (ROOT / rel).read_text(), re.M), (rel, pattern)
    assert all((ROOT / f).is_file() for f in EXAMPLE_FILES)
    sources = [ROOT / "CMakeLists.txt", ROOT / "Makefile"]
    for top, globs in (
        ("runtime", ("*.c", "*.h", "*.def", "*.py")),
        ("include", ("*.h",)),
        ("python/perfweave", ("*.py",)),
    ):
        sources += [p for g in globs for p in (ROOT / top).rglob(g)]
    named = {
        str(p.relative_to(ROOT))
        for p in sources
        if re.search(r"\bexample\b|_example\b|\bExample|\bPW_EXAMPLE_", _code_words(p))
    }
    expected = EXAMPLE_FILES | set(EXAMPLE_REGISTRATIONS)
    expected.discard("python/perfweave/options.json")  # not code: its entry is checked above
    assert named == expected, named ^ expected


def test_the_walkthrough_names_the_registrations_checked_here():
    """docs/architecture.md "Adding a module" names as many registrations as the example
    has (EXAMPLE_REGISTRATIONS), each file of them, and numbers them in its steps."""
    doc = (ROOT / "docs/architecture.md").read_text()
    section = doc.split("## Adding a module", 1)[1].split("\n## ", 1)[0]
    n = len(EXAMPLE_REGISTRATIONS)
    intro = " ".join(section.split("| copy |", 1)[0].split())
    assert f"plus {['no', 'one', 'two', 'three', 'four'][n]} registrations" in intro
    named = set(re.findall(r"`([\w/.]+\.(?:json|def|py))`", intro))
    assert named == {
        rel.removeprefix("python/perfweave/").removeprefix("runtime/modules/")
        for rel in EXAMPLE_REGISTRATIONS
    }, named
    marks = [int(m) for m in re.findall(r"\*\*registration\s+(\d+)\*\*", section)]
    assert marks == list(range(1, n + 1)), marks


def test_a_modules_dataset_has_its_files_and_its_section():
    """A module's dataset is its reader's (readers/NAME.py DATASET, which
    readers/datasets.py takes for each module of modules.def with a reader of its name),
    and goes with the module's section (registration 3): a dataset named after a module
    reads a directory the module's format header declares, and the report has a section
    of that name."""
    from perfweave.readers import datasets
    from perfweave.readers.datasets import DATASETS
    from perfweave.report.sections import SECTIONS

    modules = _modules_def()
    readers = ROOT / "python/perfweave/readers"
    found = list(datasets.module_datasets())
    assert found == [
        importlib.import_module(f"perfweave.readers.{m}").DATASET
        for m in modules
        if (readers / f"{m}.py").is_file()
    ]
    assert all(DATASETS[k.name] is k for k in found)
    assert not {"counters", "mpi"} & {k.name for k in found}  # no reader: no dataset
    sections = {s.name for s in SECTIONS}
    named = [k for k in DATASETS.values() if k.name in modules]
    assert {k.name for k in named} >= {"example", "samples", "mathlib", "io"}
    for k in named:
        dirs = {f.directory for f in _format.FILES.values() if f.kind.startswith(k.name)}
        assert k.directory in dirs, (k.name, k.directory, dirs)
        assert k.name in sections, k.name


# the core's side of the profile files: what must name no module's array
PROFILE_CORE_FILES = (
    "include/perfweave/format.h",
    "CMakeLists.txt",
    "python/perfweave/dtypes.py",
    "python/perfweave/readers/profile.py",
    "python/perfweave/readers/experiment.py",
    "python/perfweave/model/profile.py",
    "python/perfweave/analysis/imported_profile.py",
)


def test_a_modules_profile_array_is_declared_in_its_own_files():
    """A module's array of the profile files (docs/architecture.md "Adding a module": the
    matrix's comms, once the core's) is declared in its format header alone:
    perfweave._format PROFILE_ARRAYS lists the core's arrays, then the modules' in
    modules.def's order, each from PW_PROFILE_ARRAYS_<module> of format/<module>.h; the
    core's code (runtime/core, format.h, the build, the profile's dtypes, readers and
    model) names neither its C type nor its fields' list, nor, outside format.h (whose
    trace JSON has a "comms" key of its own), its name."""
    arrays = _format.PROFILE_ARRAYS
    modules = list(_modules_def())
    core = [name for name, (part, _) in arrays.items() if part == "core"]
    assert core == ["ranks", "sites", "frames", "hist", "counts"] == list(arrays)[: len(core)]
    parts = [part for part, _ in list(arrays.values())[len(core) :]]
    assert parts == sorted(parts, key=modules.index)
    assert arrays["comms"] == ("mpi", "comm")
    core_files = [ROOT / f for f in PROFILE_CORE_FILES]
    core_files += sorted((ROOT / "runtime/core").glob("*.[ch]"))
    for name, (part, rec) in arrays.items():
        if part == "core":
            continue
        header = _code_words(ROOT / f"include/perfweave/format/{part}.h")
        assert re.search(rf"#define PW_PROFILE_ARRAYS_{part}\(X\)", header), part
        m = re.search(rf"\bX\({name}, {rec}, (\w+), (\w+)\)", header)
        assert m, (part, name)
        assert re.search(rf"\bRECORD\({rec}, {m[1]}, {m[2]}\)", header), (part, rec)
        for path in core_files:
            words = _code_words(path)
            assert not re.search(rf"\b({m[1]}|{m[2]})\b", words), (path, name)
            if path.name != "format.h":
                assert not re.search(rf"\b{name}\b", words), (path, name)
