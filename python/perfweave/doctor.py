"""`perfweave doctor`: what this machine supports and what to install for the rest.

Each check is one item: {"item", "found", "detail", "install", "parts", "value"}, where
install is the one command or package that would add what is missing ("" when found or
when nothing installable would), parts what a found item holds (PAPI's components, ...)
and value what a script would test (a kernel setting's number, the launchers found, ...;
null where there is none). The measurement sources are sources.py's probes, the runtime's MPI
builds and launchers launch/ and task_env's: this module only words their answers and
adds the checks no other part of perfweave makes (kernel settings, Python packages)."""

import ctypes
import importlib.metadata
from pathlib import Path

SCHEMA = 1

# Debian package and the launcher each MPI build of the runtime is made for
_MPI = {
    "openmpi": ("openmpi-bin libopenmpi-dev", "mpirun.openmpi"),
    "mpich": ("mpich libmpich-dev", "mpirun.mpich"),
}


def _item(item, found, detail, install="", parts=(), value=None):
    return {
        "item": item,
        "found": bool(found),
        "detail": detail,
        "install": "" if found else install,
        "parts": list(parts),
        "value": value,
    }


def _read(path):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def check_mpi():
    """The runtime's MPI builds, and for each the launcher and compiler wrapper on PATH."""
    from perfweave.launch import built_flavors
    from perfweave.task_env import LAUNCHERS, which

    built = built_flavors()
    launchers = sorted(n for n in LAUNCHERS if which(n))
    compilers = sorted(n for n in ("mpicc", "mpicc.openmpi", "mpicc.mpich") if which(n))
    items = []
    for flavor, (package, launcher) in _MPI.items():
        have = flavor in built
        detail = (f"runtime built for {flavor}" if have else f"no runtime build for {flavor}") + (
            f"; {launcher} found" if which(launcher) else f"; {launcher} not on PATH"
        )
        install = f"apt install {package}, then reinstall perfweave (it builds for each MPI found)"
        items.append(_item(f"mpi-{flavor}", have, detail, install, value=which(launcher)))
    items.append(
        _item(
            "mpi-launchers",
            launchers,
            "launchers on PATH: "
            + (", ".join(launchers) or "none")
            + "; compilers: "
            + (", ".join(compilers) or "none"),
            "apt install openmpi-bin (or mpich)",
            value={"launchers": launchers, "compilers": compilers},
        )
    )
    return items


def check_sources():
    """sources.py's probes (perfweave components), with what to install for each."""
    from perfweave.sources import probe_all

    install = {
        "papi": "apt install libpapi-dev papi-tools",
        "pcp": "apt install pcp libpcp3, then start pmcd (systemctl start pmcd)",
        "nvml": "the NVIDIA driver (apt install libnvidia-ml1, Debian non-free)",
    }
    items = []
    for s in probe_all():
        detail = s["detail"] if s["available"] else s["why"]
        items.append(
            _item(s["source"], s["available"], detail, install.get(s["source"], ""), s["items"])
        )
    return items


def _library(item, names, what, install):
    for name in names:
        try:
            ctypes.CDLL(name)
            return _item(item, True, f"{name} loads ({what})")
        except OSError:
            continue
    return _item(item, False, f"{names[0]} not found ({what})", install)


def check_libraries():
    return [
        _library(
            "cupti",
            ("libcupti.so", "libcupti.so.12", "libcupti.so.11.8"),
            "CUDA profiling interface",
            "apt install libcupti-dev (Debian non-free)",
        ),
        # the sampler dlopens libunwind.so.8 (runtime/modules/samples_unwind.c)
        _library(
            "libunwind",
            ("libunwind.so.8",),
            "sampled stacks through code without frame pointers",
            "apt install libunwind8 (and libunwind-dev before building perfweave)",
        ),
    ]


_PTRACE = {
    "0": "classic: a process may read any process of its user",
    "1": "restricted: only descendants (tools that attach to a running rank need root)",
    "2": "admin only",
    "3": "no attach",
}


def check_kernel():
    from perfweave.papi import perf_event_paranoid

    items = []
    scope = _read("/proc/sys/kernel/yama/ptrace_scope")
    items.append(
        _item(
            "ptrace-scope",
            scope in (None, "0", "1"),
            f"kernel.yama.ptrace_scope {scope}: {_PTRACE.get(scope, 'unknown')}"
            if scope is not None
            else "no Yama module: a process may read any process of its user",
            "sysctl -w kernel.yama.ptrace_scope=1 (root)",
            value=None if scope is None else int(scope),
        )
    )
    par = perf_event_paranoid()
    items.append(
        _item(
            "perf-event-paranoid",
            par is not None and par <= 2,
            f"kernel.perf_event_paranoid {par}"
            + (
                ": own processes' user-level events"
                if par == 2
                else ": kernel and CPU events too"
                if par is not None and par < 2
                else ""
            ),
            "sysctl -w kernel.perf_event_paranoid=2 (root)",
            value=par,
        )
    )
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    items.append(
        _item(
            "numa",
            nodes,
            f"{len(nodes)} NUMA node{'s' if len(nodes) != 1 else ''}"
            if nodes
            else "no NUMA information (/sys/devices/system/node)",
            value=len(nodes),
        )
    )
    thp = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    total = next(
        (
            ln.split()[1]
            for ln in (_read("/proc/meminfo") or "").splitlines()
            if ln.startswith("HugePages_Total:")
        ),
        "0",
    )
    items.append(
        _item(
            "hugepages",
            thp is not None or total != "0",
            f"transparent huge pages {thp or 'absent'}; {total} reserved huge pages",
            "sysctl -w vm.nr_hugepages=N (root)",
            value={"transparent": thp, "reserved": int(total)},
        )
    )
    damon = Path("/sys/kernel/mm/damon/admin")
    items.append(
        _item(
            "damon",
            damon.is_dir(),
            "DAMON sysfs interface (/sys/kernel/mm/damon/admin)"
            + ("" if damon.is_dir() else " absent"),
            "a kernel built with CONFIG_DAMON_SYSFS (5.18 or later); pip install damo",
        )
    )
    return items


def _package(name, why):
    """A Python distribution by its pip name, as installed for this interpreter."""
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return _item(name, False, f"{why}: not installed", f"pip install {name}")
    return _item(name, True, f"{why}: {name} {version}", value=version)


def check_python():
    return [
        _package("otf2", "OTF2 export and import (perfweave export/import)"),
        _package("mpi4py", "perfweave analyze --parallel"),
    ]


CHECKS = (check_mpi, check_sources, check_libraries, check_kernel, check_python)


def diagnose():
    return [item for check in CHECKS for item in check()]
