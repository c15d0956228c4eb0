"""Hung ranks (`perfweave run --hang S`, docs/snapshots.md): each rank that stayed S
seconds in one MPI call, where, waiting for whom, and what the other ranks were doing
then. Absent from the report when no rank hung."""

from perfweave.analysis.hangs import analyze
from perfweave.readers.hangs import read_hangs
from perfweave.report.section import Section
from perfweave.report.widgets import escape


class HangsSection(Section):
    name = "hangs"

    def collect(self, experiment, report, top):
        hangs, states, warnings = read_hangs(experiment.path)
        if not hangs and not warnings:
            return {}
        return {"hangs": analyze(hangs, states, warnings).to_json()}

    def text(self, data, view):
        h = data.get("hangs")
        if not h:
            return []
        out = ["", "Hung ranks (--hang)"]
        for hang in h["hangs"]:
            out += ["  " + line for line in _lines(hang)]
        out += [f"  note: {n}" for n in h["notes"]]
        return out

    def html(self, data, page):
        h = data.get("hangs")
        if not h:
            return []
        parts = ["<h2>Hung ranks</h2>"]
        for hang in h["hangs"]:
            lines = _lines(hang)
            parts.append(f"<p>{escape(lines[0])}</p>")
            parts.append(
                "<ul>" + "".join(f"<li>{escape(x.strip())}</li>" for x in lines[1:]) + "</ul>"
            )
        parts += [f"<p class=note>{escape(n)}</p>" for n in h["notes"]]
        return parts


def _rank_list(ranks, size):
    """World ranks as ranges: 0-3,7."""
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    more = f" (+{size - len(ranks)})" if size > len(ranks) else ""
    return ",".join(out) + more


def _lines(hang):
    site = hang["site"]
    where = site["function"] or "?"
    if site["file"]:
        where += f" ({site['file']}:{site['line']})"
    peer = {-1: "any source", -2: "MPI_PROC_NULL"}.get(hang["peer"], f"rank {hang['peer']}")
    who = f", {hang['peer_role']} {peer}" if hang["peer_role"] else ""
    comm = hang["comm"]
    if comm["world"]:
        cname = f"MPI_COMM_WORLD ({comm['size']} ranks)"
    elif comm["size"]:
        ranks = _rank_list(comm["ranks"], comm["size"])
        cname = f"a communicator of {comm['size']} ranks: world ranks {ranks}"
    else:
        cname = ""
    lines = [
        f"rank {hang['rank']} (thread {hang['thread']}): {hang['function']} for "
        f"{hang['seconds']:.1f} s (>= {hang['hang_s']} s) at {where}{who}"
        + (f", on {cname}" if cname else "")
    ]
    for o in hang["others"]:
        what = o["what"]
        if what == "computing":
            text = "computing" + (
                f" ({o['seconds']:.1f} s since its last MPI call)" if o["seconds"] >= 0 else ""
            )
        elif what in ("no answer", "finalizing"):
            text = what
        else:
            text = f"in {what} for {o['seconds']:.1f} s"
        lines.append(f"  rank {o['rank']}: {text}")
    return lines


SECTION = HangsSection()
