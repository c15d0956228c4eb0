"""What this machine can measure: each source of `perfweave components`, whether it
is available, what it offers, and if not, why (library absent, daemon not running,
no device, no permission). The probes mirror what the runtime does at run time
(runtime/modules/timeline.c): the same files, the same libraries by dlopen."""

import ctypes
import os
import re
import shutil
import subprocess
from pathlib import Path


def _source(name, what, available, detail="", why="", items=()):
    return {
        "source": name,
        "what": what,
        "available": bool(available),
        "detail": detail,
        "why": "" if available else why,
        "items": list(items),
    }


def probe_net():
    try:
        lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    except OSError as e:
        return _source(
            "net",
            "network interface bytes (/proc/net/dev)",
            False,
            why=f"/proc/net/dev not readable ({e.strerror})",
        )
    names = [ln.split(":", 1)[0].strip() for ln in lines if ":" in ln]
    return _source(
        "net",
        "network interface bytes (/proc/net/dev)",
        True,
        f"{len(names)} interfaces",
        items=names,
    )


def probe_infiniband(root="/sys/class/infiniband"):
    what = "InfiniBand port bytes (/sys/class/infiniband)"
    d = Path(root)
    if not d.is_dir():
        return _source("infiniband", what, False, why="no InfiniBand device")
    ports = []
    for dev in sorted(d.iterdir()):
        for port in sorted((dev / "ports").glob("*")):
            if os.access(port / "counters" / "port_rcv_data", os.R_OK):
                ports.append(f"{dev.name}/{port.name}")
    if not ports:
        return _source("infiniband", what, False, why="no readable port counters")
    return _source("infiniband", what, True, f"{len(ports)} ports", items=ports)


def probe_rapl(root="/sys/class/powercap"):
    what = "RAPL energy (/sys/class/powercap)"
    d = Path(root)
    zones = sorted(z for z in d.glob("*-rapl:*")) if d.is_dir() else []
    if not zones:
        return _source(
            "rapl",
            what,
            False,
            why="no RAPL zone (no powercap driver; typical of virtual machines)",
        )
    readable = [z for z in zones if os.access(z / "energy_uj", os.R_OK)]
    if not readable:
        return _source(
            "rapl", what, False, why="energy_uj not readable (root only on recent kernels)"
        )
    names = []
    for z in readable:
        try:
            names.append(f"{z.name} ({(z / 'name').read_text().strip()})")
        except OSError:
            names.append(z.name)
    return _source("rapl", what, True, f"{len(readable)} zones", items=names)


def probe_proc():
    what = "per-process memory, CPU time and I/O (/proc/PID)"
    if not os.access("/proc/self/io", os.R_OK):
        return _source("proc", what, False, why="/proc/self/io not readable")
    return _source("proc", what, True, "resident memory, CPU time, read/write bytes")


def probe_nvml():
    what = "GPU power, energy, utilisation, memory (NVML)"
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return _source("nvml", what, False, why="libnvidia-ml.so.1 not found (no NVIDIA driver)")
    try:
        rc = lib.nvmlInit_v2()
        if rc != 0:
            return _source("nvml", what, False, why=f"nvmlInit failed (NVML error {rc})")
        n = ctypes.c_uint(0)
        lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
        names = []
        for i in range(n.value):
            h = ctypes.c_void_p()
            buf = ctypes.create_string_buffer(96)
            if (
                lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0
                and lib.nvmlDeviceGetName(h, buf, 96) == 0
            ):
                names.append(f"gpu{i}: {buf.value.decode(errors='replace')}")
        lib.nvmlShutdown()
    except AttributeError:
        return _source("nvml", what, False, why="libnvidia-ml.so.1 lacks the NVML v2 API")
    if not n.value:
        return _source("nvml", what, False, why="NVML sees no GPU")
    return _source("nvml", what, True, f"{n.value} GPUs", items=names)


PCP_EXAMPLES = (
    "kernel.all.cpu.user",
    "network.interface.in.bytes",
    "mem.util.used",
    "perfevent.hwcounters",
)


def probe_pcp():
    what = "PCP metrics from the local pmcd (--pcp)"
    try:
        lib = ctypes.CDLL("libpcp.so.3")
    except OSError:
        return _source("pcp", what, False, why="libpcp.so.3 not found (install PCP)")
    lib.pmErrStr.restype = ctypes.c_char_p
    ctx = lib.pmNewContext(1, b"local:")  # PM_CONTEXT_HOST
    if ctx < 0:
        return _source(
            "pcp",
            what,
            False,
            why=f"pmcd not reachable ({lib.pmErrStr(ctx).decode()}): start it "
            "(/etc/init.d/pmcd start)",
        )
    have = []
    for m in PCP_EXAMPLES:
        names = (ctypes.c_char_p * 1)(m.encode())
        pmid = ctypes.c_uint(0)
        if lib.pmLookupName(1, names, ctypes.byref(pmid)) >= 0:
            have.append(m)
        elif m == "perfevent.hwcounters":
            # a non-leaf: look for any child (pmGetChildren)
            kids = ctypes.POINTER(ctypes.c_char_p)()
            if lib.pmGetChildren(m.encode(), ctypes.byref(kids)) > 0:
                have.append(m + ".*")
    lib.pmDestroyContext(ctx)
    return _source(
        "pcp",
        what,
        True,
        "pmcd reachable; of the common metrics: " + (", ".join(have) or "none"),
        items=have,
    )


def probe_papi():
    what = "PAPI counters of every compiled-in component"
    from perfweave.papi import open_papi, unknown_processor

    tool = shutil.which("papi_component_avail")
    lib, why = open_papi()
    if lib is None:
        return _source("papi", what, False, why=why)
    if not tool:
        return _source(
            "papi", what, True, "library found (install papi-tools to list its components)"
        )
    try:
        out = subprocess.run([tool], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return _source("papi", what, True, f"library found; {tool} failed ({e})")
    comps = []
    compiled = out.split("Compiled-in components:", 1)[-1].split("Active components:", 1)[0]
    for m in re.finditer(
        r"Name:\s+(\S+)\s+([^\n]*)(?:\n\s*\\->\s*Disabled:\s*([^\n]*))?", compiled
    ):
        name, desc, dis = m.group(1), m.group(2).strip(), m.group(3)
        comps.append(f"{name}: disabled ({dis.strip()})" if dis else f"{name}: {desc}")
    detail = f"{sum(1 for c in comps if ': disabled' not in c)} of {len(comps)} components active"
    unknown = unknown_processor(lib)
    # the kernel's software events are perfweave's on every machine (counters.c says why)
    ours = _kernel_events_here()
    comps.append("perf:: events counted by perfweave (perf_event_open): " + ", ".join(ours))
    if unknown:
        # PAPI has no perf:: events here either
        some = [f"perf::{n}" for n in ("TASK-CLOCK", "PAGE-FAULTS") if n in ours]
        detail += (
            f"; {unknown}; perfweave counts the kernel's software events itself "
            f"({', '.join(some + ['...']) if ours else 'none countable here'})"
        )
    else:
        detail += f"; {_hardware_counters()}"
    forced = os.environ.get("LIBPFM_FORCE_PMU")
    if forced:
        detail += (
            f"; LIBPFM_FORCE_PMU={forced}: libpfm4 encodes that PMU's events and no perf:: "
            "event, whatever this processor is"
        )
    return _source("papi", what, True, detail, items=comps)


def _kernel_events_here():
    """The main names of kernel_events.json's software events this kernel lets this user
    count."""
    from perfweave.papi import kernel_countable, kernel_events

    first = {}
    for name, config in kernel_events().items():
        first.setdefault(config, name)
    return [n for c, n in first.items() if kernel_countable(c) is None]


def _hardware_counters():
    """Can perf_event count instructions here? (no on many virtual machines)"""
    from perfweave.papi import perf_event_paranoid

    par = perf_event_paranoid()
    tool = shutil.which("papi_avail")
    if tool:
        try:
            out = subprocess.run(
                [tool, "-e", "PAPI_TOT_INS"], capture_output=True, text=True, timeout=30
            ).stdout
            if "not available" in out.lower() or "error" in out.lower():
                return (
                    "hardware counters not available (PAPI_TOT_INS; software events "
                    "such as perf::TASK-CLOCK and perf::PAGE-FAULTS are)"
                )
            return "hardware counters available (PAPI_TOT_INS)" + (
                f"; perf_event_paranoid {par}" if par is not None else ""
            )
        except (OSError, subprocess.TimeoutExpired):
            pass
    return f"perf_event_paranoid {par}" if par is not None else "hardware counters unknown"


PROBES = (probe_papi, probe_pcp, probe_nvml, probe_infiniband, probe_rapl, probe_net, probe_proc)


def probe_all():
    return [p() for p in PROBES]
