"""PerfweaveMixin, the ReFrame test plugin of perfweave.reframe (docs/reframe.md). This
module imports ReFrame (4.6 or later: the launcher's `modifier`); perfweave.reframe
imports it only when PerfweaveMixin is first looked up.

The run: `perfweave run -o EXP OPTIONS --` goes in front of the launch command through
the job launcher's `modifier` and `modifier_options` (ReFrame's LauncherWrapper is
deprecated), so srun, mpirun or any launcher of the partition is what perfweave runs;
the job script then runs `perfweave analyze` (when the run has traces) and `perfweave
report`, text and JSON, beside the experiment in the stage directory. The figures of
figures.py are the test's performance variables, one `@performance_function` each,
made from that table below."""

import json
import os
import shlex
import sys
import types

import reframe as rfm
import reframe.utility.typecheck as typ
from reframe.core.builtins import performance_function, run_before, variable
from reframe.core.exceptions import PerformanceError

from perfweave.errors import PerfweaveError
from perfweave.readers.results import read_waitstates
from perfweave.reframe.figures import FIGURES, figures, recorded

REPORT_TEXT = "perfweave-report.txt"
REPORT_JSON = "perfweave-report.json"
ANALYZE_TEXT = "perfweave-analyze.txt"

# RegressionTestPlugin is RegressionMixin's name from ReFrame 4.9 on (the old one warns)
_Plugin = getattr(rfm, "RegressionTestPlugin", None) or rfm.RegressionMixin


def default_command():
    """The perfweave beside the Python that runs ReFrame (the installation this module
    is part of), else the one on the job's PATH."""
    mine = os.path.join(os.path.dirname(sys.executable), "perfweave")
    return mine if os.access(mine, os.X_OK) else "perfweave"


class _PerfweaveRun(_Plugin):
    #: options of `perfweave run` (before its `--`): ['--trace', '--io'], ...
    perfweave_options = variable(typ.List[str], value=[])

    #: the experiment directory, in the stage directory
    perfweave_experiment = variable(str, value="perfweave-experiment")

    #: the perfweave command the job runs (it must run on the compute nodes)
    perfweave_command = variable(str, value=default_command())

    @run_before("run", always_last=True)
    def perfweave_launch(self):
        launcher = self.job.launcher
        exp = shlex.quote(os.path.join(self.stagedir, self.perfweave_experiment))
        pw = shlex.quote(self.perfweave_command)
        # a modifier the test set already (a debugger, numactl ...) runs under perfweave
        inner = [launcher.modifier, *launcher.modifier_options] if launcher.modifier else []
        launcher.modifier = pw
        launcher.modifier_options = [
            "run",
            "-o",
            exp,
            *map(shlex.quote, self.perfweave_options),
            "--",
            *inner,
        ]
        self.postrun_cmds += [
            f"if [ -d {exp}/traces ]; then {pw} analyze {exp} > {ANALYZE_TEXT}; fi",
            f"{pw} report {exp} > {REPORT_TEXT}",
            f"{pw} report --json {exp} > {REPORT_JSON}",
        ]
        self.keep_files += [self.perfweave_experiment, REPORT_TEXT, REPORT_JSON, ANALYZE_TEXT]

    @run_before("performance")
    def perfweave_read_report(self):
        """Reads the report (and the wait-state analysis) once; drops the figures the run
        cannot have from perf_variables, and fails the test, in one line, when the
        report lacks one it should have."""
        if self.is_dry_run():  # reframe --dry-run: the job script is written, not run
            return
        path = os.path.join(self.stagedir, REPORT_JSON)
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            raise PerformanceError(
                f"perfweave: no report in {path} ({e}); see {REPORT_TEXT} and the job's "
                "standard error"
            ) from None
        wanted = [f for f in FIGURES if recorded(report, f) and f.name in self.perf_variables]
        waitstates = None
        if any("trace" in f.needs for f in wanted):
            try:
                waitstates = read_waitstates(os.path.join(self.stagedir, self.perfweave_experiment))
            except (OSError, PerfweaveError) as e:
                raise PerformanceError(f"perfweave: no wait-state analysis: {e}") from None
        self.perfweave_figures = figures(report, waitstates)
        for f in FIGURES:
            if not recorded(report, f):
                self.perf_variables.pop(f.name, None)
        for f in wanted:
            if f.name not in self.perfweave_figures:
                raise PerformanceError(f"perfweave: the report {path} has no figure {f.name!r}")


def _performance_function(figure):
    def value(self):
        return self.perfweave_figures[figure.name]

    value.__name__ = figure.name
    value.__doc__ = figure.what
    return performance_function(figure.unit)(value)


def _figures_body(ns):
    ns["__module__"] = __name__
    ns["__doc__"] = (
        "A ReFrame test plugin that runs the test's job under `perfweave run` and gives the "
        "report's figures as performance variables (docs/reframe.md)."
    )
    for f in FIGURES:
        ns[f.name] = _performance_function(f)


# made by its metaclass' namespace, so that each function is registered as ReFrame's class
# statement registers a decorated method
PerfweaveMixin = types.new_class("PerfweaveMixin", (_PerfweaveRun,), exec_body=_figures_body)
