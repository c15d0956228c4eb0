"""The ReFrame checks of tests/runtime/test_reframe.py.

ReframeWork builds programs/reframe_work.c with the environment's MPI and runs it on 2
ranks under perfweave (PerfweaveMixin), with --trace and --io, so that every figure of
perfweave.reframe is a performance variable. Set from the command line: work_ms and
steps (the program's arguments), slowdown (the work multiplied by it), compute_ref (a
reference for the `compute` variable: within 10 % of it, or the test fails; 0: none).

SerialWork runs a program without MPI (programs/burn7030.c, for 0.2 s) through ReFrame's
`local` launcher, under a modifier of its own (env), with --io."""

import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, sanity_function, variable

from perfweave.reframe import PerfweaveMixin


class Program(rfm.RegressionTest, PerfweaveMixin):
    """A program of tests/runtime/programs, built alone, run under perfweave."""

    sourcesdir = os.path.join(os.path.dirname(__file__), "..", "programs")
    build_system = "SingleSource"

    @run_after("init")
    def name_program(self):
        self.executable = "./" + os.path.splitext(self.sourcepath)[0]


@rfm.simple_test
class ReframeWork(Program):
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    sourcepath = "reframe_work.c"
    num_tasks = 2
    perfweave_options = ["--trace", "--io"]
    work_ms = variable(float, value=150.0)
    steps = variable(int, value=4)
    slowdown = variable(float, value=1.0)
    compute_ref = variable(float, value=0.0)

    @run_before("run")
    def set_launch(self):
        self.executable_opts = [f"{self.work_ms * self.slowdown:g}", str(self.steps)]
        options = self.current_partition.extras["launcher_options"]
        self.job.launcher.options = list(options[self.current_environ.name])

    @run_before("performance")
    def set_reference(self):
        if self.compute_ref:
            self.reference = {"*": {"compute": (self.compute_ref, -0.1, 0.1, "s")}}

    @sanity_function
    def every_rank_worked(self):
        return sn.assert_eq(sn.count(sn.findall(r"^rank \d+ work ", self.stderr)), self.num_tasks)


@rfm.simple_test
class SerialWork(Program):
    valid_systems = ["local:mpirun"]
    valid_prog_environs = ["openmpi"]
    sourcepath = "burn7030.c"
    executable_opts = ["0.2"]
    perfweave_options = ["--io"]

    @run_before("compile")
    def without_mpi(self):
        self.build_system.cc = "gcc"

    @run_before("run")
    def plain_launch(self):
        self.job.launcher = getlauncher("local")()
        self.job.launcher.modifier = "env"
        self.job.launcher.modifier_options = ["PW_RFM_MODIFIER=kept"]

    @sanity_function
    def burnt(self):
        return sn.assert_found(r"^heavy \S+ light \S+", self.stderr)
