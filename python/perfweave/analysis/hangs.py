"""Hung ranks (`perfweave run --hang S`, docs/snapshots.md): each rank that stayed S
seconds in one MPI call, its call site symbolised, its peer and communicator, with what
every other rank was doing when its watchdog was asked (readers/hangs.py)."""

from dataclasses import dataclass, field

from perfweave.symbols import Symbolizer


@dataclass
class HangsResult:
    """hangs: one dict per report, in rank order: rank, thread, function, seconds, site
    (function, file, line), peer_role ('peer', 'root' or ''), peer (a world rank; -1 any
    source, -2 MPI_PROC_NULL, -3 none), comm (world, size, ranks), others (per other
    rank: rank, what ('MPI_Recv'..., 'computing', 'no answer'), seconds)."""

    hangs: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def to_json(self):
        return {"hangs": self.hangs, "notes": self.notes}


def _state(doc):
    """What a rank's threads were doing: its first thread in an MPI call, else computing
    (seconds since its last call ended)."""
    calls = [t for t in doc["threads"] if t["function"]]
    if calls:
        return calls[0]["function"], calls[0]["seconds"]
    if doc["finalizing"]:
        return "finalizing", -1.0
    last = [t["seconds"] for t in doc["threads"] if t["seconds"] >= 0]
    return "computing", min(last) if last else -1.0


def analyze(hangs, states, warnings=(), symbolizer=None):
    sym = symbolizer or Symbolizer()
    out = []
    for h in sorted(hangs, key=lambda h: (h["rank"], h["asked"])):
        site = sym.resolve(h["object"], [h["offset"]])[0] if h["object"] else None
        answers = {s["rank"]: s for s in states if s["asked"] >= h["asked"]}
        others = []
        for r in range(h["world_size"]):
            if r == h["rank"]:
                continue
            what, secs = _state(answers[r]) if r in answers else ("no answer", -1.0)
            others.append({"rank": r, "what": what, "seconds": secs})
        out.append(
            {
                "rank": h["rank"],
                "thread": h["thread"],
                "function": h["function"],
                "seconds": h["seconds"],
                "hang_s": h["hang_s"],
                "site": {
                    "function": site.function if site else "",
                    "file": site.file if site else "",
                    "line": site.line if site else 0,
                },
                "peer_role": h["peer_role"],
                "peer": h["peer"],
                "comm": h["comm"],
                "others": others,
            }
        )
    return HangsResult(hangs=out, notes=list(warnings))
