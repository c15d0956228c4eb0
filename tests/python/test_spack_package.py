"""The Spack package (packaging/spack/spack_repo/perfweave), loaded with a stand-in for the
part of Spack's package DSL it uses: Spack itself is not on the registries this project
installs from. Each variant must switch something real (a cache variable CMakeLists.txt
reads, or a dependency), its CMake values must be ones CMakeLists.txt takes, and its
dependencies must be pyproject's, at the same version floors."""

import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest

import perfweave

try:
    import tomllib
except ImportError:  # Python < 3.11: scikit-build-core's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
REPO = ROOT / "packaging" / "spack" / "spack_repo" / "perfweave"
PACKAGE = REPO / "packages" / "perfweave" / "package.py"
CMAKE = (ROOT / "CMakeLists.txt").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


class Directives:
    """What the class body of a package declares, in order."""

    def __init__(self):
        self.versions, self.variants, self.depends, self.conflicts = [], {}, [], []

    def module(self):
        m = types.ModuleType("spack.package")
        m.version = lambda v, **kw: self.versions.append(v)
        m.variant = lambda name, default, description, **kw: self.variants.__setitem__(
            name, default
        )
        m.depends_on = lambda spec, type=("build", "link"), when=None: self.depends.append(
            (spec, tuple([type] if isinstance(type, str) else type), when)
        )
        m.conflicts = lambda spec, when=None, msg=None: self.conflicts.append((spec, when))
        m.which = lambda *a, **kw: None
        m.__all__ = ["version", "variant", "depends_on", "conflicts", "which"]
        return m


class Spec:
    """A concrete spec as config_settings sees it: variants, and its dependencies' names,
    compiler wrappers and library directories."""

    def __init__(self, variants, mpi="openmpi"):
        self.variants, self.mpi = variants, mpi

    def satisfies(self, text):
        m = re.fullmatch(r"([+~])(\w+)", text)
        assert m, f"the stand-in knows +variant and ~variant, not {text!r}"
        return self.variants[m[2]] == (m[1] == "+")

    def __getitem__(self, name):
        if name == "mpi":
            return types.SimpleNamespace(name=self.mpi, mpicc=f"/spack/{self.mpi}/bin/mpicc")
        libs = types.SimpleNamespace(directories=[f"/spack/{name}/lib"])
        return types.SimpleNamespace(name=name, libs=libs)


@pytest.fixture(scope="module")
def package():
    d = Directives()

    class PythonPackage:
        pass

    build_systems = types.ModuleType("spack_repo.builtin.build_systems.python")
    build_systems.PythonPackage = PythonPackage
    stand_ins = {
        "spack": types.ModuleType("spack"),
        "spack.package": d.module(),
        "spack_repo": types.ModuleType("spack_repo"),
        "spack_repo.builtin": types.ModuleType("spack_repo.builtin"),
        "spack_repo.builtin.build_systems": types.ModuleType("spack_repo.builtin.build_systems"),
        "spack_repo.builtin.build_systems.python": build_systems,
    }
    saved = {k: sys.modules.get(k) for k in stand_ins}
    sys.modules.update(stand_ins)
    try:
        spec = importlib.util.spec_from_file_location("perfweave_spack_package", PACKAGE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module, d


def settings(package, **variants):
    module, d = package
    chosen = {**d.variants, **{k: v for k, v in variants.items() if k != "mpi_provider"}}
    spec = Spec(chosen, variants.get("mpi_provider", "openmpi"))
    return module.Perfweave().config_settings(spec, "/spack/perfweave")


def active_depends(d, variants):
    def on(when):
        return when is None or Spec(variants).satisfies(when)

    return {(spec, types_) for spec, types_, when in d.depends if on(when)}


def cache_variables():
    """The cache variables CMakeLists.txt takes from -D: its options, its CACHE sets, and
    those it reads only when defined."""
    names = set(re.findall(r"option\((\w+)", CMAKE))
    names |= set(re.findall(r"set\((\w+) [^)]*CACHE", CMAKE))
    names |= set(re.findall(r"if\(NOT DEFINED (\w+)\)", CMAKE))
    return names


def test_repository_layout():
    """A Spack package repository (package API v2): spack_repo/<namespace>/repo.yaml."""
    text = (REPO / "repo.yaml").read_text()
    assert re.search(r"^\s+namespace: perfweave$", text, re.M)
    assert re.search(r"^\s+api: v2\.\d+$", text, re.M)
    assert PACKAGE.parent.name == "perfweave"


def test_version_is_the_package_version(package):
    _, d = package
    assert perfweave.__version__ in d.versions


def test_every_variant_switches_something(package):
    """Toggling one variant from the defaults changes the CMake settings or the
    dependencies (a combination a conflict forbids is not tried)."""
    module, d = package
    base = dict(d.variants)
    assert set(base) == {"mpi", "papi", "pcp", "libunwind", "parallel", "otf2"}
    for name, default in base.items():
        flipped = {**base, name: not default}
        assert not any(
            Spec(flipped).satisfies(c) and Spec(flipped).satisfies(w) for c, w in d.conflicts
        )
        changed_cmake = settings(package, **flipped) != settings(package, **base)
        changed_deps = active_depends(d, flipped) != active_depends(d, base)
        assert changed_cmake or changed_deps, name


def test_cmake_settings_are_cmakelists_cache_variables(package):
    module, d = package
    known = cache_variables()
    pcp_values = re.search(r"PERFWEAVE_PCP PROPERTY STRINGS ([\w ]+)\)", CMAKE)[1].split()
    for variants in ({}, {v: not x for v, x in d.variants.items() if v != "parallel"}):
        for key, value in settings(package, **variants).items():
            assert key.startswith("cmake.define."), key
            name = key[len("cmake.define.") :]
            assert name in known, name
            if re.search(rf"option\({name}\b", CMAKE):
                assert value in ("ON", "OFF"), (name, value)
            if name == "PERFWEAVE_PCP":
                assert value in pcp_values


def test_mpi_flavour_is_a_family_the_loader_knows(package):
    """PERFWEAVE_MPICC names the build by the family that mpi_loader.c's mpi_family()
    answers for the provider, so each process finds it without --mpi."""
    module, _ = package
    loader = (ROOT / "runtime" / "modules" / "mpi_loader.c").read_text()
    body = loader[loader.index("static const char *mpi_family(void)") :]
    families = set(re.findall(r'return "(\w+)";', body[: body.index("\n}\n")]))
    assert families == {"openmpi", "mpich"}
    assert set(module.MPI_FAMILY.values()) <= families
    for provider, family in [("openmpi", "openmpi"), ("mvapich2", "mpich"), ("mpt", "mpt")]:
        s = settings(package, mpi_provider=provider)
        assert s["cmake.define.PERFWEAVE_MPICC"] == f"{family}=/spack/{provider}/bin/mpicc"
    assert settings(package, mpi=False, parallel=False)["cmake.define.PERFWEAVE_MPICC"] == ""


def test_dlopened_libraries_in_the_run_path(package):
    s = settings(package, papi=True, libunwind=True)
    assert s["cmake.define.PERFWEAVE_RUNTIME_LIBDIRS"] == "/spack/papi/lib;/spack/libunwind/lib"
    s = settings(package, papi=False, libunwind=False)
    assert s["cmake.define.PERFWEAVE_RUNTIME_LIBDIRS"] == ""
    assert s["cmake.define.PERFWEAVE_LIBUNWIND"] == "OFF"


def version(text):
    """'1.50' -> (1, 5), '3.0' -> (3,): the same floor however written"""
    parts = [int(p) for p in text.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def floor(requirement):
    """'numpy>=1.22' (pip) or 'py-numpy@1.22:+variant' (Spack) -> (name, (1, 22))"""
    m = re.fullmatch(r"([\w-]+)(?:>=|@)([\d.]+):?(?:\+\w+)*", requirement)
    assert m, requirement
    return m[1], version(m[2])


def test_dependencies_are_pyprojects(package):
    """Spack's names for pyproject's requirements, at the same floors: py-<name>, but OTF2's
    Python bindings come with Spack's otf2 (it extends python). Each extra but test is a
    variant of the same name."""
    _, d = package
    spack_name = {"otf2": "otf2", "python": "python"}
    declared = {
        floor(spec)[0]: (floor(spec)[1], when) for spec, _, when in d.depends if "@" in spec
    }

    def expect(requirement, when=None):
        name, at_least = floor(requirement)
        name = spack_name.get(name, "py-" + name)
        assert declared.get(name) == (at_least, when), (requirement, declared.get(name))

    expect("python>=" + PYPROJECT["project"]["requires-python"][2:])
    for req in PYPROJECT["project"]["dependencies"]:
        expect(req)
    for extra, reqs in PYPROJECT["project"]["optional-dependencies"].items():
        if extra != "test":
            assert extra in d.variants
            for req in reqs:
                expect(req, when=f"+{extra}")
    expect(PYPROJECT["build-system"]["requires"][0])
    cmake = re.search(r"cmake_minimum_required\(VERSION ([\d.]+)\)", CMAKE)[1]
    assert declared["cmake"] == (version(cmake), None)


def test_when_clauses_name_declared_variants(package):
    """As `spack audit packages` checks: no condition on a variant the package lacks."""
    _, d = package
    whens = [w for _, _, w in d.depends if w] + [w for _, w in d.conflicts if w]
    whens += [c for c, _ in d.conflicts]
    for w in whens:
        assert re.fullmatch(r"[+~](\w+)", w)[1] in d.variants, w
