"""`perfweave run --all`: every measurement this machine supports, within a budget.

What --all turns on is the options whose options.json entry has an "all" member (a new
module says there that it belongs in --all, with no edit here):
  on, off    the option's value when chosen, and when left out (for the budget);
  cost_pct   the expected overhead in percent of the run time: the figure of
             docs/performance.md's section `figure` (the section's measurement, rounded up);
  needs      sources.py probes (`perfweave components`, `perfweave doctor`) that must be
             available here, else the part is left out with the probe's reason;
  probes     probes whose answers are recorded (what the part will find: RAPL, PCP, ...).
Options written on the line win over --all and the budget (`--all --no-trace`). The
choice is printed in one line and kept in experiment.json's "all" (docs/all.md)."""

from perfweave.errors import PerfweaveError


def parse_budget(text):
    """--budget's PCT ("5%", "5", "2.5 %") as a float; None when not given."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = float(text.removesuffix("%").strip())
    except ValueError:
        raise PerfweaveError(f"--budget {text!r}: not a percentage (e.g. 5%)") from None
    if not value >= 0:
        raise PerfweaveError(f"--budget {text!r}: must not be negative")
    return value


def declared(spec):
    """The options that belong in --all, in options.json's order."""
    return [o for o in spec if o.get("all")]


def _probe(name, cache):
    if name not in cache:
        from perfweave.sources import PROBES

        probes = {p.__name__.removeprefix("probe_"): p for p in PROBES}
        cache[name] = probes[name]() if name in probes else None
    return cache[name]


def choose(spec, values, given, budget, probe=_probe):
    """The --all choice: values (option name -> value, changed in place) and the record
    kept in experiment.json: {"budget_pct", "expected_overhead_pct", "components": [{
    "option", "what", "on", "value", "cost_pct", "why", "found"}]}. given: the options
    written on the line (they keep their value); probe(name, cache): a sources.py probe's
    answer."""
    cache = {}
    parts = []
    for opt in declared(spec):
        a = opt["all"]
        name = opt["name"]
        part = {
            "option": name,
            "what": a["what"],
            "cost_pct": float(a["cost_pct"]),
            "why": "",
            "found": {},
        }
        for p in a.get("probes", ()):
            got = probe(p, cache)
            if got is not None:
                part["found"][p] = got["detail"] if got["available"] else f"absent: {got['why']}"
        if name in given:
            part["why"] = "as given on the line"
        else:
            missing = [probe(p, cache) for p in a.get("needs", ())]
            missing = [m for m in missing if m is not None and not m["available"]]
            if missing:
                values[name] = a["off"]
                part["why"] = "; ".join(f"{m['source']}: {m['why']}" for m in missing)
            else:
                values[name] = a["on"]
                part["why"] = "supported here"
        part["value"] = values[name]
        part["on"] = values[name] != a["off"]
        parts.append(part)
    if budget is not None:
        # the costliest first, among those --all chose (the line's own stay)
        for part in sorted(parts, key=lambda p: -p["cost_pct"]):
            total = sum(p["cost_pct"] for p in parts if p["on"])
            if total <= budget:
                break
            if part["on"] and part["why"] == "supported here":
                opt = next(o for o in spec if o["name"] == part["option"])
                values[part["option"]] = part["value"] = opt["all"]["off"]
                part["on"] = False
                part["why"] = f"left out to fit the budget of {budget:g} %"
    total = sum(p["cost_pct"] for p in parts if p["on"])
    return {"budget_pct": budget, "expected_overhead_pct": round(total, 2), "components": parts}


def line(record):
    """The one line --all prints."""
    on = [p["what"] for p in record["components"] if p["on"]]
    off = [f"{p['what']} ({p['why']})" for p in record["components"] if not p["on"]]
    expected = record["expected_overhead_pct"]
    text = f"perfweave: --all: {', '.join(on) or 'nothing'}; expected overhead ~{expected:g} %"
    if record["budget_pct"] is not None:
        text += f" (budget {record['budget_pct']:g} %)"
    if off:
        text += "; left out: " + "; ".join(off)
    return text
