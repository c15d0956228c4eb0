"""`perfweave validate`: kernels of known memory traffic, page faults and CPU time run on
this machine, each measured by every source that can count it, and the counts set against
the kernels' models (Jagode et al., ../shared/papers/papi-pcp-memory-traffic-multicomponent.txt:
GEMM, capped GEMV, S1CF, S2CF, Eq. 5's repetitions), so that a user knows which counters
of this machine say what they claim before trusting a run's figures.

Sources: the kernel's software events as perfweave counts them (perf_event_open, the
runtime's way: perf::PAGE-FAULTS against the pages a kernel touches, perf::TASK-CLOCK
against the kernel's own clock_gettime CPU time); PAPI events through PAPI's event sets
(perf:: events where PAPI's perf_event component is active, memory traffic events the
user names); PCP metrics through the local pmcd (memory traffic metrics the user names).
A source that cannot count here is named with the reason."""

import ctypes
import os
import resource
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from perfweave.errors import PerfweaveError

KERNELS = ("gemm", "gemv", "s1cf", "s2cf", "touch")
_KIND = {k: i for i, k in enumerate(KERNELS)}  # validate_kernels.c's enum
# small enough for a laptop's few seconds with Eq. 5's hundreds of repetitions
SIZES = {
    "gemm": (32, 64, 128),
    "gemv": (256, 1024, 4096),
    "s1cf": (16, 32, 64),
    "s2cf": (16, 32, 64),
    "touch": (256, 1024, 4096),
}
# GEMV's matrix: square up to this width, then capped (the paper's Fig. 5 caps it where the
# matrix leaves the L3 cache; a fixed width keeps the model's N known)
GEMV_CAP = 1024
# the data sets a kernel cycles through: at least 4 x the last-level cache, at most this
DATA_BUDGET = 256 << 20


def repetitions(n):
    """Eq. 5 of the paper: about 500 repetitions for small sizes, falling linearly to 10."""
    return int(514 - 0.246 * n) if n < 2048 else 10


def traffic(kernel, n):
    """(bytes read, bytes written) from memory by one repetition, per the paper's models:
    doubles (8 bytes) for GEMM and GEMV, double complex (16) for S1CF and S2CF; a written
    line is read first where the paper saw it (GEMM's C, GEMV's y, S1CF's strided out)."""
    if kernel == "gemm":
        return 3 * n * n * 8, n * n * 8
    if kernel == "gemv":
        w = min(n, GEMV_CAP)
        return (n * w + n + w) * 8, n * 8
    if kernel == "s1cf":
        return 2 * n**3 * 16, n**3 * 16
    if kernel == "s2cf":  # no stride: the paper measures one read per write
        return n**3 * 16, n**3 * 16
    return None


def _footprint(kernel, n):
    if kernel == "gemm":
        return 3 * n * n * 8
    if kernel == "gemv":
        w = min(n, GEMV_CAP)
        return (w * w + w + n) * 8
    return 2 * n**3 * 16


def _last_level_cache():
    try:
        size = os.sysconf("SC_LEVEL3_CACHE_SIZE")
    except (ValueError, OSError):
        size = 0
    return size if size > 0 else 32 << 20


def compile_kernels(workdir, cflags=()):
    """The kernels' shared library built in workdir with $CC (cc): compiled when validate
    runs, so that the user chooses the flags that change a kernel's traffic."""
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc):
        raise PerfweaveError(f"validate: no C compiler '{cc}' found: install gcc or set CC")
    src = resources.files("perfweave").joinpath("validate_kernels.c")
    out = Path(workdir) / "libpw_validate.so"
    with resources.as_file(src) as path:
        cmd = [cc, "-O2", *cflags, "-fPIC", "-shared", "-o", str(out), str(path)]
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        first = (done.stderr.strip().splitlines() or ["?"])[0]
        raise PerfweaveError(f"validate: {' '.join(cmd)} failed: {first}")
    lib = ctypes.CDLL(str(out))
    lib.pw_kernel_new.restype = ctypes.c_void_p
    lib.pw_kernel_new.argtypes = [ctypes.c_int] + [ctypes.c_long] * 4
    lib.pw_kernel_run.restype = ctypes.c_longlong
    lib.pw_kernel_run.argtypes = [ctypes.c_void_p, ctypes.c_long]
    lib.pw_kernel_free.argtypes = [ctypes.c_void_p]
    return lib


class _Kernel:
    """One kernel and size with its data sets, ready to run reps repetitions."""

    def __init__(self, lib, kernel, n, reps):
        self.lib, self.kernel, self.n, self.reps = lib, kernel, n, reps
        m, p = (n, min(n, GEMV_CAP)) if kernel == "gemv" else (0, 0)
        width = p if kernel == "gemv" else n
        copies = 1
        if kernel != "touch":
            foot = _footprint(kernel, n)
            copies = max(1, min(reps, -(-4 * _last_level_cache() // foot), DATA_BUDGET // foot))
        self.handle = lib.pw_kernel_new(_KIND[kernel], width, m, p, copies)
        if not self.handle:
            raise PerfweaveError(f"validate: no memory for {kernel} of size {n}")

    def run(self):
        """The kernel's own CPU time of its reps repetitions, in ns."""
        ns = self.lib.pw_kernel_run(self.handle, self.reps)
        if ns < 0:
            raise PerfweaveError(f"validate: touch could not map {self.n} pages")
        return ns

    def free(self):
        self.lib.pw_kernel_free(self.handle)


def _minflt():
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def _perf_rows(kernel):
    """perf::PAGE-FAULTS and perf::TASK-CLOCK as perfweave counts them (perf_event_open),
    each against the kernel's own truth in the same window: the pages it touches (and the
    thread's getrusage minor faults, whose excess over them, plus the reads' own, is the
    tolerance), and its clock_gettime CPU time."""
    from perfweave.papi import kernel_event, open_kernel_event

    fds = {}
    for name in ("PAGE-FAULTS", "TASK-CLOCK"):
        fd, why = open_kernel_event(kernel_event(name))
        if fd is None:
            for f in fds.values():
                os.close(f)
            return [], [("perf", f"perf::{name}: {why}")]
        fds[name] = fd
    try:
        before = {n: int.from_bytes(os.read(f, 8), "little") for n, f in fds.items()}
        flt0 = _minflt()
        cpu_ns = kernel.run()
        flt1 = _minflt()
        after = {n: int.from_bytes(os.read(f, 8), "little") for n, f in fds.items()}
    finally:
        for f in fds.values():
            os.close(f)
    faults = after["PAGE-FAULTS"] - before["PAGE-FAULTS"]
    clock = after["TASK-CLOCK"] - before["TASK-CLOCK"]
    pages = kernel.n * kernel.reps if kernel.kernel == "touch" else 0
    # the reads, getrusage and the ctypes call inside the window fault a few pages at most
    fault_tol = abs((flt1 - flt0) - pages) + 16
    # both are the thread's sum_exec_runtime; the window adds the Python around the call
    clock_tol = 0.01 * cpu_ns + 2e6
    return [
        _row(
            "perf",
            "perf::PAGE-FAULTS",
            kernel,
            "faults",
            pages,
            faults,
            fault_tol,
            f"getrusage minflt {flt1 - flt0}",
            flt1 - flt0,
        ),
        _row(
            "perf",
            "perf::TASK-CLOCK",
            kernel,
            "ns",
            cpu_ns,
            clock,
            clock_tol,
            "kernel's clock_gettime(CLOCK_THREAD_CPUTIME_ID)",
        ),
    ], []


def _row(
    source, event, kernel, unit, expected, measured, tolerance=None, truth="", truth_count=None
):
    reps = kernel.reps
    row = {
        "source": source,
        "event": event,
        "kernel": kernel.kernel,
        "size": kernel.n,
        "repetitions": reps,
        "unit": unit,
        "expected_per_rep": expected / reps,
        "measured_per_rep": measured / reps,
        "ratio": measured / expected if expected else None,
        "truth": truth,
    }
    if truth_count is not None:  # what the truth counted over the reps, e.g. getrusage's faults
        row["truth_count"] = truth_count
    if tolerance == "at least":
        row["at_least"] = True
        row["ok"] = measured >= expected
    elif tolerance is not None:
        row["tolerance_per_rep"] = tolerance / reps
        row["ok"] = abs(measured - expected) <= tolerance
    return row


def _papi_count(lib, events, call):
    """The counts of PAPI events (names) over call(), or (None, why)."""
    es = ctypes.c_int(-1)
    rc = lib.PAPI_create_eventset(ctypes.byref(es))
    for name in events:
        if rc == 0:
            rc = lib.PAPI_add_named_event(es, name.encode())
    values = (ctypes.c_longlong * len(events))()
    if rc == 0:
        rc = lib.PAPI_start(es)
        if rc == 0:
            call()
            rc = lib.PAPI_stop(es, values)
    if es.value != -1:
        lib.PAPI_cleanup_eventset(es)
        lib.PAPI_destroy_eventset(ctypes.byref(es))
    if rc:
        msg = lib.PAPI_strerror(rc)
        return None, f"PAPI: {msg.decode() if msg else rc}"
    return list(values), None


def _pcp_values(metrics):
    """{metric: sum over its instances} from the local pmcd (pminfo -f)."""
    try:
        out = subprocess.run(["pminfo", "-f", *metrics], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    sums, current = {}, None
    for line in out.stdout.splitlines():
        if line and not line[0].isspace():
            current = line.strip()
            sums[current] = 0
        elif current and " value " in f" {line.strip()}":
            try:
                sums[current] += float(line.rsplit(" value ", 1)[-1].split()[0].strip('"'))
            except (ValueError, IndexError):
                pass
    return sums


def parse_traffic_events(specs, where):
    """[(name, 'read'|'write', bytes per count)] of (role, NAME or NAME:BYTES) pairs from
    --papi-read and the like: 64 bytes, a cache line, when BYTES is left out."""
    events = []
    for role, spec in specs:
        name, colon, scale = spec.rpartition(":")
        if not colon or not scale.isdigit():
            name, scale = spec, "64"
        if not name or int(scale) <= 0:
            raise PerfweaveError(f"validate: {where}: bad event '{spec}' (NAME or NAME:BYTES)")
        events.append((name, role, int(scale)))
    return events


def _traffic_rows(source, kernel, events, counts):
    model = traffic(kernel.kernel, kernel.n)
    rows = []
    for (name, role, scale), value in zip(events, counts):
        expected = model[0 if role == "read" else 1] * kernel.reps
        rows.append(
            _row(source, f"{name} ({role}, x{scale} B)", kernel, "B", expected, value * scale)
        )
    return rows


def _papi_setup(papi_events):
    """(PAPI's library or None, its software events to validate, [(source, why not)])."""
    from perfweave.papi import open_papi
    from perfweave.sources import probe_papi

    papi = probe_papi()
    if not papi["available"]:
        return None, [], [("papi", papi["why"])]
    lib, _ = open_papi()
    off = [i for i in papi["items"] if i.startswith(("perf_event:", "perf_event_uncore:"))]
    off = [i for i in off if ": disabled" in i]
    why, soft = [], ["perf::PAGE-FAULTS", "perf::TASK-CLOCK"]
    if any(i.startswith("perf_event:") for i in off):
        why.append(("papi", f"core and software events: {off[0]}"))
        soft = []
    if not papi_events:
        uncore = [i for i in off if i.startswith("perf_event_uncore:")]
        named = "no event named (--papi-read EVENT[:BYTES], --papi-write ...)"
        why.append(("papi", f"memory traffic: {uncore[0] if uncore else named}"))
    return lib, soft, why


def _pcp_setup(pcp_metrics):
    """(whether pmcd gives the node's page faults, the traffic metrics it can be asked,
    [(source, why not)])."""
    from perfweave.sources import probe_pcp

    pcp = probe_pcp()
    if not pcp["available"]:
        return False, (), [("pcp", pcp["why"])]
    why = []
    faults = PCP_FAULTS in _pcp_values([PCP_FAULTS])
    if not faults:
        missing = (
            f"pmcd has no {PCP_FAULTS} (linux PMDA)"
            if shutil.which("pminfo")
            else ("pminfo not found (install pcp)")
        )
        why.append(("pcp", f"page faults: {missing}"))
    if not pcp_metrics:
        hw = any(i.startswith("perfevent.hwcounters") for i in pcp["items"])
        why.append(
            (
                "pcp",
                "memory traffic: "
                + (
                    "no metric named (--pcp-read METRIC[:BYTES], --pcp-write ...)"
                    if hw
                    else "pmcd has no perfevent.hwcounters metrics (no perfevent PMDA, or no "
                    "hardware counters for it to program)"
                ),
            )
        )
    return faults, pcp_metrics, why


def validate(kernels, sizes=None, reps=None, cflags=(), papi_events=(), pcp_metrics=(), log=None):
    """{rows, not_validated: [{source, why}], repetitions, cache_bytes}: each kernel at each
    size measured by each source that counts here."""
    papi_lib, papi_soft, not_validated = _papi_setup(papi_events)
    pcp_faults, pcp_metrics, why = _pcp_setup(pcp_metrics)
    not_validated += why
    rows = []
    with tempfile.TemporaryDirectory(prefix="perfweave-validate-") as tmp:
        lib = compile_kernels(tmp, cflags)
        for name in kernels:
            for n in sizes or SIZES[name]:
                k = _Kernel(lib, name, n, reps or repetitions(n))
                try:
                    if log:
                        log(f"{name} size {n}: {k.reps} repetitions")
                    got, why = _perf_rows(k)
                    rows += got
                    not_validated += [w for w in why if w not in not_validated]
                    model = traffic(name, n)
                    if papi_lib is not None:
                        got, why = _papi_rows(papi_lib, k, papi_soft, papi_events)
                        rows += got
                        if why:
                            not_validated.append(("papi", why))
                            papi_lib = None
                    if pcp_faults and name == "touch":
                        rows.append(_pcp_fault_row(k))
                    if pcp_metrics and model:
                        names = [m[0] for m in pcp_metrics]
                        v0 = _pcp_values(names)
                        k.run()
                        v1 = _pcp_values(names)
                        if any(m not in v0 or m not in v1 for m in names):
                            not_validated.append(
                                ("pcp", f"pmcd gave no value of {', '.join(names)} (pminfo -f)")
                            )
                            pcp_metrics = ()
                        else:
                            counts = [v1[m] - v0[m] for m in names]
                            rows += _traffic_rows("pcp", k, pcp_metrics, counts)
                finally:
                    k.free()
    seen, unique = set(), []
    for src, why in not_validated:
        if (src, why) not in seen:
            seen.add((src, why))
            unique.append({"source": src, "why": why})
    return {
        "repetitions": "Eq. 5: floor(514 - 0.246 N) for N < 2048, else 10"
        if reps is None
        else f"{reps} (--repetitions)",
        "cache_bytes": _last_level_cache(),
        "rows": rows,
        "not_validated": unique,
    }


# the node's page faults (the linux PMDA's /proc/vmstat pgfault): pmcd read at each fetch
PCP_FAULTS = "mem.vmstat.pgfault"


def _pcp_fault_row(kernel):
    """The node's page faults through pmcd over touch's repetitions: at least the pages it
    touched; every other process of the node adds its own, so no upper bound holds."""
    v0 = _pcp_values([PCP_FAULTS])
    kernel.run()
    v1 = _pcp_values([PCP_FAULTS])
    pages = kernel.n * kernel.reps
    delta = v1.get(PCP_FAULTS, 0) - v0.get(PCP_FAULTS, 0)
    return _row("pcp", f"{PCP_FAULTS} (node)", kernel, "faults", pages, delta, "at least")


def _papi_rows(lib, kernel, soft, events):
    """([rows], why not) of PAPI: each software event in an event set of its own over touch
    (PAPI groups the events of a set, and the kernel counts a software group's members
    other than its leader wrongly: papi.py), checked as _perf_rows checks perfweave's;
    the traffic events, in one set, over the kernels with a traffic model."""
    rows = []
    window = {}

    def run():
        window["flt"] = _minflt()
        window["ns"] = kernel.run()
        window["flt"] = _minflt() - window["flt"]

    for name in soft if kernel.kernel == "touch" else ():
        counts, why = _papi_count(lib, [name], run)
        if counts is None:
            return rows, f"{name}: {why}"
        if name == "perf::PAGE-FAULTS":
            pages = kernel.n * kernel.reps
            tol = abs(window["flt"] - pages) + 16
            truth = f"getrusage minflt {window['flt']}"
            row = _row("papi", name, kernel, "faults", pages, counts[0], tol, truth, window["flt"])
            rows.append(row)
        else:
            ns = window["ns"]
            truth = "kernel's clock_gettime(CLOCK_THREAD_CPUTIME_ID)"
            rows.append(_row("papi", name, kernel, "ns", ns, counts[0], 0.01 * ns + 2e6, truth))
    if events and traffic(kernel.kernel, kernel.n):
        counts, why = _papi_count(lib, [e[0] for e in events], run)
        if counts is None:
            return rows, f"{', '.join(e[0] for e in events)}: {why}"
        rows += _traffic_rows("papi", kernel, events, counts)
    return rows, None
