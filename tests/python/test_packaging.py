"""pip packaging: the version's one place, `perfweave --version`, the sdist's contents and a
wheel built from that sdist by `pip wheel` (docs/install.md). Both are built without build
isolation, so offline (scikit-build-core is in the test extra), the sdist from a copy of the
checkout's tracked files with a user's leftovers planted among them."""

import email
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import perfweave
import perfweave.papi

try:
    import tomllib
except ImportError:  # Python < 3.11: scikit-build-core's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PERFWEAVE = str(Path(sys.executable).parent / "perfweave")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# What the sdist holds (pyproject's sdist.exclude says why): these top-level entries of the
# checkout, and nothing else of it.
SDIST_TOP = set(
    "CMakeLists.txt pyproject.toml README.md Makefile .clang-format runtime include python docs"
    " tests bench examples scripts packaging".split()
)
# What a user or a build leaves in a checkout: none of it may reach the sdist.
LEFTOVERS = [
    ".venv/bin/python",
    ".git/HEAD",
    "build/cp311-cp311-linux_x86_64/CMakeCache.txt",
    "examples/build/stencil",
    "perfweave-stencil-4p-20261129-120000/experiment.json",
    "run1/experiment.json",
    "notes.txt",
    "python/perfweave/__pycache__/api.cpython-311.pyc",
    "tests/python/__pycache__/conftest.cpython-311-pytest-9.2.0.pyc",
]


def tracked_files():
    if not (ROOT / ".git").exists():
        pytest.skip("the sdist is checked against a git checkout's tracked files")
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


def files_under(top):
    return {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()}


def build_sdist(source, out):
    """scikit-build-core's PEP 517 hook, run in SOURCE as a frontend (python -m build) runs it."""
    code = "import sys; from scikit_build_core import build; print(build.build_sdist(sys.argv[1]))"
    r = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return Path(out) / r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    """(the sdist, the planted checkout it was built from, that checkout's files before)"""
    tree = tmp_path_factory.mktemp("checkout")
    tracked = tracked_files()
    for f in tracked:
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, tree / f)
    for f in LEFTOVERS:
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        (tree / f).write_text("left by a user\n")
    before = files_under(tree)
    out = tmp_path_factory.mktemp("dist")
    return build_sdist(tree, out), tree, before, tracked


def test_version_one_place():
    """pyproject takes the version from python/perfweave/__init__.py, and the installed
    metadata says the same."""
    assert "version" not in PYPROJECT["project"]
    assert "version" in PYPROJECT["project"]["dynamic"]
    provider = PYPROJECT["tool"]["scikit-build"]["metadata"]["version"]
    assert provider["input"] == "python/perfweave/__init__.py"
    text = (ROOT / provider["input"]).read_text()
    assert re.findall(r"^__version__ = \"([^\"]+)\"$", text, re.M) == [perfweave.__version__]
    assert importlib.metadata.version("perfweave") == perfweave.__version__


def test_experiment_records_the_version(tmp_path):
    r = subprocess.run(
        [PERFWEAVE, "run", "-o", tmp_path / "exp", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    meta = json.loads((tmp_path / "exp" / "experiment.json").read_text())
    assert meta["perfweave_version"] == perfweave.__version__


def test_version_flag():
    r = subprocess.run([PERFWEAVE, "--version"], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"perfweave {perfweave.__version__}\n", "")


def test_sdist_contents(sdist):
    """The tracked sources, docs and tests, PKG-INFO, and nothing a user left; the build wrote
    nothing into the checkout."""
    path, tree, before, tracked = sdist
    assert path.name == f"perfweave-{perfweave.__version__}.tar.gz"
    prefix = f"perfweave-{perfweave.__version__}/"
    with tarfile.open(path) as tar:
        members = [m.name for m in tar.getmembers() if m.isfile()]
        info = email.message_from_bytes(tar.extractfile(prefix + "PKG-INFO").read())
    assert all(m.startswith(prefix) for m in members)
    names = {m[len(prefix) :] for m in members}
    expected = {f for f in tracked if f.split("/")[0] in SDIST_TOP} | {"PKG-INFO"}
    assert names == expected, (sorted(names - expected), sorted(expected - names))
    # the tests of an unpacked sdist run as the checkout's: their programs and data are there
    assert {"tests/python/conftest.py", "tests/runtime/conftest.py", "bench/tracegen.py"} <= names
    assert info["Name"] == "perfweave" and info["Version"] == perfweave.__version__
    assert files_under(tree) == before


def test_wheel_from_sdist(sdist, tmp_path):
    """pip's wheel from the unpacked sdist, configured as the Spack package configures it
    (one MPI, PCP off, a run path for the libraries the runtime dlopens): the runtime and
    the generated modules in it, the version, and nothing written in the source but build/."""
    path, _, _, _ = sdist
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(path) as tar:
        tar.extractall(tmp_path, **safe)
    source = tmp_path / f"perfweave-{perfweave.__version__}"
    before = files_under(source)
    papi_dir = str(tmp_path / "papi" / "lib")
    mpicc = shutil.which("mpicc.openmpi") or shutil.which("mpicc")
    if not mpicc:
        pytest.skip("no MPI compiler wrapper")
    settings = {
        "cmake.define.PERFWEAVE_MPICC": f"openmpi={mpicc}",
        "cmake.define.PERFWEAVE_PCP": "OFF",
        "cmake.define.PERFWEAVE_RUNTIME_LIBDIRS": papi_dir,
    }
    # `pip wheel`, as a user runs it, but offline: the backend and cmake already installed
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["-w", tmp_path / "wheel", source]
        + [f"--config-settings={k}={v}" for k, v in settings.items()],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").iterdir()
    assert wheel.name.startswith(f"perfweave-{perfweave.__version__}-")
    written = files_under(source) - before
    assert written and all(f.startswith("build/") for f in written), sorted(written)[:10]

    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = email.message_from_bytes(
            z.read(f"perfweave-{perfweave.__version__}.dist-info/METADATA")
        )
        z.extractall(unpacked)
    assert meta["Version"] == perfweave.__version__
    lib = "perfweave/lib/"
    assert {lib + "libperfweave.so", lib + "libperfweave-mpi-openmpi.so"} <= names
    assert lib + "libperfweave-mpi-mpich.so" not in names  # only the MPI it was given
    for generated in ("_format.py", "_options.py", "_mpi.py", "_build.py"):
        assert "perfweave/" + generated in names
    assert not any(n.startswith(("tests/", "docs/", "bench/", "runtime/")) for n in names)
    # the man page and completions (scripts/gen_shell_files.py), for share/ of the install
    data = f"perfweave-{perfweave.__version__}.data/data/share/"
    for shared in (
        "man/man1/perfweave.1",
        "bash-completion/completions/perfweave",
        "zsh/site-functions/_perfweave",
    ):
        assert data + shared in names

    core = unpacked / lib / "libperfweave.so"
    dynamic = subprocess.run(["readelf", "-d", core], capture_output=True, text=True).stdout
    assert re.search(r"\((?:RUNPATH|RPATH)\).*\[" + re.escape(papi_dir) + r"\]", dynamic)
    assert runtime_libdirs(unpacked) == (papi_dir,)
    # PERFWEAVE_PCP=OFF: the runtime built without PCP though this machine has pmapi.h
    off = b"perfweave was built without PCP's pmapi.h"
    assert off in core.read_bytes()
    if Path("/usr/include/pcp/pmapi.h").exists():
        installed = Path(perfweave.__file__).parent / "lib" / "libperfweave.so"
        assert off not in installed.read_bytes()

    # A PAPI in that directory is the one the runtime (in the measured process) and the
    # Python side (checking --counters before the run) open, though the system has its own
    papi = system_papi()
    if papi is None:
        return
    Path(papi_dir).mkdir(parents=True)
    shutil.copy(papi, Path(papi_dir) / "libpapi.so.7.1")  # the first name both try
    r = subprocess.run(
        [sys.executable, "-m", "perfweave", "run", "--counters", "perf::TASK-CLOCK", "-o"]
        + [tmp_path / "exp", "--", "true"],
        env={**os.environ, "PYTHONPATH": str(unpacked), "LD_DEBUG": "libs"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    loaded = re.findall(r"^\s*(\d+):\s+calling init: (\S*/libpapi\.so\S*)$", r.stderr, re.M)
    assert {path for _, path in loaded} == {f"{papi_dir}/libpapi.so.7.1"}, loaded
    assert len({pid for pid, _ in loaded}) == 2  # perfweave run's, and the measured program's


def runtime_libdirs(package_parent):
    """RUNTIME_LIBDIRS of the perfweave package under PACKAGE_PARENT (a generated module)."""
    text = (package_parent / "perfweave" / "_build.py").read_text()
    namespace = {}
    exec(compile(text, "_build.py", "exec"), namespace)
    return namespace["RUNTIME_LIBDIRS"]


def system_papi():
    """The file of the PAPI library this machine's loader finds, or None."""
    lib, _ = perfweave.papi.open_papi()
    if lib is None:
        return None
    maps = Path("/proc/self/maps").read_text().splitlines()
    return next(line.split()[-1] for line in maps if "/libpapi.so" in line)
