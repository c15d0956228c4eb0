"""The layers of python/perfweave point one way (docs/architecture.md, "Layers"): every
import between its parts, read with ast from the sources (imports inside functions
included: they run too, only later), is an edge of LAYERS, LAYERS has no cycle, and no
part imports a private name (`_name`) of another."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "perfweave"

# part -> the parts it may import; a part is a package or a module of python/perfweave.
# The same table as docs/architecture.md's, lowest first. "version" is the package's
# __version__ string (perfweave/__init__.py), "perfweave" the rest of that file (open).
# The generated tables (_format, _options, _mpi, _io, _mathlib: from the format headers,
# options.json, mpi.spec, io.spec and mathlib.spec; _build: what CMake was told, such as
# the runtime's library directories) are at the bottom, with errors.
BASE = {"_format", "_options", "_mpi", "_io", "_mathlib", "_build", "errors", "version", "units"}
LAYERS = {
    "_format": set(),
    "_options": set(),
    "_mpi": set(),
    "_io": set(),
    "_mathlib": set(),
    "_build": set(),
    "errors": set(),
    "version": set(),
    "units": set(),
    "dtypes": {"_format"},
    "writing": {"errors"},
    "progress": set(),
    "options": {"_options", "errors"},
    "task_env": BASE,
    "papi": BASE,
    "sources": BASE | {"papi"},
    "doctor": BASE | {"papi", "sources", "task_env", "launch"},
    "validation": BASE | {"papi", "sources"},
    "symbols": BASE,
    "clock": BASE,
    "model": BASE | {"dtypes", "clock"},
    "readers": BASE | {"dtypes", "writing", "model"},
    "analysis": BASE | {"dtypes", "clock", "model", "readers", "symbols", "progress"},
    "report": BASE | {"dtypes", "model", "readers", "analysis", "symbols"} | {"progress"},
    "launch": BASE | {"options", "task_env", "writing", "readers", "progress"},
    "interop": BASE
    | {"dtypes", "writing", "clock", "model", "readers", "analysis", "symbols", "launch"}
    | {"progress"},
    "api": BASE | {"model", "readers", "analysis", "report", "symbols"},
    "cli": BASE
    | {"writing", "options", "papi", "sources", "launch", "readers", "analysis", "report"}
    | {"interop", "doctor", "validation", "progress"},
    "reframe": BASE | {"readers", "analysis", "report"},
    "perfweave": {"api"},
    "__main__": {"cli"},
}


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def part_of(module):
    """The part of python/perfweave that dotted module name belongs to (None: outside)."""
    names = module.split(".")
    if names[0] != "perfweave":
        return None
    return names[1] if len(names) > 1 else "perfweave"


def is_module(dotted):
    rel = PACKAGE.parent.joinpath(*dotted.split("."))
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


# the calls that import a module by its name at run time (readers/datasets.py finds each
# module's reader so, report/sections its sections, api.py a dataset's analysis)
DYNAMIC = {"import_module", "find_spec", "__import__"}


def dynamic_import(call, name):
    """The module a call of DYNAMIC imports, as far as the source says it: the name, or,
    for f"perfweave.readers.{x}", the package every module it can import is in; None when
    the source does not tell which part of python/perfweave it imports from."""
    arg = call.args[0] if call.args else None
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if not isinstance(arg, ast.JoinedStr):
        return None
    prefix = ""
    for v in arg.values:
        if isinstance(v, ast.Constant):
            prefix += v.value
        elif isinstance(v.value, ast.Name) and v.value.id == "__name__" and not v.format_spec:
            prefix += name
        else:
            break
    package = prefix.rpartition(".")[0]
    if package.split(".")[0] == "perfweave" and part_of(package) in (None, "perfweave"):
        return None  # f"perfweave.{x}": any part
    return package or None


def imports(path):
    """(module imported, names taken from it, line) of every import in the file, those by
    name at run time (DYNAMIC) included; None for a module the source does not name."""
    name, is_package = module_name(path)
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if called in DYNAMIC:
                yield dynamic_import(node, name), [], node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            for alias in node.names:
                if module == "perfweave" and alias.name == "__version__":
                    yield "perfweave.version", [], node.lineno
                elif is_module(f"{module}.{alias.name}"):  # from perfweave import writing
                    yield f"{module}.{alias.name}", [], node.lineno
                else:
                    yield module, [alias.name], node.lineno


def edges():
    """(from part, to part) -> ["file:line", ...] of every import between parts, and
    the private names taken across parts."""
    found, private = {}, []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = part_of(module_name(path)[0])
        if path.name == "__init__.py" and path.parent == PACKAGE:
            src = "perfweave"
        for module, names, line in imports(path):
            dst = part_of(module or "")
            if dst is None or dst == src:
                continue
            where = f"{path.relative_to(PACKAGE)}:{line}"
            found.setdefault((src, dst), []).append(where)
            private += [f"{where} {module}.{n}" for n in names if n.startswith("_")]
    return found, private


def cycle(graph):
    """A cycle of graph ({node: {node, ...}}) as a list of nodes, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def test_the_table_of_layers_has_no_cycle():
    assert cycle(LAYERS) is None
    assert all(dst in LAYERS for deps in LAYERS.values() for dst in deps)


def test_every_import_between_parts_follows_the_layers():
    found, _ = edges()
    assert found, "no imports found: the walk over python/perfweave is broken"
    parts = {p for edge in found for p in edge}
    assert not parts - set(LAYERS), f"parts missing from LAYERS: {parts - set(LAYERS)}"
    wrong = {f"{a} -> {b}": where for (a, b), where in found.items() if b not in LAYERS[a]}
    assert not wrong
    graph = {}
    for a, b in found:
        graph.setdefault(a, set()).add(b)
    assert cycle(graph) is None


def test_no_part_imports_private_names_of_another():
    _, private = edges()
    assert not private


def test_the_walk_sees_imports_inside_functions():
    """The check reads imports made inside functions too (the readers once imported
    interop inside open_experiment)."""
    f = PACKAGE / "readers" / "experiment.py"
    inside = {
        sub.module
        for node in ast.walk(ast.parse(f.read_text()))
        if isinstance(node, ast.FunctionDef)
        for sub in ast.walk(node)
        if isinstance(sub, ast.ImportFrom)
    }
    assert "perfweave.readers.datasets" in inside  # ExperimentDir.__getattr__ imports it
    assert inside <= {m for m, _, _ in imports(f)}


def test_the_walk_sees_imports_by_name():
    """The modules found by name at run time (each module's reader and section, a
    dataset's analysis, the command line's verbs) are edges of the walk, each from the
    package its name starts with: an import by a name that does not say its part fails."""
    unseen = [
        f"{p.relative_to(PACKAGE)}:{line}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for module, _, line in imports(p)
        if module is None
    ]
    assert not unseen, f"imports by a name that says no part of python/perfweave: {unseen}"
    taken = {
        rel: {m for m, _, _ in imports(PACKAGE / rel)}
        for rel in ("readers/datasets.py", "report/sections/__init__.py", "api.py")
    }
    assert "perfweave.readers" in taken["readers/datasets.py"]
    assert "perfweave.report.sections" in taken["report/sections/__init__.py"]
    assert "perfweave.analysis" in taken["api.py"]
    # and what they find at run time is there: the readers' datasets, the report's sections
    from perfweave.readers.datasets import DATASETS
    from perfweave.report.sections import SECTIONS

    for d in DATASETS.values():
        assert part_of(d.read.__module__) == "readers", (d.name, d.read.__module__)
    for s in SECTIONS:
        assert type(s).__module__.startswith("perfweave.report.sections."), s


def test_reading_an_imported_experiment_runs_no_code_above_the_readers(tmp_path):
    """The import graph holds what the readers import; this holds what they run: an
    experiment that perfweave import wrote is read (its profile.pwprof) without loading
    the exports or the analyses, which once computed its profile at read time through a
    function handed to open_experiment; nor does perfweave.open, which loads the
    analysis that computes it (analysis/imported_profile.py) only for an experiment
    imported by an older perfweave, without profile.pwprof."""
    from perfweave.interop.otf2 import import_archive

    anchor = PACKAGE.parents[1] / "tests" / "data" / "otf2" / "pipit-ping-pong" / "traces.otf2"
    import_archive(anchor, tmp_path / "exp")
    code = (
        "import sys\n"
        "from perfweave.readers.experiment import open_experiment\n"
        "e = open_experiment(sys.argv[1])\n"
        "assert len(e.profile.ranks) == 2 and len(e.profile.sites)\n"
        "import perfweave\n"
        "assert perfweave.open(sys.argv[1]).profile.sites.tolist() == e.profile.sites.tolist()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
        "(['perfweave', 'interop'], ['perfweave', 'analysis'])))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "exp")], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == "[]\n"


def test_report_sections_draw_with_public_widgets():
    """Inside the report: the sections import the widgets, never the renderers that loop
    over them (report/text.py, report/html.py), and the widgets import no report module."""
    report = PACKAGE / "report"
    widgets = {m for m, _, _ in imports(report / "widgets.py")}
    assert not {m for m in widgets if m.startswith("perfweave.report")}
    for path in sorted((report / "sections").glob("*.py")):
        taken = {m for m, _, _ in imports(path)}
        assert not taken & {"perfweave.report.text", "perfweave.report.html"}, path.name


# Inside analysis/samples/, each module one job, lowest first: a module imports only those
# before it (the package's __init__, analyze, puts them together).
SAMPLES_ORDER = ["names", "classification", "rooting", "tables", "__init__"]


def test_the_samples_analysis_modules_import_one_way():
    package = PACKAGE / "analysis" / "samples"
    assert sorted(p.stem for p in package.glob("*.py")) == sorted(SAMPLES_ORDER)
    for k, name in enumerate(SAMPLES_ORDER):
        taken = {m for m, _, _ in imports(package / f"{name}.py")}
        inside = {
            m.rpartition(".")[2] for m in taken if m.startswith("perfweave.analysis.samples.")
        }
        assert inside <= set(SAMPLES_ORDER[:k]), (name, inside - set(SAMPLES_ORDER[:k]))
