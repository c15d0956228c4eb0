"""How `perfweave run` rewrites a launch command so that perfweave's variables reach
every task (python/perfweave/task_env.py, docs/launching.md): every launcher form, and
the rank count a launch command gives the experiment's default name. The real forms run
under Slurm in tests/runtime/test_slurm.py."""

import datetime
import os
import subprocess

import pytest

from perfweave import launch, task_env
from perfweave.launch.command import program_index, rank_count
from perfweave.launch.run import default_experiment_name
from perfweave.report.sections.run import mpi_library_line

RUNTIME = {
    "LD_PRELOAD": "/pw/libperfweave.so",
    "PERFWEAVE_EXPERIMENT": "/exp/a,b",
    "PERFWEAVE_TRACE": "0",
}
NAMES = "LD_PRELOAD,PERFWEAVE_EXPERIMENT,PERFWEAVE_TRACE"
HELPER = "/pw/perfweave-exec"


@pytest.fixture
def prog(tmp_path):
    p = tmp_path / "prog"
    p.write_text("#!/bin/sh\n")
    p.chmod(0o755)
    return str(p)


def rewrite(command, environ=None, runtime=RUNTIME):
    return task_env.for_tasks(
        command, program_index(command), dict(runtime), dict(environ or {}), HELPER
    )


@pytest.mark.parametrize(
    "options, expected",
    [
        ([], [f"--export=ALL,{NAMES}"]),  # srun's default, made explicit
        (["--export=NONE"], [f"--export={NAMES}"]),  # NONE: only the names
        (["--export", "NONE"], [f"--export={NAMES}"]),  # option and value apart
        (["--export=nil"], [f"--export={NAMES}"]),
        (["--export=PATH,HOME"], [f"--export=PATH,HOME,{NAMES}"]),
        (["--export=ALL"], [f"--export=ALL,{NAMES}"]),
        # the last --export is the one in force: that one is extended
        (
            ["--export=ALL", "-n", "2", "--export=PATH"],
            ["--export=ALL", "-n", "2", f"--export=PATH,{NAMES}"],
        ),
    ],
)
def test_srun_export(prog, options, expected):
    argv, env = rewrite(["srun", *options, prog, "--export=NONE"])
    # the program's own arguments are never touched
    assert argv == ["srun", *expected, prog, "--export=NONE"]
    assert {k: env[k] for k in RUNTIME} == RUNTIME


def test_srun_export_user_preload(prog):
    """A LD_PRELOAD=VALUE in the list: passed by name, its value behind perfweave's."""
    argv, env = rewrite(["srun", "--export=PATH,LD_PRELOAD=/x/a.so", prog])
    assert argv[1] == f"--export=PATH,{NAMES}"
    assert env["LD_PRELOAD"] == "/pw/libperfweave.so:/x/a.so"


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({"SLURM_EXPORT_ENV": "NONE"}, NAMES),  # inside sbatch --export=NONE
        ({"SLURM_EXPORT_ENV": "PATH"}, f"PATH,{NAMES}"),
        ({"SRUN_EXPORT_ENV": "HOME", "SLURM_EXPORT_ENV": "NONE"}, f"HOME,{NAMES}"),
        ({"SLURM_EXPORT_ENV": "ALL"}, f"ALL,{NAMES}"),
    ],
)
def test_srun_policy_from_environment(prog, environ, expected):
    argv, env = rewrite(["srun", "-n", "2", prog], environ)
    assert argv == ["srun", f"--export={expected}", "-n", "2", prog]
    # and any srun the program starts in turn
    for var in environ:
        if environ[var] != "ALL":
            assert env[var].endswith(NAMES)


def test_salloc_and_scripts_get_the_policy_through_the_environment(prog):
    """salloc (or a script) starting srun: the command is kept, the environment's
    policy is extended."""
    argv, env = rewrite(["salloc", "-n", "4", "srun", prog], {"SLURM_EXPORT_ENV": "NONE"})
    assert argv == ["salloc", "-n", "4", "srun", prog]
    assert env["SLURM_EXPORT_ENV"] == NAMES
    argv, env = rewrite(["salloc", "-n", "4", "srun", prog])
    assert argv == ["salloc", "-n", "4", "srun", prog] and "SLURM_EXPORT_ENV" not in env


def test_sbatch(tmp_path):
    script = tmp_path / "job.sh"  # sbatch reads scripts that are not executable
    script.write_text(
        "#!/bin/sh\n#SBATCH -n 4\n#SBATCH --export=NONE\nsrun prog\n#SBATCH --export=ALL\n"
    )
    # the script's #SBATCH --export (before its first command) is the policy in force
    argv, _ = rewrite(["sbatch", "--wait", str(script), "--export=x"])
    assert argv == ["sbatch", f"--export={NAMES}", "--wait", str(script), "--export=x"]
    # SBATCH_EXPORT beats the script, the command line beats both
    argv, _ = rewrite(["sbatch", str(script)], {"SBATCH_EXPORT": "PATH"})
    assert argv[1] == f"--export=PATH,{NAMES}"
    argv, env = rewrite(["sbatch", "--export=HOME", str(script)], {"SBATCH_EXPORT": "PATH"})
    assert argv[1] == f"--export=HOME,{NAMES}" and env["SBATCH_EXPORT"] == f"PATH,{NAMES}"
    script.write_text("#!/bin/sh\nsrun prog\n")
    assert rewrite(["sbatch", str(script)])[0][1] == f"--export=ALL,{NAMES}"


@pytest.mark.parametrize("launcher", ["mpirun.openmpi", "orterun"])
def test_openmpi_names_each_variable(prog, launcher):
    argv, _ = rewrite([launcher, "-n", "2", prog])
    assert argv == [
        launcher,
        "-x",
        "LD_PRELOAD",
        "-x",
        "PERFWEAVE_EXPERIMENT",
        "-x",
        "PERFWEAVE_TRACE",
        "-n",
        "2",
        prog,
    ]


@pytest.mark.parametrize("launcher", ["mpiexec.hydra", "mpirun.mpich", "mpiexec.mpich"])
def test_hydra_sets_each_variable(prog, launcher):
    """-genv NAME VALUE: passed whatever -envnone / -envlist say, values as they are."""
    argv, _ = rewrite([launcher, "-envnone", "-n", "2", prog])
    assert argv == [
        launcher,
        "-genv",
        "LD_PRELOAD",
        "/pw/libperfweave.so",
        "-genv",
        "PERFWEAVE_EXPERIMENT",
        "/exp/a,b",
        "-genv",
        "PERFWEAVE_TRACE",
        "0",
        "-envnone",
        "-n",
        "2",
        prog,
    ]


@pytest.mark.parametrize(
    "launcher, user, merged",
    [
        # Open MPI: the last -x of a name wins, so perfweave's -x LD_PRELOAD would lose
        (
            "mpirun.openmpi",
            ["-x", "LD_PRELOAD=/u/a.so:/u/b.so"],
            ["-x", "LD_PRELOAD=/pw/libperfweave.so:/u/a.so:/u/b.so"],
        ),
        ("mpirun.openmpi", ["-x", "LD_PRELOAD="], ["-x", "LD_PRELOAD=/pw/libperfweave.so"]),
        # hydra: the last -genv wins, and -env (for its executable) over any -genv
        (
            "mpirun.mpich",
            ["-genv", "LD_PRELOAD", "/u/a.so"],
            ["-genv", "LD_PRELOAD", "/pw/libperfweave.so:/u/a.so"],
        ),
        (
            "mpiexec.hydra",
            ["-genv", "LD_PRELOAD=/u/a.so"],
            ["-genv", "LD_PRELOAD=/pw/libperfweave.so:/u/a.so"],
        ),
        (
            "mpiexec.mpich",
            ["-env", "LD_PRELOAD", "/u/a.so"],
            ["-env", "LD_PRELOAD", "/pw/libperfweave.so:/u/a.so"],
        ),
        # a name without a value takes the launcher's environment: perfweave's, with the
        # user's own LD_PRELOAD behind it already
        ("mpirun.openmpi", ["-x", "LD_PRELOAD"], ["-x", "LD_PRELOAD"]),
    ],
)
def test_user_preload_on_mpi_launchers_kept_behind(prog, launcher, user, merged):
    """A user's own LD_PRELOAD for the tasks, on the launcher's command line, is kept
    behind perfweave's library where it was given, as srun's --export is; the program's
    own arguments are never touched."""
    argv, env = rewrite([launcher, *user, "-n", "2", prog, "-x", "LD_PRELOAD=/p.so"])
    assert argv[-len(merged) - 5 :] == [*merged, "-n", "2", prog, "-x", "LD_PRELOAD=/p.so"]
    assert env["LD_PRELOAD"] == "/pw/libperfweave.so"  # the launcher's own: unchanged


def test_user_preload_in_every_part_of_a_hydra_launch(prog):
    """Each part of a launch of several programs (after ':') has its own -env."""
    command = ["mpirun.mpich", "-n", "1", prog, "a", ":", "-n", "1"]
    command += ["-env", "LD_PRELOAD=/u/b.so", prog, "-env", "LD_PRELOAD=/arg.so"]
    argv, _ = rewrite(command)
    assert argv[10:] == [
        "-n",
        "1",
        prog,
        "a",
        ":",
        "-n",
        "1",
        "-env",
        "LD_PRELOAD=/pw/libperfweave.so:/u/b.so",
        prog,
        "-env",
        "LD_PRELOAD=/arg.so",
    ]


@pytest.mark.parametrize(
    "options",
    [
        ["-genv", "LD_PRELOAD", "PROG"],  # -genv NAME VALUE: two words
        ["-env", "LD_PRELOAD", "PROG"],
        ["--mca", "btl", "PROG"],  # --mca NAME VALUE
        ["-genv", "LD_PRELOAD=x", "-n", "2"],  # -genv NAME=VALUE: one
    ],
)
def test_option_values_are_not_the_program(prog, tmp_path, options):
    """An option's value that is an executable file (a preloaded library often is) is
    not taken for the program."""
    lib = tmp_path / "lib.so"
    lib.write_text("")
    lib.chmod(0o755)
    command = ["mpiexec", *[str(lib) if w == "PROG" else w for w in options], prog, "x"]
    assert program_index(command) == len(options) + 1


def test_mpirun_by_its_version(prog, tmp_path):
    """A plain `mpirun` is asked whose it is."""
    fake = tmp_path / "mpirun"
    fake.write_text("#!/bin/sh\necho 'HYDRA build details:'\n")
    fake.chmod(0o755)
    assert task_env.launcher_kind([str(fake), prog]) == "hydra"
    fake.write_text("#!/bin/sh\necho 'mpirun (Open MPI) 4.1.4'\n")
    assert task_env.launcher_kind([str(fake), prog]) == "openmpi"


@pytest.mark.parametrize("launcher", ["aprun", "jsrun", "flux"])
def test_other_launchers_use_the_exec_helper(prog, launcher):
    argv, _ = rewrite([launcher, "-n", "2", prog, "x"])
    assert argv == [
        launcher,
        "-n",
        "2",
        HELPER,
        "LD_PRELOAD=/pw/libperfweave.so",
        "PERFWEAVE_EXPERIMENT=/exp/a,b",
        "PERFWEAVE_TRACE=0",
        "--",
        prog,
        "x",
    ]


def test_exec_helper_marker(prog):
    """`perfweave-exec` written before the program, for a launcher perfweave does not
    know: the helper with the variables goes there."""
    argv, _ = rewrite(["mylauncher", "--np", "2", "perfweave-exec", prog])
    assert argv == [
        "mylauncher",
        "--np",
        "2",
        HELPER,
        "LD_PRELOAD=/pw/libperfweave.so",
        "PERFWEAVE_EXPERIMENT=/exp/a,b",
        "PERFWEAVE_TRACE=0",
        "--",
        prog,
    ]


def test_plain_program_unchanged(prog):
    argv, env = rewrite([prog, "-n", "3"])
    assert argv == [prog, "-n", "3"] and env["PERFWEAVE_TRACE"] == "0"


def test_exec_helper_runs_the_program(tmp_path):
    helper = launch.library_dir() / task_env.EXEC_HELPER
    env = {"PATH": os.environ["PATH"], "LD_PRELOAD": "/task/own.so"}
    res = subprocess.run(
        [
            str(helper),
            "LD_PRELOAD=/pw/x.so",
            "PW_A=a b,c",
            "--",
            "sh",
            "-c",
            'echo "$LD_PRELOAD|$PW_A|$0|$1" ; exit 7',
            "zero",
            "one",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 7
    assert res.stdout == "/pw/x.so:/task/own.so|a b,c|zero|one\n"
    # already preloaded (the environment came through too): not twice
    env["LD_PRELOAD"] = "/pw/x.so:/task/own.so"
    res = subprocess.run(
        [str(helper), "LD_PRELOAD=/pw/x.so", "--", "sh", "-c", 'echo "$LD_PRELOAD"'],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.stdout == "/pw/x.so:/task/own.so\n"
    res = subprocess.run([str(helper), "oops"], capture_output=True, text=True)
    assert res.returncode == 127 and len(res.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "command, environ, n",
    [
        (["srun", "-n", "4"], {}, 4),
        (["srun", "-n4"], {}, 4),
        (["srun", "--ntasks=6"], {}, 6),
        (["srun", "--ntasks", "6"], {}, 6),
        (["mpirun", "-np", "3"], {}, 3),
        (["mpiexec", "--np=5"], {}, 5),
        (["srun", "-N", "2", "--ntasks-per-node=3"], {}, 6),
        (["srun", "--nodes=2", "--ntasks-per-node", "2"], {}, 4),
        (["mpiexec.hydra", "-N", "2", "-ppn", "4"], {}, 8),
        (["srun"], {"SLURM_NTASKS": "8"}, 8),  # inside an allocation
        (["srun", "-n", "2"], {"SLURM_NTASKS": "8"}, 2),  # the option wins
        (["salloc", "-n", "4", "srun"], {}, 4),
        (["srun", "-N", "2"], {}, None),
        (["sh", "-n", "4"], {"SLURM_NTASKS": "8"}, None),  # not a launcher
    ],
)
def test_rank_count(prog, command, environ, n):
    cmd = command + [prog, "-n", "99"]  # the program's -n is not counted
    assert rank_count(cmd, environ) == n


def test_default_name_from_allocation(prog, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLURM_NTASKS", "16")
    name = default_experiment_name(["srun", prog], prog, datetime.datetime(2024, 5, 6, 7, 8, 9))
    assert name == "perfweave-prog-16p-20240506-070809"


@pytest.mark.parametrize(
    "full, line",
    [
        (
            "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, "
            "May 26, 2022",
            "Open MPI v4.1.4",
        ),
        (
            "MPICH Version:\t4.0.2 MPICH Release date:\tThu Apr  7 12:34:45 CDT 2022 MPICH ABI:\t"
            "14:2:2 MPICH Device:\tch4:ucx MPICH configure:\t--prefix=/usr, --with-x",
            "MPICH 4.0.2",
        ),
        ("MPICH Version:      4.0.2\nMPICH Release date: Thu Apr  7\n", "MPICH 4.0.2"),
        ("", "?"),
    ],
)
def test_mpi_library_line(full, line):
    assert mpi_library_line(full) == line
