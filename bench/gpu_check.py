#!/usr/bin/env python3
"""The device check's comparisons (bench/gpu_check.sh runs them; docs/gpu.md "The device
check"): what perfweave recorded of bench/programs/gpu_check.cu against what the program
itself printed in the same run. Exits 1 on any mismatch, each check printed PASS / FAIL.

  gpu_check.py check EXP PROGRAM_OUTPUT RANKS
      CUPTI (the gpu module's tables): spin_kernel launches exact per rank, their time
      against the program's CUDA events (each CUPTI kernel inside its event pair: total
      within [0.90, 1.02] of the events' plus 10 us per kernel, min and max likewise);
      empty_kernel and fill_kernel launches exact; copies by direction and host memory kind
      (pageable, pinned): count and bytes exact. The math-library profile: the cufftPlan3d
      plan's dims, executes and flops (5 N log2 N per transform) exact. NVML (the node
      timeline): each GPU's power readings present and positive, its energy counter
      non-decreasing.
  gpu_check.py overhead --bare OUT... --measured OUT...
      Per launch and per copy: the medians of the program's own launch_ns and copy_ns,
      bare and under perfweave run (rounds interleaved by the script), their difference
      (ns added) and ratio. Prints figures; fails only when a figure is missing.
"""

import argparse
import math
import statistics
import sys

import numpy as np

FAILED = []


def check(what, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}  {what}{'  (' + detail + ')' if detail else ''}")
    if not ok:
        FAILED.append(what)


def program_figures(text):
    """{rank: {key: value}} of the program's "rank R key value ..." lines."""
    out = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) < 3 or words[0] != "rank":
            continue
        d = out.setdefault(int(words[1]), {})
        for k, v in zip(words[2::2], words[3::2]):
            d[k] = float(v)
    return out


def by_rank(df, ranks):
    """The table's rows per rank, in rank order; a single process's whatever its rank."""
    if df is None or not len(df):
        return [df.iloc[0:0] if df is not None else None] * ranks
    keys = sorted(df["rank"].unique())
    return [df[df["rank"] == k] for k in keys] + [df.iloc[0:0]] * (ranks - len(keys))


def check_gpu(exp, prog, ranks):
    try:
        kernels = exp.table("gpu", "kernels")
        copies = exp.table("gpu", "copies")
    except Exception as e:  # the gpu module recorded nothing: every check fails, said why
        check("the gpu module's tables (CUPTI)", False, str(e))
        return
    for r, (k, c) in enumerate(zip(by_rank(kernels, ranks), by_rank(copies, ranks))):
        p = prog[r]
        n = int(p["kernels"])
        spin = k[k["name"].str.startswith("spin_kernel")]
        check(
            f"rank {r}: spin_kernel launches",
            int(spin["launches"].sum()) == n,
            f"{int(spin['launches'].sum())} recorded, {n} launched",
        )
        if len(spin):
            got, ev = spin["time_s"].sum() * 1e9, p["event_ns_total"]
            slack = 10e3 * n
            check(
                f"rank {r}: kernel time against CUDA events",
                0.90 * ev <= got <= 1.02 * ev + slack,
                f"CUPTI {got / 1e6:.3f} ms, events {ev / 1e6:.3f} ms",
            )
            lo, hi = spin["min_s"].min() * 1e9, spin["max_s"].max() * 1e9
            check(
                f"rank {r}: shortest and longest kernel",
                lo >= 0.90 * p["event_ns_min"] and hi <= 1.02 * p["event_ns_max"] + 10e3,
                f"CUPTI {lo:.0f}..{hi:.0f} ns, events {p['event_ns_min']:.0f}.."
                f"{p['event_ns_max']:.0f} ns",
            )
        for name, want in (("empty_kernel", p["launches"]), ("fill_kernel", 1)):
            got = int(k[k["name"].str.startswith(name)]["launches"].sum())
            check(f"rank {r}: {name} launches", got == int(want), f"{got} of {int(want)}")
        nbytes, ncopies, small = int(p["bytes"]), int(p["copies"]), int(p["launches"])
        expect = {
            ("HtoD", "pageable"): (ncopies, ncopies * nbytes),
            ("DtoH", "pageable"): (ncopies, ncopies * nbytes),
            ("HtoD", "pinned"): (ncopies + small, ncopies * nbytes + 4 * small),
            ("DtoH", "pinned"): (ncopies, ncopies * nbytes),
        }
        for (direction, kind), (count, b) in expect.items():
            host = c["src_kind"] if direction == "HtoD" else c["dst_kind"]
            rows = c[(c["direction"] == direction) & (host == kind)]
            got = (int(rows["count"].sum()), int(rows["bytes"].sum()))
            check(
                f"rank {r}: {direction} {kind} copies and bytes",
                got == (count, b),
                f"{got} recorded, {(count, b)} made",
            )


def check_mathlib(exp, prog, ranks):
    ml = exp.mathlib
    plans = ml.plans if ml else None
    for r in range(ranks):
        p = prog[r]
        n, execs = int(p["fft"]), int(p["execs"])
        mine = plans[plans["routine"] == "cufftPlan3d"] if plans is not None else []
        procs = sorted(set(mine["process"])) if len(mine) else []
        row = mine[mine["process"] == procs[r]] if r < len(procs) else []
        ok = len(row) == 1
        check(f"rank {r}: one cufftPlan3d plan", ok, f"{len(row)} found")
        if ok:
            size = n**3
            flops = execs * 5.0 * size * math.log2(size)
            got = (tuple(int(row[d][0]) for d in ("n0", "n1", "n2")), int(row["executes"][0]))
            check(f"rank {r}: the plan's dims and executes", got == ((n, n, n), execs), str(got))
            check(
                f"rank {r}: the executes' flops",
                float(row["flops"][0]) == flops,
                f"{float(row['flops'][0]):.0f} of {flops:.0f}",
            )


def check_nvml(exp):
    tls = exp.timelines or []
    check("a node timeline", len(tls) >= 1)
    for tl in tls:
        check(f"{tl.host}: NVML present", "nvml" not in tl.absent, tl.absent.get("nvml", ""))
        power = [
            i
            for i, s in enumerate(tl.series)
            if s["source"] == "nvml" and s["name"].endswith(".power_w")
        ]
        check(f"{tl.host}: GPU power series", len(power) >= 1, f"{len(power)} GPUs")
        for i in power:
            v = tl.values[:, i]
            v = v[~np.isnan(v)]
            name = tl.series[i]["name"]
            check(
                f"{tl.host}: {name} readings",
                len(v) >= 2 and (v > 0).all(),
                f"{len(v)} readings, {v.min() if len(v) else 0:.1f}.."
                f"{v.max() if len(v) else 0:.1f} W",
            )
            j = name.replace("power_w", "energy_j")
            try:
                e = tl.values[:, tl.index("nvml", j)]
                e = e[~np.isnan(e)]
                check(f"{tl.host}: {j} non-decreasing", len(e) >= 2 and (e[1:] >= e[:-1]).all())
            except KeyError:
                print(f"note  {tl.host}: no {j} (the driver has no energy counter)")
        if "nvml:power_instant" in tl.absent:
            print(f"note  {tl.host}: {tl.absent['nvml:power_instant']}")


def overhead(bare, measured):
    def medians(paths):
        figs = {"launch_ns": [], "copy_ns": []}
        for path in paths:
            for d in program_figures(open(path).read()).values():
                for k in figs:
                    if k in d:
                        figs[k].append(d[k])
        return {k: statistics.median(v) if v else None for k, v in figs.items()}

    b, m = medians(bare), medians(measured)
    for k, what in (("launch_ns", "per kernel launch"), ("copy_ns", "per 4-byte pinned copy")):
        ok = b[k] is not None and m[k] is not None
        check(f"overhead {what}: figures", ok)
        if ok:
            print(
                f"overhead {what}: bare {b[k]:.0f} ns, perfweave {m[k]:.0f} ns, "
                f"added {m[k] - b[k]:+.0f} ns, ratio {m[k] / b[k]:.3f}"
            )


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    c = sub.add_parser("check")
    c.add_argument("exp")
    c.add_argument("output")
    c.add_argument("ranks", type=int)
    o = sub.add_parser("overhead")
    o.add_argument("--bare", nargs="+", required=True)
    o.add_argument("--measured", nargs="+", required=True)
    a = ap.parse_args(argv)
    if a.verb == "check":
        import perfweave

        prog = program_figures(open(a.output).read())
        check(
            "the program's figures, every rank",
            sorted(prog) == list(range(a.ranks)),
            f"ranks {sorted(prog)}",
        )
        if not FAILED:
            exp = perfweave.open(a.exp)
            check_gpu(exp, prog, a.ranks)
            check_mathlib(exp, prog, a.ranks)
            check_nvml(exp)
    else:
        overhead(a.bare, a.measured)
    if FAILED:
        print(f"{len(FAILED)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
