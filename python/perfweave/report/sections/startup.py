"""Start-up and shutdown: time in MPI_Init, after MPI_Finalize and before MPI_Init per
rank (analysis/phases.py), shown in the run's lines (report/summary.py startup)."""

from perfweave.analysis import phases
from perfweave.report.section import Section


class Startup(Section):
    name = "startup"
    needs = ("samples", "mpi_profile")

    def collect(self, experiment, report, top):
        sm = report.get("samples") or {}
        # the samples the sampling section read (kept), unless they were unreadable: it
        # says why, and reading them again would fail again
        metas = [] if sm.get("error") else [p.meta for p in experiment.samples]
        return {
            "startup": phases.summarize(
                experiment.profile, report["mpi_profile"]["per_rank"], metas, sm.get("phase_pct")
            )
        }


SECTION = Startup()
