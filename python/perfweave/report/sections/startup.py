"""Start-up and shutdown: time in MPI_Init, after MPI_Finalize and before MPI_Init per
rank (analysis/phases.py), shown in the run's lines (report/summary.py startup)."""
from perfweave.analysis import phases
from perfweave.errors import FormatError
from perfweave.report.section import Section


class Startup(Section):
    name = "startup"
    needs = ("sampling",)

    def collect(self, experiment, report, top):
        try:
            metas = [p.meta for p in experiment.samples]
        except FormatError:            # the sampling section says why
            metas = []
        phase_pct = (report.get("sampling") or {}).get("phase_pct")
        return {"startup": phases.summarize(experiment.profile, metas, phase_pct)}


SECTION = Startup()
