"""PAPI from Python (ctypes), for checking --counters before a run: is PAPI there, and
does it know each event? The runtime opens the same library with dlopen
(runtime/modules/counters.c) and checks again in every process.

The kernel's software events (perf::TASK-CLOCK, perf::PAGE-FAULTS, ...: kernel_events.json)
are checked as the runtime counts them on every machine, with perf_event_open, one
descriptor each: on a processor libpfm4 does not know, PAPI's perf_event component is
disabled and they are no PAPI events, though they need nothing of the processor; and the
kernel loses counts of the members of a group of software events other than its leader,
which a PAPI event set would make them (runtime/modules/counters.c)."""

import ctypes
import errno
import json
import os
import platform
from functools import lru_cache
from importlib import resources
from pathlib import Path

LIBS = (
    "libpapi.so.7.1",
    "libpapi.so.7.0",
    "libpapi.so.7",
    "libpapi.so",
    "libpapi.so.6.0",
    "libpapi.so.5",
)


def open_papi():
    """(ctypes library, None) with PAPI initialised, or (None, why)."""
    from perfweave._build import RUNTIME_LIBDIRS

    lib = None
    # each name as the runtime's dlopen looks it up: in its run path (a Spack prefix), then
    # the system's
    for path in [p for n in LIBS for p in (*(os.path.join(d, n) for d in RUNTIME_LIBDIRS), n)]:
        try:
            lib = ctypes.CDLL(path)
            break
        except OSError:
            continue
    if lib is None:
        return None, "PAPI (libpapi.so) not found: install libpapi-dev"
    # PAPI_VER_CURRENT is (major << 24 | minor << 16): PAPI_library_init answers it back
    # when it is the library's own
    for major in (7, 6, 5):
        for minor in (3, 2, 1, 0):
            v = (major << 24) | (minor << 16)
            if lib.PAPI_library_init(v) == v:
                lib.PAPI_strerror.restype = ctypes.c_char_p
                return lib, None
    return None, "libpapi did not initialise (PAPI 5 to 7 expected)"


@lru_cache(maxsize=None)
def kernel_events():
    """{NAME: config} of kernel_events.json: each name (upper case, without perf::) of a
    kernel software event and its PERF_TYPE_SOFTWARE config."""
    spec = json.loads(resources.files("perfweave").joinpath("kernel_events.json").read_text())
    return {n.upper(): e["config"] for e in spec["events"] for n in e["names"]}


def kernel_event(name):
    """The software event config of a name of kernel_events.json (perf::NAME or NAME, in
    any case), or None."""
    base = name[len("perf::") :] if name.lower().startswith("perf::") else name
    return kernel_events().get(base.upper())


class _PerfEventAttr(ctypes.Structure):
    """linux/perf_event.h's perf_event_attr up to config1 (PERF_ATTR_SIZE_VER0, which every
    kernel with perf_event takes)."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),  # bit 5: exclude_kernel, bit 6: exclude_hv
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
    ]


# the system call's number, per architecture (its asm/unistd.h)
_SYS_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331}
_PERF_TYPE_SOFTWARE, _PERF_FLAG_FD_CLOEXEC = 1, 8


def open_kernel_event(config):
    """(descriptor, None) counting the software event config in this thread from now on,
    opened as the runtime opens it (user-level domain, PAPI's default); (None, why not)."""
    nr = _SYS_PERF_EVENT_OPEN.get(platform.machine())
    if nr is None:
        return None, f"perf_event_open: no system call number known for {platform.machine()}"
    attr = _PerfEventAttr(type=_PERF_TYPE_SOFTWARE, config=config, flags=(1 << 5) | (1 << 6))
    attr.size = ctypes.sizeof(attr)
    libc = ctypes.CDLL(None, use_errno=True)
    # this thread (pid 0), any CPU (-1), no group (-1); longs, as the kernel reads them
    pid, cpu, group, flags = (ctypes.c_long(v) for v in (0, -1, -1, _PERF_FLAG_FD_CLOEXEC))
    fd = libc.syscall(ctypes.c_long(nr), ctypes.byref(attr), pid, cpu, group, flags)
    if fd >= 0:
        return fd, None
    err = ctypes.get_errno()
    why = os.strerror(err)
    if err in (errno.EACCES, errno.EPERM) and perf_event_paranoid() is not None:
        why += f"; kernel.perf_event_paranoid is {perf_event_paranoid()}"
    return None, f"perf_event_open: {why}"


def kernel_countable(config):
    """None when the kernel counts the software event config in this thread, opened as the
    runtime opens it, else why not."""
    fd, why = open_kernel_event(config)
    if fd is not None:
        os.close(fd)
    return why


def perf_event_paranoid():
    """kernel.perf_event_paranoid, or None where it cannot be read."""
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return None


class _PmuInfo(ctypes.Structure):
    """libpfm4's pfm_pmu_info_t (ABI version 0, checked through its size field)."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("desc", ctypes.c_char_p),
        ("size", ctypes.c_size_t),
        ("pmu", ctypes.c_int),
        ("type", ctypes.c_int),
        ("nevents", ctypes.c_int),
        ("first_event", ctypes.c_int),
        ("max_encoding", ctypes.c_int),
        ("num_cntrs", ctypes.c_int),
        ("num_fixed_cntrs", ctypes.c_int),
        ("flags", ctypes.c_uint),  # bit 0: is_present
    ]


_PFM_ERR_INVAL, _PFM_PMU_TYPE_CORE = -2, 1


def core_pmus(lib):
    """The core PMUs libpfm4 finds on this processor, by name, as PAPI's perf_event
    component sees them (libpfm4 through PAPI's handle: its dependency, or built into it);
    None when libpfm4's functions are not found there."""
    try:
        pmu_info = lib.pfm_get_pmu_info
    except AttributeError:
        return None
    names = []
    for i in range(4096):
        info = _PmuInfo(size=ctypes.sizeof(_PmuInfo))
        rc = pmu_info(i, ctypes.byref(info))
        if rc == _PFM_ERR_INVAL:  # past the last PMU libpfm4 has
            break
        if rc == 0 and info.flags & 1 and info.type == _PFM_PMU_TYPE_CORE and info.name:
            names.append(info.name.decode())
    return names


def processor():
    """This machine's processor as libpfm4 tells models apart: vendor, family, model."""
    seen = {}
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        key, _, value = line.partition(":")
        seen.setdefault(key.strip(), value.strip())
    try:
        family, model = int(seen["cpu family"]), int(seen["model"])
        return f"{seen.get('vendor_id', '?')} family {family:#x} model {model:#x}"
    except (KeyError, ValueError):
        return platform.processor() or platform.machine()


def _libpfm4_release():
    """libpfm4's release as its loaded library's file names it (libpfm.so.4.13.0), or ''."""
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split()[-1]
            if "/libpfm.so" in path:
                return Path(path).resolve().name.split(".so.", 1)[1]
    except (OSError, IndexError):
        pass
    return ""


def unknown_processor(lib):
    """Why PAPI counts no hardware events or presets here when libpfm4 knows no core PMU of
    this processor but Intel's architectural one (PAPI takes its presets from that PMU, and
    disables its perf_event component without one: every release to 7.2); else None."""
    core = core_pmus(lib)
    if core is None or any(n != "ix86arch" for n in core):
        return None
    release = _libpfm4_release()
    where = processor()
    disabled = os.environ.get("LIBPFM_DISABLED_PMUS")
    if disabled:
        where += f"; LIBPFM_DISABLED_PMUS={disabled}"
    return (
        f"libpfm4{' ' + release if release else ''} does not know this processor ({where}): "
        "PAPI counts none of its hardware events or presets here"
    )


def _papi_why(lib, rc):
    msg = lib.PAPI_strerror(rc)
    return msg.decode() if msg else f"PAPI error {rc}"


def check_events(names):
    """(known names, unknown [(name, why)], why PAPI is unusable or None): known to PAPI,
    or a kernel software event of kernel_events.json."""
    lib, why = open_papi()
    if lib is None:
        return [], [], why
    known, unknown = [], []
    for name in names:
        code = ctypes.c_int(0)
        rc = lib.PAPI_event_name_to_code(name.encode(), ctypes.byref(code))
        if rc == 0 or kernel_event(name) is not None:
            known.append(name)
        else:
            note = unknown_processor(lib)
            unknown.append((name, f"PAPI: {_papi_why(lib, rc)}" + (f"; {note}" if note else "")))
    return known, unknown, None


def countable(names):
    """(counted, not counted [(name, why)]) of events PAPI knows or of the kernel's: PAPI
    knows names it cannot count here (a preset such as PAPI_TOT_INS without hardware
    counters), and an event set holding one of them cannot start at all. Each event PAPI
    knows is tried in a probe event set with those PAPI counts kept before it (as the
    runtime does in each process), so one that cannot be counted, or not together with the
    others, is left out and the others kept; a kernel event of kernel_events.json is opened
    as the runtime opens it (the runtime counts those itself on every machine). A reason
    names its source: 'PAPI: ...' or 'perf_event_open: ...'."""
    lib, why = open_papi()
    if lib is None:
        return [], [(n, why) for n in names]
    perf_event = lib.PAPI_get_component_index(b"perf_event")
    counted, by_papi, not_counted = [], [], []
    for name in names:
        config = kernel_event(name)
        if config is not None:  # the kernel's: perfweave counts it, PAPI or not
            why = kernel_countable(config)
            if why is None:
                counted.append(name)
            else:
                not_counted.append((name, why))
            continue
        code = ctypes.c_int(0)
        rc = lib.PAPI_event_name_to_code(name.encode(), ctypes.byref(code))
        if rc != 0:
            not_counted.append((name, f"PAPI: {_papi_why(lib, rc)}"))
            continue
        es = ctypes.c_int(-1)
        rc = lib.PAPI_create_eventset(ctypes.byref(es))
        for n in by_papi + [name]:
            if rc == 0:
                rc = lib.PAPI_add_named_event(es, n.encode())
        if rc == 0:
            rc = lib.PAPI_start(es)
            if rc == 0:
                values = (ctypes.c_longlong * (len(by_papi) + 1))()
                lib.PAPI_stop(es, values)
        if es.value != -1:
            lib.PAPI_cleanup_eventset(es)
            lib.PAPI_destroy_eventset(ctypes.byref(es))
        if rc == 0:
            counted.append(name)
            by_papi.append(name)
            continue
        why = f"PAPI: {_papi_why(lib, rc)}"
        note = unknown_processor(lib) if lib.PAPI_get_event_component(code) == perf_event else None
        not_counted.append((name, why + (f"; {note}" if note else "")))
    return counted, not_counted
