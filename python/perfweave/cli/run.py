"""perfweave run: run a program (or its MPI launcher) with the runtime preloaded."""
import os
import signal
import sys

from perfweave import launch, options


def setup_parser(sub):
    p = sub.add_parser("run", help="run a program under perfweave",
                       description="Run COMMAND (a program, or mpirun/mpiexec/srun ... program) "
                                   "with perfweave's runtime in every process, and write an "
                                   "experiment directory. The program's output and exit status "
                                   "are its own.",
                       usage="perfweave run [options] -- COMMAND...")
    options.add_arguments(p)
    p.add_argument("command", nargs="+", metavar="COMMAND",
                   help="the program and its arguments, after --")
    p.set_defaults(func=main)


def main(args):
    exp, status = launch.run(args.command, options.values(args))
    print(f"perfweave: experiment written to {exp} (perfweave report {exp})", file=sys.stderr)
    if status < 0:
        # die of the same signal, as the program did
        sys.stdout.flush()
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status
