"""The runs of `perfweave boundness` (cli/boundness.py; the figures: analysis/boundness.py,
docs/boundness.md): what this machine offers (its cores, its caches, cpufreq), the
memory-bandwidth stressor's command line (pw-stream, runtime/tools/pw-stream.c, installed
beside the runtime), the control's (pw-stream's probe: a reference triad over a working
set the stressor can take from the shared cache, and a register-only FMA chain, timed
before each run alone and beside the stressor) and the two variants, baseline and
stressor, which launch/overhead.py's Runner runs interleaved and repeated, keeping their
experiments."""

import os

from perfweave.errors import PerfweaveError
from perfweave.launch import library_dir
from perfweave.launch.overhead import Variant

STRESSOR = "pw-stream"
CPU = "/sys/devices/system/cpu"
LLC_TIMES = 4  # the stressor's arrays: at least this many times the last-level cache
# what the baseline and the stressed runs are run with (and the caller's options)
RUN_OPTIONS = ["--sample", "--node-interval", "0"]
FALLBACK_LLC = 32 << 20  # bytes, when sysfs says nothing of the caches
# the control's triads: arrays of the core's own cache (the level below the last: L2)
# each, then this factor larger each time, while the three fit the last-level cache
# (docs/boundness.md "What this machine lacks": a co-runner streaming from memory takes a
# working set W from a shared cache of C bytes when W and what the co-runner brings in
# while W is swept once outgrow C, from about 2/3 C to C: a window of 1.5, which steps of
# sqrt(2) cannot miss, whatever share C of the last-level cache the program has)
CONTROL_STEP = 2**0.5
MIB = 1 << 20


def _size(text):
    """sysfs's cache size ("307200K", "32M") in bytes."""
    text = text.strip()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KkMmGg")) * scale


def _caches(cpu_root):
    """[(level, bytes, the size file)] of cpu0's caches in sysfs (cache/index*/), largest
    last; [] where sysfs has none."""
    out = []
    base = os.path.join(cpu_root, "cpu0", "cache")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        names = []
    for name in names:
        d = os.path.join(base, name)
        try:
            with open(os.path.join(d, "level")) as f:
                level = int(f.read())
            with open(os.path.join(d, "size")) as f:
                size = _size(f.read())
        except (OSError, ValueError):
            continue
        out.append((level, size, os.path.join(d, "size")))
    return sorted(out)


def last_level_cache(cpu_root=CPU):
    """(bytes, where it was read) of the last-level cache of cpu0: the highest level of
    cache/index*/ (index3 on x86), or FALLBACK_LLC and None where sysfs has none."""
    caches = _caches(cpu_root)
    return (caches[-1][1], caches[-1][2]) if caches else (FALLBACK_LLC, None)


def own_cache(cpu_root=CPU):
    """Bytes of cpu0's largest cache below the last level (L2 on x86: the core's own),
    a sixteenth of the last-level cache where sysfs names no level below it."""
    caches = _caches(cpu_root)
    below = [size for level, size, _ in caches if level < caches[-1][0]] if caches else []
    return max(below) if below else last_level_cache(cpu_root)[0] // 16


def control_arrays(found):
    """Bytes of each of the three arrays of the control's triads, one size per triad: the
    core's own cache (at least 1 MiB), then CONTROL_STEP times larger each time while the
    three arrays fit the last-level cache, in whole MiB; one size at least. found:
    machine()'s. The test program of tests/runtime/test_boundness.py sizes its triad from
    these too."""
    first = max(1.0, found["own_cache_bytes"] / MIB)
    out = [round(first) * MIB]
    for k in range(1, 64):
        size = round(first * CONTROL_STEP**k) * MIB
        if 3 * size > found["llc_bytes"]:
            break
        if size > out[-1]:
            out.append(size)
    return out


def machine(cpu_root=CPU):
    """What the machine offers: cores (the ones this process may run on), llc_bytes and
    llc_source, cpufreq (the kernel's frequency scaling: present or not)."""
    llc, source = last_level_cache(cpu_root)
    return {
        "cores": sorted(os.sched_getaffinity(0)),
        "llc_bytes": llc,
        "llc_source": source,
        "own_cache_bytes": own_cache(cpu_root),
        "cpufreq": os.path.isdir(os.path.join(cpu_root, "cpu0", "cpufreq")),
    }


def not_available(found, program_threads):
    """What this version could not vary on this machine, one line each (the output's
    "not available")."""
    out = []
    if found["cpufreq"]:
        out.append(
            "a lower frequency cap: cpufreq is present, but this version does not set "
            "scaling_max_freq (it needs root): the clock's share is not measured"
        )
    else:
        out.append(f"a lower frequency cap: no cpufreq on this machine ({CPU}/cpu0/cpufreq)")
    cores = len(found["cores"])
    if cores < 2 * max(program_threads, 1):
        out.append(
            f"half-packed placement: {cores} cores for the program's {program_threads} "
            "threads (it needs twice the cores)"
        )
    else:
        out.append(
            "half-packed placement: not run by this version (it needs the launcher's "
            "binding options); the stressor is the only co-runner"
        )
    if found["llc_source"] is None:
        out.append(
            f"the last-level cache's size: not in sysfs; the stressor's arrays assume "
            f"{FALLBACK_LLC >> 20} MiB"
        )
    return out


def check_cores(found, cores):
    """PerfweaveError when the stressor is asked for more cores than this process has."""
    if cores is not None and cores > len(found["cores"]):
        raise PerfweaveError(
            f"--stressor-cores {cores}: this machine has {len(found['cores'])} cores"
        )


def stressor(found, program_threads, cores=None, size=None):
    """The stressor's setup: threads, cores (the last ones of the machine's: those the
    program leaves free when it leaves any), shares_cores (the program's threads and the
    stressor's outnumber the cores), bytes (its three arrays: size, default LLC_TIMES x
    the last-level cache), command (with the control's probe beside it), control (the
    control's kernel, bytes, core, and command alone). cores: how many to use (default:
    the cores the program does not use, at least one)."""
    have = found["cores"]
    if cores is None:
        cores = max(1, len(have) - max(program_threads, 1))
    check_cores(found, cores)
    use = have[len(have) - cores :]
    exe = str(library_dir() / STRESSOR)
    if not os.access(exe, os.X_OK):
        raise PerfweaveError(f"perfweave's stressor is missing ({exe}); reinstall perfweave")
    size = size or LLC_TIMES * found["llc_bytes"]
    control = _control(exe, found, [c for c in have if c not in use])
    command = [
        exe,
        "--threads",
        str(cores),
        "--cores",
        ",".join(map(str, use)),
        "--bytes",
        str(size),
        *control["probe"],
    ]
    return {
        "program": STRESSOR,
        "kernel": "STREAM triad a = b + s * c, streaming stores where AVX is available",
        "threads": cores,
        "cores": use,
        "shares_cores": program_threads + cores > len(have),
        "bytes": size,
        "llc_times": size / found["llc_bytes"],
        "command": command,
        "control": {k: v for k, v in control.items() if k != "probe"},
    }


def _control(exe, found, free):
    """The control's setup: kernel, bytes (each triad's three arrays, smallest first),
    core (the first the stressor leaves, where the program runs; None where it leaves
    none: not pinned), command (the probe alone, before a baseline run), probe (the
    options that add it to the stressor's command)."""
    sizes = [3 * b for b in control_arrays(found)]
    probe = ["--probe", ",".join(map(str, sizes))]
    probe += ["--probe-core", str(free[0])] if free else []
    return {
        "kernel": "triads a = b + 3 c (plain stores) over working sets from the core's own "
        "cache up to the last-level cache, sqrt(2) apart, and a chain of dependent "
        "multiply-adds in a register, timed by their thread's CPU clock",
        "bytes": sizes,
        "core": free[0] if free else None,
        "command": [exe, "--threads", "0", *probe],
        "probe": probe,
    }


def baseline(run_options=()):
    """The baseline: perfweave run with sampling on (and run_options)."""
    return Variant("baseline", "mode", RUN_OPTIONS + list(run_options))


def variants(stress, run_options=()):
    """baseline and stressor, the second the same beside the stressor; the control's
    probe runs before each, alone (the baseline's co-runner, which then only waits) and
    beside the stressor (which runs it before it says ready)."""
    first = baseline(run_options)
    alone = Variant("baseline", "mode", list(first.words), corunner=stress["control"]["command"])
    return [alone, Variant("stressor", "mode", list(first.words), corunner=stress["command"])]
