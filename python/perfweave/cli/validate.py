"""perfweave validate: this machine's counters against kernels of known counts."""

import json
import sys

from perfweave.cli.args import positive
from perfweave.errors import PerfweaveError


def setup_parser(sub):
    from perfweave.validation import KERNELS, SIZES

    p = sub.add_parser(
        "validate",
        help="check this machine's counters against kernels of known counts",
        description="Compile and run kernels whose memory traffic, page faults and CPU time "
        "are known (GEMM, capped GEMV, S1CF and S2CF re-sorts, touching fresh pages), the "
        "number of repetitions of each size by Eq. 5 of Jagode et al., measure each with "
        "every source that counts here (perf_event_open software events, PAPI, PCP), and "
        "print measured against expected per repetition; then the sources that could not "
        "be validated here and why (docs/validate.md).",
        usage="perfweave validate [--kernels LIST] [--sizes LIST] [--repetitions N] "
        "[--cflags FLAGS] [--papi-read EV[:BYTES]] [--papi-write EV[:BYTES]] "
        "[--pcp-read M[:BYTES]] [--pcp-write M[:BYTES]] [--plot FILE] [--json]",
    )
    p.add_argument(
        "--kernels",
        default=",".join(KERNELS),
        metavar="LIST",
        help=f"comma-separated, of: {', '.join(KERNELS)} (default: all)",
    )
    p.add_argument(
        "--sizes",
        metavar="LIST",
        help="sizes N for every kernel chosen (GEMM: N x N; GEMV: N rows; S1CF, S2CF: N^3 "
        "elements, S2CF's N a multiple of 4; touch: N pages), default per kernel: "
        + "; ".join(f"{k} {','.join(map(str, v))}" for k, v in SIZES.items()),
    )
    p.add_argument(
        "--repetitions", type=positive, metavar="N", help="N repetitions of each size, not Eq. 5's"
    )
    p.add_argument(
        "--cflags",
        default="",
        metavar="FLAGS",
        help="added to cc -O2 (e.g. '-fprefetch-loop-arrays')",
    )
    for src in ("papi", "pcp"):
        what = "PAPI event" if src == "papi" else "PCP metric"
        for role in ("read", "write"):
            p.add_argument(
                f"--{src}-{role}",
                action="append",
                default=[],
                metavar="NAME[:BYTES]",
                help=f"a {what} counting memory {role}s, BYTES a count (default 64) (repeatable)",
            )
    p.add_argument("--plot", metavar="FILE", help="plot measured against expected (matplotlib)")
    p.add_argument("--json", action="store_true", help="print the JSON document")
    p.set_defaults(func=main)


def _sizes(text, kernels):
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise PerfweaveError(f"validate: --sizes: expected positive integers, got {text!r}")
    if "s2cf" in kernels and any(s % 4 for s in sizes):
        raise PerfweaveError("validate: --sizes: S2CF's sizes must be multiples of 4")
    return sizes


def main(args):
    from perfweave.validation import KERNELS, parse_traffic_events, validate

    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    bad = [k for k in kernels if k not in KERNELS]
    if bad or not kernels:
        raise PerfweaveError(
            f"validate: --kernels: unknown {', '.join(bad) or 'empty list'} "
            f"(of: {', '.join(KERNELS)})"
        )
    sizes = _sizes(args.sizes, kernels) if args.sizes else None
    papi = parse_traffic_events(
        [("read", e) for e in args.papi_read] + [("write", e) for e in args.papi_write], "--papi"
    )
    pcp = parse_traffic_events(
        [("read", e) for e in args.pcp_read] + [("write", e) for e in args.pcp_write], "--pcp"
    )
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise PerfweaveError(
                f"validate: --plot {args.plot}: matplotlib is not installed (pip install "
                "matplotlib)"
            ) from None
    log = None if args.json else (lambda m: print(f"perfweave: validate: {m}", file=sys.stderr))
    doc = validate(kernels, sizes, args.repetitions, args.cflags.split(), papi, pcp, log=log)
    if args.plot:
        _plot(doc, args.plot)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        print(text(doc))
    failed = [r for r in doc["rows"] if r.get("ok") is False]
    if failed:
        print(
            f"perfweave: validate: {len(failed)} check(s) outside their tolerance", file=sys.stderr
        )
        return 1
    return 0


def _num(v, unit):
    if unit == "ns":
        return f"{v / 1e6:.3f} ms"
    if unit == "B":
        return f"{v / 1e6:.3f} MB"
    return f"{v:.2f} {unit}"


def text(doc):
    lines = [
        f"Repetitions: {doc['repetitions']}; last-level cache {doc['cache_bytes'] >> 10} KiB",
        "measured against expected, per repetition:",
    ]
    head = ("source", "event", "kernel", "size", "reps", "expected", "measured", "ratio", "check")
    table = [head]
    for r in doc["rows"]:
        check = ""
        if r.get("at_least"):
            check = f"{'ok' if r['ok'] else 'FAILED'} (at least the expected: node-wide)"
        elif "ok" in r:
            tol = _num(r["tolerance_per_rep"], r["unit"])
            check = f"{'ok' if r['ok'] else 'FAILED'} (±{tol}; {r['truth'] or 'model'})"
        table.append(
            (
                r["source"],
                r["event"],
                r["kernel"],
                str(r["size"]),
                str(r["repetitions"]),
                _num(r["expected_per_rep"], r["unit"]),
                _num(r["measured_per_rep"], r["unit"]),
                "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
                check,
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        cells = [
            c.ljust(w) if i < 3 or i == 8 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths))
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    if doc["not_validated"]:
        lines.append("not validated on this machine:")
        lines += [f"  {n['source']}: {n['why']}" for n in doc["not_validated"]]
    return "\n".join(lines)


def _plot(doc, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {}
    for r in doc["rows"]:
        series.setdefault((r["source"], r["event"], r["kernel"]), []).append(r)
    fig, ax = plt.subplots(figsize=(8, 5))
    for (src, event, kernel), rows in series.items():
        if all(r["ratio"] is None for r in rows):  # nothing expected (a kernel's 0 faults)
            continue
        sizes = [r["size"] for r in rows]
        ratio = [r["ratio"] if r["ratio"] is not None else float("nan") for r in rows]
        ax.plot(sizes, ratio, marker="o", label=f"{src} {event} {kernel}")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("size N")
    ax.set_ylabel("measured / expected (per repetition)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as e:
        raise PerfweaveError(f"validate: --plot {path}: {e}") from None
    finally:
        plt.close(fig)
