"""perfweave run: run a program (or its MPI launcher) with the runtime preloaded."""

import os
import sys
import time

from perfweave import options, progress, writing
from perfweave.launch import run, signals, watch


def setup_parser(sub):
    p = sub.add_parser(
        "run",
        help="run a program under perfweave",
        description="Run COMMAND (a program, or mpirun/mpiexec/srun ... program) "
        "with perfweave's runtime in every process, and write an "
        "experiment directory. The program's output and exit status "
        "are its own.",
        usage="perfweave run [options] -- COMMAND...",
    )
    options.add_arguments(p)
    p.add_argument(
        "command", nargs="+", metavar="COMMAND", help="the program and its arguments, after --"
    )
    p.set_defaults(func=main)


def _check_counters(args):
    """--counters: PAPI absent -> one line, and the run goes on without counters; an
    event neither PAPI nor perfweave knows (perfweave counts the kernel's software events
    PAPI does not know itself) -> an error before anything runs; an event known but that
    cannot be counted here -> one line, the others counted, and [{event, why}] of those
    left out (for the experiment)."""
    names = [n.strip() for n in (args.counters or "").split(",") if n.strip()]
    if not names:
        return []
    from perfweave.errors import PerfweaveError
    from perfweave.papi import check_events, countable

    known, unknown, why = check_events(names)
    if why:
        print(f"perfweave: --counters: {why}; running without counters", file=sys.stderr)
        args.counters = ""
        return []
    if unknown:
        raise PerfweaveError(
            "--counters: "
            + "; ".join(f"{n} is not an event here ({w})" for n, w in unknown)
            + " (perfweave components lists PAPI's components; "
            "papi_native_avail their events)"
        )
    counted, left_out = countable(known)
    if left_out:
        print(
            "perfweave: --counters: not counted here: "
            + "; ".join(f"{n} ({w})" for n, w in left_out)
            + (f"; counting {','.join(counted)}" if counted else "; running without counters"),
            file=sys.stderr,
        )
    args.counters = ",".join(counted)
    return [{"event": n, "why": w} for n, w in left_out]


def _choose_all(args):
    """--all: the options it chooses set on args, and its record for experiment.json
    (cli/run_all.py); None without --all."""
    if not args.all:
        if args.budget:
            from perfweave.errors import PerfweaveError

            raise PerfweaveError("--budget applies to --all only")
        return None
    from perfweave.cli import run_all

    given = options.given(getattr(args, "argv", ["run"])[1:])
    values = options.values(args)
    record = run_all.choose(options.spec(), values, given, run_all.parse_budget(args.budget))
    for name, value in values.items():
        setattr(args, name, value)
    return record


def _counted_all(record, args, not_counted):
    """--all's record once --counters were checked: the part off when none counts."""
    for part in record["components"]:
        if part["option"] == "counters" and part["on"]:
            part["value"] = args.counters
            if not args.counters:
                part["on"] = False
                part["why"] = "; ".join(f"{n['event']}: {n['why']}" for n in not_counted) or (
                    "PAPI cannot count here"
                )
                record["expected_overhead_pct"] = round(
                    sum(p["cost_pct"] for p in record["components"] if p["on"]), 2
                )


def main(args):
    everything = _choose_all(args)
    not_counted = _check_counters(args)
    meta = {"counters_not_counted": not_counted} if not_counted else {}
    if everything is not None:
        from perfweave.cli import run_all

        _counted_all(everything, args, not_counted)
        meta["all"] = everything
        progress.say(run_all.line(everything))
    values = options.values(args)
    started = run.start(args.command, values, meta=meta or None)
    # perfweave-wait waits for the command and ends the run; back here only if it
    # could not be started
    watch.hand_over(started, values)
    status = watch.wait(started)
    unwritten, found = run.finish(started.exp, started.meta, status, time.time())
    return _end(started.exp, status, unwritten, found)


def finish(argv):
    """The end of a run that needs a verdict, for perfweave-wait (runtime/launch/wait.c),
    which execs `python -c ... EXP META_FD STATUS END [--quiet]`: experiment.json as
    written at the start is in META_FD; STATUS as subprocess gives it; END in seconds
    since the epoch; --quiet: perfweave --quiet run's. Ends the process as the command
    ended, whatever happens here."""
    import json

    progress.start(argv[4:5] == ["--quiet"])
    status = int(argv[2])
    try:
        exp = argv[0]
        with os.fdopen(int(argv[1]), "rb") as f:
            meta = json.loads(f.read())
        unwritten, found = run.finish(exp, meta, status, float(argv[3]))
        status = _end(exp, status, unwritten, found)
    except (Exception, KeyboardInterrupt) as e:  # the command's status passes whatever
        run.say(f"perfweave: error: {e}", sys.stderr)
        status = _end_as(status)
    sys.exit(status)


def _end(exp, status, unwritten, found):
    """The run's last line, and the exit status that passes the command's on."""
    # the modules that kept what the program's processes counted (launch/verdict.py)
    kept = found.kept if found and found.state == "empty" else []
    if kept:
        # no profile, but what a module keeps in file-backed memory is there to report
        run.say(
            f"perfweave: experiment {exp} is partial: {found.reason}; the "
            f"{' and '.join(kept)} module{'s' if len(kept) > 1 else ''} kept what it "
            f"counted (perfweave report {exp})",
            sys.stderr,
        )
    elif found and found.state == "empty":
        # never "written": there is nothing to report, and the reason is said once here
        run.say(f"perfweave: experiment {exp} has no data: {found.reason}", sys.stderr)
    elif unwritten:
        run.say(
            f"perfweave: experiment {exp} is incomplete: could not write "
            f"{writing.describe(unwritten)} (perfweave report {exp})",
            sys.stderr,
        )
    elif found:
        run.say(
            f"perfweave: experiment {exp} is partial: {found.reason} (perfweave report {exp})",
            sys.stderr,
        )
    else:
        progress.say(f"perfweave: experiment written to {exp} (perfweave report {exp})")
    return _end_as(status)


def _end_as(status):
    """The exit status of the command's (subprocess's) status: its code, or death by its
    signal, as the program died."""
    if status < 0:
        sys.stdout.flush()
        try:
            signals.signal(-status, signals.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL, SIGSTOP: no action to set, theirs is the default
        os.kill(os.getpid(), -status)
        return 128 - status
    return status
