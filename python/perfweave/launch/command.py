"""The command line `perfweave run` runs: its launcher and program (a launcher's
options skipped), the ranks it starts, the programs of an MPMD launch and whether one is
statically linked (it cannot load the runtime), and the command line that runs it with
the runtime and perfweave's variables in every task (task_env.py)."""

import os

from perfweave import options, task_env
from perfweave.errors import PerfweaveError

# Launchers whose first argument is not the program (the names task_env.py knows how
# to pass perfweave's variables through).
LAUNCHERS = task_env.LAUNCHERS
# Options that give the number of nodes and of tasks per node (their product: the ranks).
_NODES_OPTS = {"-N", "--nodes"}
_PER_NODE_OPTS = {"--ntasks-per-node", "-npernode", "--npernode", "-ppn"}


def _which(word):
    if "/" in word:
        ok = os.path.isfile(word) and os.access(word, os.X_OK)
        return os.path.realpath(word) if ok else None
    return task_env.which(word)


def program_index(command):
    """Index of the program in a command line: 0 when command[0] is not a launcher, the
    first executable word after the launcher's options (for sbatch: the first file, the
    batch script), None when there is none."""
    base = os.path.basename(command[0])
    if base not in LAUNCHERS:
        return 0
    for i, word in task_env.operands(command):
        path = _which(word)
        if path and not os.path.isdir(path) or base == "sbatch" and os.path.isfile(word):
            return i
    return None


# the default of an argument that run() finds once and passes on: found from the command
# line itself when left out
FROM_COMMAND = object()


def find_program(command, at):
    """(launcher or None, program path or None) of a command line; at: its
    program_index."""
    first = _which(command[0])
    if at == 0:
        return None, first
    return first, _which(command[at]) if at else None


def _option_number(command, options):
    """The number given to one of `options` (`-n 4`, `-n4`, `--ntasks=4`), or None."""
    for i, word in enumerate(command):
        if word in options and i + 1 < len(command) and command[i + 1].isdigit():
            return int(command[i + 1])
        name, joined, number = word.partition("=")
        if not joined and word[:2] in ("-n", "-N"):
            name, number = word[:2], word[2:]
        if name in options and number.isascii() and number.isdigit():
            return int(number)
    return None


def rank_count(command, environ=None, at=FROM_COMMAND):
    """Ranks a launch command starts: from its options (-n, -np, --ntasks, or nodes
    times tasks per node), else, for a launcher inside a Slurm allocation, the
    allocation's SLURM_NTASKS; None when not known. at: the command's program_index."""
    if os.path.basename(command[0]) not in LAUNCHERS:
        return None
    if at is FROM_COMMAND:
        at = program_index(command)
    options = command[:at] if at else command
    n = _option_number(options, task_env.RANK_OPTIONS)
    if n is None:
        nodes, per_node = (
            _option_number(options, _NODES_OPTS),
            _option_number(options, _PER_NODE_OPTS),
        )
        n = nodes * per_node if nodes and per_node else None
    environ = os.environ if environ is None else environ
    if n is None and environ.get("SLURM_NTASKS", "").isdigit():
        n = int(environ["SLURM_NTASKS"])
    return n or None


def launch_command(command, at, lib, values, exp, environ=None):
    """(argv, environment) that run `command` (its program at index `at`:
    program_index) with the runtime library `lib` preloaded and perfweave's variables in
    every task, whatever the launcher's environment policy (task_env.py)."""
    environ = dict(os.environ if environ is None else environ)
    runtime_env = options.runtime_env(values)
    runtime_env["PERFWEAVE_EXPERIMENT"] = str(exp)
    runtime_env["LD_PRELOAD"] = str(lib) + (
        ":" + environ["LD_PRELOAD"] if environ.get("LD_PRELOAD") else ""
    )
    if values.get("gpu", True) and not environ.get("CUDA_INJECTION64_PATH"):
        # CUDA's driver loads it at cuInit and calls its InitializeInjection: the gpu
        # module then sees a CUDA that the program opened after its start (docs/gpu.md)
        runtime_env["CUDA_INJECTION64_PATH"] = str(lib)
    helper = os.path.join(os.path.dirname(lib), task_env.EXEC_HELPER)
    return task_env.for_tasks(command, at, runtime_env, environ, helper)


def _static_program(path):
    """True when path is an ELF executable without a program interpreter: statically
    linked, so the dynamic loader, and LD_PRELOAD with it, never runs in it."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2):
                return False
            order = "little" if head[5] == 1 else "big"
            wide = head[4] == 2  # ELFCLASS64
            phoff = int.from_bytes(head[32:40] if wide else head[28:32], order)
            entsize = int.from_bytes(head[54:56] if wide else head[42:44], order)
            count = int.from_bytes(head[56:58] if wide else head[44:46], order)
            f.seek(phoff)
            table = f.read(entsize * count)
    except OSError:
        return False
    types = {
        int.from_bytes(table[i : i + 4], order) for i in range(0, len(table) - 3, entsize or 1)
    }
    return count > 0 and 3 not in types  # 3: PT_INTERP


def mpmd_programs(command, at=FROM_COMMAND):
    """The programs of every part of a launch command: the program after the
    launcher's options, then that of each part after a ':' (mpirun, mpiexec: several
    programs in one job), or each line of srun's --multi-prog file; paths as found,
    absent where a part names none."""
    if os.path.basename(command[0]) not in LAUNCHERS:
        return []
    if "--multi-prog" in command:
        # the first word after the options: the file (not executable, so not found as
        # the program)
        conf = next((word for _, word in task_env.operands(command)), None)
        return _multi_prog(conf) if conf else []
    if at is FROM_COMMAND:
        at = program_index(command)
    if not at:
        return []
    first = _which(command[at])
    found = [first] if first else []
    rest = command[at + 1 :]
    while ":" in rest:
        rest = rest[rest.index(":") + 1 :]
        i = program_index([command[0]] + rest)
        if i:
            path = _which(rest[i - 1])
            if path:
                found.append(path)
    return found


def _multi_prog(conf):
    """The programs of an srun --multi-prog file (lines 'RANKS PROGRAM ARGS...')."""
    out = []
    try:
        with open(conf, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        words = line.split("#", 1)[0].split()
        if len(words) >= 2:
            path = _which(words[1])
            if path and path not in out:
                out.append(path)
    return out


def check_mpmd(command, at=FROM_COMMAND):
    """Refuse a launch of several programs of which some are statically linked: their
    ranks cannot load the runtime, and the others would wait for them for ever in
    perfweave's start-up (a collective of every rank)."""
    programs = mpmd_programs(command, at)
    static = [p for p in programs if _static_program(p)]
    if static and len(static) < len(set(programs)):
        raise PerfweaveError(
            f"{static[0]} is statically linked: its ranks cannot load perfweave's runtime "
            "(LD_PRELOAD), and the ranks of the other programs would wait for them at "
            "start-up; link it dynamically, or measure the programs in separate jobs"
        )
