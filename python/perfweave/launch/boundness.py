"""The runs of `perfweave boundness` (cli/boundness.py; the figures: analysis/boundness.py,
docs/boundness.md): what this machine offers (its cores, its last-level cache, cpufreq),
the memory-bandwidth stressor's command line (pw-stream, runtime/tools/pw-stream.c,
installed beside the runtime) and the two variants, baseline and stressor, which
launch/overhead.py's Runner runs interleaved and repeated, keeping their experiments."""

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


def _size(text):
    """sysfs's cache size ("307200K", "32M") in bytes."""
    text = text.strip()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KkMmGg")) * scale


def last_level_cache(cpu_root=CPU):
    """(bytes, where it was read) of the last-level cache of cpu0: the highest level of
    cache/index*/ (index3 on x86), or FALLBACK_LLC and None where sysfs has none."""
    best = (0, 0, None)
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
        if (level, size) > best[:2]:
            best = (level, size, os.path.join(d, "size"))
    return (best[1], best[2]) if best[2] else (FALLBACK_LLC, None)


def machine(cpu_root=CPU):
    """What the machine offers: cores (the ones this process may run on), llc_bytes and
    llc_source, cpufreq (the kernel's frequency scaling: present or not)."""
    llc, source = last_level_cache(cpu_root)
    return {
        "cores": sorted(os.sched_getaffinity(0)),
        "llc_bytes": llc,
        "llc_source": source,
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


def stressor(found, program_threads, cores=None):
    """The stressor's setup: threads, cores (the last ones of the machine's: those the
    program leaves free when it leaves any), shares_cores (the program's threads and the
    stressor's outnumber the cores), bytes (its three arrays: LLC_TIMES x the last-level
    cache), command. cores: how many to use (default: the cores the program does not
    use, at least one)."""
    have = found["cores"]
    if cores is None:
        cores = max(1, len(have) - max(program_threads, 1))
    check_cores(found, cores)
    use = have[len(have) - cores :]
    exe = str(library_dir() / STRESSOR)
    if not os.access(exe, os.X_OK):
        raise PerfweaveError(f"perfweave's stressor is missing ({exe}); reinstall perfweave")
    size = LLC_TIMES * found["llc_bytes"]
    command = [
        exe,
        "--threads",
        str(cores),
        "--cores",
        ",".join(map(str, use)),
        "--bytes",
        str(size),
    ]
    return {
        "program": STRESSOR,
        "kernel": "STREAM triad a = b + s * c, streaming stores where AVX is available",
        "threads": cores,
        "cores": use,
        "shares_cores": program_threads + cores > len(have),
        "bytes": size,
        "llc_times": LLC_TIMES,
        "command": command,
    }


def baseline(run_options=()):
    """The baseline: perfweave run with sampling on (and run_options)."""
    return Variant("baseline", "mode", RUN_OPTIONS + list(run_options))


def variants(stress, run_options=()):
    """baseline and stressor, the second the same beside the stressor."""
    first = baseline(run_options)
    return [first, Variant("stressor", "mode", list(first.words), corunner=stress["command"])]
