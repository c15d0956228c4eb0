"""perfweave pop: the POP efficiency metrics of a traced experiment, or from its profile
without a trace (docs/pop.md)."""

import json
import math
import sys
from pathlib import Path


def _float_above(low, inclusive):
    """An argparse type: a number above low (or equal, if inclusive)."""

    def parse(text):
        import argparse

        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not (v >= low if inclusive else v > low):
            raise argparse.ArgumentTypeError(
                f"expected a number {'>=' if inclusive else '>'} {low:g}, got {text!r}"
            )
        return v

    return parse


def _nonneg_int(text):
    import argparse

    try:
        v = int(text)
    except ValueError:
        v = -1
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return v


def setup_parser(sub):
    p = sub.add_parser(
        "pop",
        help="POP efficiency metrics of a traced experiment",
        description="The POP metrics of an experiment's event traces (perfweave run "
        "--trace) over its region of interest (MPI_Pcontrol(1) .. MPI_Pcontrol(0) when "
        "the program marks one, else MPI_Init .. MPI_Finalize): Parallel Efficiency = "
        "Load Balance x Communication Efficiency, Communication Efficiency = "
        "Serialisation x Transfer Efficiency, with the ideal runtime from the replay on "
        "an ideal network and from the critical path of useful computation, "
        "multiplicative and additive, and scaling against reference experiments REF "
        "(the first is the baseline). Without a trace: Load Balance and Communication "
        "Efficiency from the profile's regions, SerE and TE n/a.",
        usage="perfweave pop [--json] [--weak] [--eager-limit N] [--latency S] "
        "[--bandwidth B] [--ideal-trace DIR] EXP [REF ...]",
    )
    p.add_argument("experiment", metavar="EXP", help="experiment directory")
    p.add_argument("refs", metavar="REF", nargs="*", help="reference experiments for scaling")
    p.add_argument("--json", action="store_true", help="print the result as JSON (docs/pop.md)")
    p.add_argument(
        "--weak",
        action="store_true",
        help="weak scaling against REF (work grows with the ranks); default strong",
    )
    p.add_argument(
        "--eager-limit",
        type=_nonneg_int,
        default=None,
        metavar="N",
        help="replay: sends above N bytes are rendezvous (default: every send eager)",
    )
    p.add_argument(
        "--latency",
        type=_float_above(0, True),
        default=0.0,
        metavar="S",
        help="replay: latency (s)",
    )
    p.add_argument(
        "--bandwidth",
        type=_float_above(0, False),
        default=math.inf,
        metavar="B",
        help="replay: bandwidth (bytes/s, above 0; default infinite)",
    )
    p.add_argument(
        "--ideal-trace",
        metavar="DIR",
        default=None,
        help="also write the replay's ideal trace into DIR (perfweave export reads it)",
    )
    p.set_defaults(func=main)


def analyze_one(exp, args, with_replay=True):
    from perfweave.analysis import eventgraph, pop
    from perfweave.errors import PerfweaveError
    from perfweave.readers.experiment import read_meta

    exp = Path(exp)
    if not exp.is_dir():
        raise PerfweaveError(f"{exp}: no such experiment directory")
    read_meta(exp)
    if not (exp / "traces").exists():
        # LB and CommE from the profile's regions; the ideal runtimes need the trace
        profile = _profile(exp)
        if profile is None:
            raise PerfweaveError(f"{exp}: no trace and no readable profile")
        result = pop.from_profile(profile, exp)
        result.counters = pop.useful_counters(profile)
        return result
    graph = eventgraph.load_graph(exp)
    what_if = None
    if with_replay:
        what_if = dict(
            eager_limit=args.eager_limit, latency_s=args.latency, bandwidth_Bps=args.bandwidth
        )
    result = pop.analyze(graph, exp, what_if=what_if)
    result.counters = pop.useful_counters(_profile(exp))
    result.threads = _thread_factors(exp, graph, result)
    return result


def _thread_factors(exp, graph, result):
    """The sampled thread factors of result (analysis/pop_threads.py), or why none."""
    from perfweave.analysis import pop, pop_threads
    from perfweave.readers import trace as rt
    from perfweave.readers.samples import read_samples

    from perfweave.errors import FormatError

    try:
        procs = read_samples(exp)
    except (FormatError, OSError) as e:
        # the process level does not need them: say why the thread level is missing
        return f"n/a: samples unreadable ({e})"
    if not any(len(p.records) for p in procs):
        return pop_threads.NO_SAMPLES
    # the samples' times are each host's CLOCK_MONOTONIC: the trace's descriptions map them
    metas = {rd.rank: rt.read_meta(exp, rd.rank)[0] or {} for rd in graph.loaded.trace.ranks}
    per_rank = pop_threads.rank_threads(procs, metas, result.region)
    return pop_threads.thread_factors(
        per_rank, pop.process_useful(result), result.region.runtime_ns
    )


def _profile(exp):
    """The experiment's reduced profile, None if it has none readable (an imported
    trace's is computed, without counters)."""
    from perfweave.errors import PerfweaveError
    from perfweave.readers.profile import read_profile

    path = Path(exp) / "profile.pwprof"
    if not path.is_file():
        return None
    try:
        return read_profile(path)
    except (PerfweaveError, OSError):
        return None


def write_ideal_trace(result, out):
    """The replay's ideal trace into out, for perfweave export."""
    from perfweave.errors import PerfweaveError

    if result.replayed is None or result.replayed.deadlock:
        raise PerfweaveError(f"--ideal-trace: no ideal trace to write ({out})")
    try:
        from perfweave.interop.ideal import write_ideal
    except ImportError:
        raise PerfweaveError("--ideal-trace: this perfweave cannot write ideal traces") from None
    write_ideal(result.replayed, out)


def main(args):
    from perfweave.analysis import pop
    from perfweave.cli.analyze import keep_freed_memory
    from perfweave.report import pop as render

    keep_freed_memory()  # the replay's speed depends on it as the analysis' does

    result = analyze_one(args.experiment, args)
    if args.ideal_trace:
        write_ideal_trace(result, args.ideal_trace)
    refs = [analyze_one(r, args, with_replay=False) for r in args.refs]
    counters = {str(r.experiment): r.counters for r in [result, *refs] if r.counters}
    pop.add_references(result, refs, weak=args.weak, counters=counters)
    doc = result.to_json()
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(render.render(doc)) + "\n")
    return 0
