#!/usr/bin/env python3
"""Measurement: which working sets the boundness stressor slows on this machine (figures,
not a test; docs/boundness.md "What this machine lacks").

For each triad working set (three arrays, MiB in all) it runs pw-stream's probe (the
control of `perfweave boundness`: a plain triad repeated for 256 MiB moved and a
register-only multiply-add chain, timed by their thread's CPU clock) on the first core, alone
(`pw-stream --threads 0`) and beside the stressor on the other cores (`pw-stream`
streaming 4 x the last-level cache, as `perfweave boundness` runs it), interleaved,
--repeat times, and prints per working set the probe's time per pass alone (and the
bandwidth it means) and the ratio of the mean CPU time beside to alone, with each
repeat's ratio. The load average is printed before and after: a busy machine reads
smaller ratios (docs/boundness.md "A busy machine hides it").

    .venv/bin/python bench/boundness_bite.py [--sizes 2,6,12,...] [--repeat 5]
        [--stressor-bytes BYTES]
"""

import argparse
import os
import subprocess

from perfweave.launch import boundness as launch
from perfweave.launch import library_dir

SIZES = "2,6,12,18,24,30,48,96,192,384,768,1024"


def probe(cmd):
    """The probe's (triad seconds per pass, FMA chain seconds) of one pw-stream run."""
    res = subprocess.run(cmd + ["--seconds", "0.001"], capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed: {res.stderr.strip()}")
    words = res.stdout.splitlines()[-1].split()  # "done ... control_triad_s T ..."
    pairs = dict(zip(words[1::2], words[2::2]))
    return float(pairs["control_triad_s"]), float(pairs["control_fma_s"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=SIZES, help="working sets, MiB in all, comma-separated")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--stressor-bytes", type=int, default=None)
    args = p.parse_args()
    found = launch.machine()
    cores = found["cores"]
    if len(cores) < 2:
        raise SystemExit("needs two cores: the probe's and the stressor's")
    exe = str(library_dir() / launch.STRESSOR)
    size = args.stressor_bytes or launch.LLC_TIMES * found["llc_bytes"]
    rest = ",".join(map(str, cores[1:]))
    stress = [exe, "--threads", str(len(cores) - 1), "--cores", rest, "--bytes", str(size)]
    print(
        f"last-level cache {found['llc_bytes'] >> 20} MiB, own cache "
        f"{found['own_cache_bytes'] >> 10} KiB, control's working sets "
        f"{[3 * b >> 20 for b in launch.control_arrays(found)]} MiB; stressor {size >> 20} MiB on "
        f"core {rest}; load {os.getloadavg()[0]:.1f}"
    )
    for mib in (int(x) for x in args.sizes.split(",")):
        with_probe = ["--probe", str(mib << 20), "--probe-core", str(cores[0])]
        alone, beside = [], []
        for _ in range(args.repeat):
            alone.append(probe([exe, "--threads", "0", *with_probe]))
            beside.append(probe(stress + with_probe))
        a = sum(t for t, _ in alone) / len(alone)
        b = sum(t for t, _ in beside) / len(beside)
        fma = sum(f for _, f in beside) / sum(f for _, f in alone)
        each = " ".join(f"{s[0] / x[0]:.2f}" for x, s in zip(alone, beside))
        print(
            f"{mib:5d} MiB: alone {1e3 * a:8.3f} ms/pass ({(mib << 20) / a / 1e9:5.1f} GB/s), "
            f"beside {b / a:.2f} x (each: {each}); FMA chain {fma:.2f} x"
        )
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
