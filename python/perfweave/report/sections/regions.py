"""The regions section (runtime/modules/regions.c; docs/regions.md): the program's phases
and regions over the ranks, with their time, MPI time and calls, and in a sampled run the
split of their samples into compute, MPI, I/O and other. Absent from the report when the
program declared no region, phase or measurement-off window."""

from perfweave.analysis.regions import SPLIT, analyze
from perfweave.analysis.samples.classification import ACTIVITIES, classify
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t
from perfweave.report.widgets import cut_rows, escape, html_table, more_rows, text_table


class RegionsSection(Section):
    name = "regions"

    def collect(self, experiment, report, top):
        reg = experiment.regions
        if not reg and not reg.notes:
            return {}
        procs = [p for p in (experiment.samples or []) if len(p.records)]
        activities = list(ACTIVITIES)
        activity = classify(procs, activities=activities) if procs else []
        return {"regions": analyze(reg, procs, activities, activity).to_json()}

    def text(self, data, view):
        r = data.get("regions")
        if not r:
            return []
        out = ["", "Regions and phases (perfweave.h, MPI_Pcontrol)"]
        rows = r["regions"]
        shown, more = cut_rows(rows, view.max_rows)
        out += text_table([_row(x, r["sampled"]) for x in shown], _columns(r), width=view.width)
        out += more_rows(more, "regions")
        if r["off_s"]:
            out.append(f"  measurement off for {_t(r['off_s'])} (summed over processes)")
        if r["unmatched_ends"]:
            out.append(
                f"  {r['unmatched_ends']} end{'s' * (r['unmatched_ends'] != 1)} named no open "
                "region or phase (ignored)"
            )
        if r["dropped"]:
            out.append(f"  {r['dropped']} intervals not kept (too deep or too many names)")
        out += [f"  note: {n}" for n in r["notes"]]
        return out

    def html(self, data, page):
        r = data.get("regions")
        if not r:
            return []
        return [
            "<h2>Regions and phases</h2>",
            html_table([_row(x, r["sampled"]) for x in r["regions"]], _columns(r)),
            "<h3>Per rank</h3>",
            html_table(
                [[x["rank"]] + _row(x, r["sampled"]) for x in r["per_rank"]], ["rank"] + _columns(r)
            ),
        ] + [f"<p class=note>{escape(n)}</p>" for n in r["notes"]]


def _columns(r):
    cols = ["kind", "name", "count", "time", "MPI", "MPI %", "MPI calls"]
    # the samples inside each, by activity (recorded MPI time is "MPI %")
    return cols + ["samples"] + [f"{SPLIT_LABEL[s]}" for s in SPLIT] if r["sampled"] else cols


SPLIT_LABEL = {"compute": "compute", "mpi": "in MPI", "io": "I/O", "other": "other"}


def _row(x, sampled):
    row = [
        x["kind"],
        x["name"],
        f"{x['count']:,}",
        _t(x["time_s"]),
        _t(x["mpi_s"]),
        f"{x['mpi_pct']:.1f}",
        f"{x['mpi_calls']:,}",
    ]
    if sampled:
        row.append(f"{x['samples']:,}")
        row += [f"{x[f'{s}_samples_pct']:.0f}%" if x["samples"] else "-" for s in SPLIT]
    return row


SECTION = RegionsSection()
