"""perfweave doctor: one item per check, each value as this machine has it (read here
from /proc, /sys and PATH apart from perfweave's probes), exit status 0, and the JSON's
members fixed."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfweave.launch import built_flavors

PERFWEAVE = str(Path(sys.executable).parent / "perfweave")

ITEMS = [
    "mpi-openmpi",
    "mpi-mpich",
    "mpi-launchers",
    "papi",
    "pcp",
    "nvml",
    "infiniband",
    "rapl",
    "net",
    "proc",
    "cupti",
    "libunwind",
    "ptrace-scope",
    "perf-event-paranoid",
    "numa",
    "hugepages",
    "damon",
    "otf2",
    "mpi4py",
]


@pytest.fixture(scope="module")
def doctor():
    out = subprocess.run(
        [PERFWEAVE, "doctor", "--json"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    return {i["item"]: i for i in got["items"]}, got


def test_json_schema_is_stable(doctor):
    items, whole = doctor
    assert set(whole) == {"schema", "items"} and whole["schema"] == 1
    assert list(items) == ITEMS
    for i in items.values():
        assert set(i) == {"item", "found", "detail", "install", "parts", "value"}
        assert isinstance(i["found"], bool) and i["detail"]
        # what to install is said for a missing item only
        assert not (i["found"] and i["install"])


def test_text_lists_every_item_and_exits_0():
    out = subprocess.run([PERFWEAVE, "doctor"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and not out.stderr, out.stderr
    first = [ln.split()[0] for ln in out.stdout.splitlines() if not ln.startswith(" ")]
    assert first == ITEMS
    for ln in out.stdout.splitlines():
        if not ln.startswith(" "):
            assert ln.split()[1] in ("found", "missing"), ln


def test_kernel_settings_as_proc_and_sys_have_them(doctor):
    items, _ = doctor
    paranoid = int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    assert items["perf-event-paranoid"]["value"] == paranoid
    assert f"perf_event_paranoid {paranoid}" in items["perf-event-paranoid"]["detail"]
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    assert items["ptrace-scope"]["value"] == (int(scope.read_text()) if scope.exists() else None)
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    assert items["numa"]["value"] == len(nodes) and items["numa"]["found"] == bool(nodes)
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    assert items["hugepages"]["value"]["transparent"] == (
        thp.read_text().strip() if thp.exists() else None
    )
    assert items["damon"]["found"] == Path("/sys/kernel/mm/damon/admin").is_dir()


def test_mpi_builds_and_launchers_as_installed(doctor):
    items, _ = doctor
    for flavor, launcher in (("openmpi", "mpirun.openmpi"), ("mpich", "mpirun.mpich")):
        item = items[f"mpi-{flavor}"]
        assert item["found"] == (flavor in built_flavors())
        assert item["value"] == shutil.which(launcher)
        assert bool(item["install"]) == (not item["found"])
    launchers = items["mpi-launchers"]["value"]
    for name in ("mpirun", "mpiexec", "srun", "mpirun.openmpi", "mpirun.mpich"):
        assert (name in launchers["launchers"]) == bool(shutil.which(name))
    assert ("mpicc" in launchers["compilers"]) == bool(shutil.which("mpicc"))


def test_sources_are_those_of_perfweave_components(doctor):
    """The measurement sources are perfweave components' own answers, word for word."""
    items, _ = doctor
    out = subprocess.run(
        [PERFWEAVE, "components", "--json"], capture_output=True, text=True, timeout=120
    )
    for s in json.loads(out.stdout)["sources"]:
        item = items[s["source"]]
        assert item["found"] == s["available"]
        assert item["detail"] == (s["detail"] if s["available"] else s["why"])
        assert item["parts"] == s["items"]
    # a missing PAPI, PCP or NVML says what to install
    for name in ("papi", "pcp", "nvml"):
        assert items[name]["found"] or items[name]["install"]


def test_python_packages_and_libraries_as_importable(doctor):
    import ctypes

    items, _ = doctor
    for name in ("otf2", "mpi4py"):
        # pip's own answer, apart from importlib.metadata's
        shown = subprocess.run(
            [sys.executable, "-m", "pip", "show", name], capture_output=True, text=True
        )
        found = shown.returncode == 0
        assert items[name]["found"] == found
        assert items[name]["install"] == ("" if found else f"pip install {name}")
        if found:
            version = shown.stdout.split("Version: ", 1)[1].split()[0]
            assert items[name]["value"] == version
    try:
        ctypes.CDLL("libunwind.so.8")
        unwind = True
    except OSError:
        unwind = False
    assert items["libunwind"]["found"] == unwind


def test_what_is_missing_says_what_to_install(tmp_path):
    """No runtime build (an empty PERFWEAVE_LIBDIR) and no launcher (a PATH without
    one): each item missing, with its package, and the exit status still 0."""
    import os

    env = dict(os.environ, PERFWEAVE_LIBDIR=str(tmp_path), PATH=str(tmp_path))
    out = subprocess.run(
        [PERFWEAVE, "doctor", "--json"], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    items = {i["item"]: i for i in json.loads(out.stdout)["items"]}
    assert items["mpi-openmpi"]["found"] is False
    assert items["mpi-openmpi"]["install"].startswith("apt install openmpi-bin libopenmpi-dev")
    assert items["mpi-mpich"]["install"].startswith("apt install mpich libmpich-dev")
    assert items["mpi-openmpi"]["value"] is None
    launchers = items["mpi-launchers"]
    assert launchers["found"] is False and launchers["install"]
    assert launchers["value"] == {"launchers": [], "compilers": []}
