"""Getting perfweave's variables (LD_PRELOAD, PERFWEAVE_*) to every task a launcher
starts, whatever environment policy the launcher follows.

`perfweave run` puts the variables in the launcher's own environment; most launchers
hand that environment on, but not all, and not always: srun and sbatch pass only what
`--export` (or SLURM_EXPORT_ENV, SRUN_EXPORT_ENV, SBATCH_EXPORT) allows, Open MPI's
mpirun passes only named variables to other nodes, and MPICH's hydra mpiexec can be told
to pass none (-envnone, -genvnone) or a list (-envlist, -genvlist). So the command is
rewritten to name the variables in the launcher's own terms (docs/launching.md):

- srun, sbatch: the `--export` list in force is extended with the variables' names, or
  `--export=ALL,<names>` is added when none is in force. Names, not NAME=VALUE: Slurm
  splits the list at every comma, and takes a named variable's value from its own
  environment, so values need no quoting (an LD_PRELOAD of several libraries, a path with
  a comma). A NAME=VALUE the user gave for LD_PRELOAD is kept behind perfweave's library.
- SLURM_EXPORT_ENV, SRUN_EXPORT_ENV, SBATCH_EXPORT in the environment (set by a site, or
  by sbatch inside a job): extended the same way, so that an srun started by the command
  (inside salloc, a batch script, a shell script) passes the variables too.
- Open MPI's mpirun: `-x NAME` for each variable.
- MPICH's hydra mpiexec: `-genv NAME VALUE` for each variable (passed whatever the
  -envnone / -envlist options say).
- other known launchers (aprun, jsrun, flux, whose site policies perfweave cannot read),
  and the word `perfweave-exec` placed by the user before the program in any command:
  the program is started through perfweave-exec (installed beside the runtime library),
  which sets the variables and then execs it.
"""

import os

# The exec helper's name, also the marker a user may write before the program.
EXEC_HELPER = "perfweave-exec"

_SLURM_EXPORTING = {"srun": "SRUN_EXPORT_ENV", "sbatch": "SBATCH_EXPORT"}
# Environment variables that hold an srun or sbatch export policy (in the order srun
# honours them: SRUN_EXPORT_ENV wins over SLURM_EXPORT_ENV).
POLICY_VARIABLES = ("SRUN_EXPORT_ENV", "SLURM_EXPORT_ENV", "SBATCH_EXPORT")
_SLURM_NAMES = ("srun", "sbatch", "salloc")
_OPENMPI_NAMES = {"orterun", "prterun", "mpirun.openmpi", "mpiexec.openmpi"}
_HYDRA_NAMES = {"mpiexec.hydra", "mpirun.mpich", "mpiexec.mpich"}
# Launchers whose policy perfweave does not read: the program goes through the helper.
_HELPER_LAUNCHERS = {"aprun", "jsrun", "flux"}
# Names that are either Open MPI's or MPICH's launcher (launcher_kind asks it which).
_EITHER_NAMES = {"mpirun", "mpiexec"}
# Every launcher named here: a command starting with one has the program after its
# options (launch/command.py program_index).
LAUNCHERS = {*_SLURM_NAMES, *_OPENMPI_NAMES, *_HYDRA_NAMES, *_HELPER_LAUNCHERS, *_EITHER_NAMES}

# Launcher options that give the rank count.
RANK_OPTIONS = {"-n", "-np", "--np", "--n", "--ntasks", "-ntasks"}
# Other launcher options that take a value (so the value is not the program).
_VALUE_OPTIONS = {
    "-c",
    "-N",
    "--nodes",
    "--cpus-per-task",
    "-x",
    "-H",
    "--host",
    "-hosts",
    "--hostfile",
    "-hostfile",
    "-f",
    "--map-by",
    "--bind-to",
    "-wdir",
    "-ppn",
    "--rankfile",
    "-p",
    "--partition",
    "-t",
    "--time",
    "-A",
    "--account",
    "-npernode",
    "--npernode",
    "--mpi",
    "--export",
    "-o",
    "--output",
    "-e",
    "--error",
    "-J",
    "--job-name",
    "-w",
    "--nodelist",
    "--ntasks-per-node",
    "--mem",
    "-D",
    "--chdir",
    "--cpu-bind",
    "-m",
    "--distribution",
    "-genvlist",
    "-envlist",
    "--exclusive",
}
# Options that take a name and a value: Open MPI's `--mca NAME VALUE`, hydra's
# `-genv NAME VALUE` (or `-genv NAME=VALUE`, one word).
_PAIR_OPTIONS = {"--mca", "-mca", "--gmca", "-gmca", "-genv", "-env"}


def _values_after(argv, i):
    """How many words after argv[i], a launcher's option, are its values."""
    word = argv[i]
    if word in _PAIR_OPTIONS:
        return 1 if word.endswith("env") and "=" in (argv[i + 1 : i + 2] or [""])[0] else 2
    return 1 if word in RANK_OPTIONS or word in _VALUE_OPTIONS else 0


def operands(command):
    """(index, word) of the words of a launch command that are neither the launcher's
    options nor their values."""
    i = 1
    while i < len(command):
        if command[i].startswith("-"):
            i += 1 + _values_after(command, i)
        else:
            yield i, command[i]
            i += 1


def _option_words(argv, program_at):
    """Indices of the launcher's options and their values in a launch command whose
    program is at program_at: before it, and in each part of a launch of several
    programs (after each ':' that follows, up to that part's program)."""
    end = len(argv) if program_at is None else program_at
    yield from range(1, end)
    while ":" in argv[end:]:
        i = end = argv.index(":", end) + 1
        while end < len(argv) and argv[end].startswith("-"):
            end += 1 + _values_after(argv, end)
        yield from range(i, min(end, len(argv)))


def which(word):
    """The executable file that `word` runs, as shutil.which finds it (a word with a /
    is that path; another, the first executable file of that name on PATH), or None;
    shutil's own imports (three compression libraries) are not for the launch path."""
    if os.path.dirname(word):
        return word if _executable(word) else None
    path = os.environ.get("PATH", os.defpath)
    for d in path.split(os.pathsep) if path else ():
        if _executable(os.path.join(d, word)):
            return os.path.join(d, word)
    return None


def _executable(path):
    return os.access(path, os.X_OK) and not os.path.isdir(path)


def launcher_kind(command):
    """How `command` starts its tasks: "srun", "sbatch", "salloc", "openmpi" (mpirun),
    "hydra" (MPICH's mpiexec), "other" (another launcher) or None (not a launcher)."""
    path = which(command[0]) or command[0]
    names = [os.path.basename(command[0]), os.path.basename(os.path.realpath(path))]
    for name in names:
        if name in _SLURM_NAMES:
            return name
        if name in _OPENMPI_NAMES:
            return "openmpi"
        if name in _HYDRA_NAMES:
            return "hydra"
        if name in _HELPER_LAUNCHERS:
            return "other"
    if names[0] in _EITHER_NAMES:
        # neither name tells whose: ask the launcher itself
        return _ask_version(path)
    return None


def launcher_flavor(path):
    """The MPI whose launcher `path` is (for the launcher's own options), or None."""
    import subprocess

    try:
        res = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    text = res.stdout + res.stderr
    if "Open MPI" in text or "OpenRTE" in text:
        return "openmpi"
    if "HYDRA" in text or "MPICH" in text:
        return "mpich"
    return None


def _ask_version(path):
    return {"openmpi": "openmpi", "mpich": "hydra"}.get(launcher_flavor(path), "other")


def extend_policy(policy, names, preload_var="LD_PRELOAD"):
    """An srun/sbatch export policy (ALL, NONE, NIL, or [ALL,]list) extended with
    `names`; returns (policy, value the user set for LD_PRELOAD in it, or None).
    A `LD_PRELOAD=VALUE` item is taken out (perfweave's LD_PRELOAD, which then carries
    VALUE behind its own library, is passed by name instead)."""
    items = [i for i in policy.split(",") if i]
    user_preload = None
    kept = []
    for item in items:
        if item.startswith(preload_var + "="):
            user_preload = item[len(preload_var) + 1 :]
        elif item.upper() not in ("NONE", "NIL"):
            kept.append(item)
    # NONE (or NIL) with variables is not allowed: the list alone means "only these"
    kept += [n for n in names if n not in kept]
    return ",".join(kept), user_preload


def _option_value(argv, i, option):
    """(value, number of words) when argv[i] is `option VALUE` or `option=VALUE`."""
    word = argv[i]
    if word == option and i + 1 < len(argv):
        return argv[i + 1], 2
    if word.startswith(option + "="):
        return word[len(option) + 1 :], 1
    return None, 0


def _script_policy(path):
    """The --export of a batch script's #SBATCH lines (read up to its first command, as
    sbatch does), or None."""
    import re  # for sbatch alone: not on the launch path of every run

    policy = None
    try:
        with open(path, errors="replace") as f:
            for n, line in enumerate(f):
                line = line.strip()
                if n == 0 and line.startswith("#!") or not line:
                    continue
                if not line.startswith("#"):
                    break
                m = re.match(r"#SBATCH\s+--export(?:=|\s+)(\S+)", line)
                if m:
                    policy = m.group(1)
    except OSError:
        pass
    return policy


def _rewrite_slurm(argv, end, kind, names, environ):
    """srun / sbatch (its options before index `end`): the export policy in force
    extended with `names`, as a --export option that overrides all others. In force: the
    last --export given, else SRUN_EXPORT_ENV / SBATCH_EXPORT, else (srun)
    SLURM_EXPORT_ENV or (sbatch) the script's #SBATCH --export, else ALL. Returns (argv,
    LD_PRELOAD the user set in the policy or None)."""
    last = None
    i = 1
    while i < end:
        value, used = _option_value(argv, i, "--export")
        if used:
            last = (i, used, value)
        i += used or 1
    if last is not None:
        i, used, policy = last
    else:
        i, used = 1, 0
        policy = environ.get(_SLURM_EXPORTING[kind])
        if not policy and kind == "srun":
            policy = environ.get("SLURM_EXPORT_ENV")
        if not policy and kind == "sbatch" and end < len(argv):
            policy = _script_policy(argv[end])
        policy = policy or "ALL"
    extended, user_preload = extend_policy(policy, names)
    return argv[:i] + [f"--export={extended}"] + argv[i + used :], user_preload


def _with_helper(argv, at, runtime_env, helper):
    """argv with the program at index `at` started through the exec helper."""
    settings = [f"{k}={v}" for k, v in sorted(runtime_env.items())]
    return argv[:at] + [str(helper), *settings, "--"] + argv[at:]


def _marker_index(argv):
    for i, word in enumerate(argv):
        if os.path.basename(word) == EXEC_HELPER and "=" not in word:
            return i
    return None


def for_tasks(command, program_at, runtime_env, environ, helper):
    """(argv, environment) that start `command` with `runtime_env` in every task.
    program_at: index of the program (or batch script) in command, None if not known;
    environ: perfweave's environment (with runtime_env not yet in it); helper: the path
    of the exec helper."""
    env = dict(environ)
    env.update(runtime_env)
    names = sorted(runtime_env)
    argv = list(command)
    marker = _marker_index(argv)
    if marker is not None:
        return _with_helper(argv[:marker] + argv[marker + 1 :], marker, runtime_env, helper), env
    # a policy in the environment reaches every srun / sbatch the command starts
    for var in POLICY_VARIABLES:
        if environ.get(var) and environ[var].lower() != "all":
            env[var], preload = extend_policy(environ[var], names)
            if preload:
                env["LD_PRELOAD"] = _behind(runtime_env["LD_PRELOAD"], preload)
    kind = launcher_kind(argv)
    if kind in _SLURM_EXPORTING:
        end = len(argv) if program_at is None else program_at
        argv, preload = _rewrite_slurm(argv, end, kind, names, environ)
        if preload:
            env["LD_PRELOAD"] = _behind(runtime_env["LD_PRELOAD"], preload)
    elif kind == "openmpi":
        # Open MPI forwards only named variables to other nodes
        argv = _user_preload_behind(argv, program_at, runtime_env["LD_PRELOAD"], ("-x",))
        argv = [argv[0]] + [w for n in names for w in ("-x", n)] + argv[1:]
    elif kind == "hydra":
        argv = _user_preload_behind(argv, program_at, runtime_env["LD_PRELOAD"], ("-genv", "-env"))
        argv = [argv[0]] + [w for n in names for w in ("-genv", n, env[n])] + argv[1:]
    elif kind == "other" and program_at is not None:
        argv = _with_helper(argv, program_at, runtime_env, helper)
    return argv, env


def _behind(ours, theirs):
    """LD_PRELOAD with perfweave's libraries first and the user's value kept after."""
    first = ours.split(":")[0]
    return first + ":" + theirs if theirs else first


def _user_preload_behind(argv, program_at, ours, setters):
    """argv with the LD_PRELOAD a user gave the tasks on an MPI launcher's command line
    kept behind perfweave's library: Open MPI's `-x LD_PRELOAD=VALUE`, hydra's `-genv` or
    `-env LD_PRELOAD VALUE` (or `=VALUE`); setters: the launcher's options of these.
    Each would win over perfweave's own `-x` or `-genv` (the last -x, the last -genv and
    any -env win), so the value is changed where it is, and reaches the tasks it did."""
    argv = list(argv)
    words = set(_option_words(argv, program_at))
    for i in sorted(words):
        if argv[i] not in setters or i + 1 not in words:
            continue
        name = argv[i + 1]
        if name.startswith("LD_PRELOAD="):
            argv[i + 1] = "LD_PRELOAD=" + _behind(ours, name[len("LD_PRELOAD=") :])
        elif name == "LD_PRELOAD" and _values_after(argv, i) == 2 and i + 2 in words:
            argv[i + 2] = _behind(ours, argv[i + 2])
    return argv
