"""Plain-text rendering of report data (report/data.py)."""


def _t(seconds):
    s = abs(seconds)
    if s >= 100:
        return f"{seconds:.1f}s"
    if s >= 1:
        return f"{seconds:.3f}s"
    if s >= 1e-3:
        return f"{seconds * 1e3:.3f}ms"
    if s > 0:
        return f"{seconds * 1e6:.1f}us"
    return "0"


def _b(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


def _table(rows, header, align=None):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(header)]
    align = align or ["<"] + [">"] * (len(header) - 1)
    fmt = "  ".join(f"{{:{a}{w}}}" for a, w in zip(align, widths))
    out = ["  " + fmt.format(*header).rstrip()]
    out += ["  " + fmt.format(*[str(c) for c in r]).rstrip() for r in rows]
    return out


def render(data):
    m = data["mpi_profile"]
    top = m.get("top", 20)
    out = [f"perfweave report: {data['experiment']}"]
    out.append(f"  command    {' '.join(data['command'])}")
    status = data.get("exit_status") or {}
    exit_text = (f"killed by signal {status['signal']}" if "signal" in status
                 else f"exit code {status.get('code', '?')}")
    if data.get("wall_s") is not None:
        out.append(f"  wall time  {_t(data['wall_s'])} (launch to exit, {exit_text})")
    if m["mpi"]:
        hosts = m["hosts"]
        out.append(f"  ranks      {m['ranks']}"
                   + (f" of {m['world_size']}" if m["world_size"] != m["ranks"] else "")
                   + f" on {len(hosts)} host{'s' if len(hosts) != 1 else ''}"
                   + (f" ({', '.join(hosts[:4])}{', ...' if len(hosts) > 4 else ''})"))
        lib = m["mpi_library"].split(",")[0] if m["mpi_library"] else "?"
        out.append(f"  MPI        {lib} (perfweave runtime: {m['mpi_flavor']})")
        a = m["app_time_s"]
        out.append(f"  app time   {_t(a['mean'])} mean, {_t(a['min'])} min, {_t(a['max'])} max "
                   "(MPI_Init to MPI_Finalize)")
    else:
        out.append("  MPI        not used (one process without MPI)")
    out.append(f"  state      {data['state']}")
    split = (data.get("sampling") or {}).get("time_split")
    if split:
        out.append("  time       " + ", ".join(f"{k} {v:.1f} %" for k, v in split.items())
                   + " (of the samples)")
    for note in data["notes"]:
        out.append(f"  note       {note}")
    out += _sampling(data)
    if data.get("advice"):
        out += ["", "Advice"]
        for a in data["advice"]:
            out += _wrap(a["text"])
    if not m["mpi"]:
        return "\n".join(out + _timeline(data)) + "\n"

    # ---- time in MPI per rank ----
    out += ["", "MPI time per rank"]
    rows = m["per_rank"]
    shown = rows if len(rows) <= 32 else sorted(rows, key=lambda r: -r["mpi_pct"])[:16]
    out += _table([[r["rank"], r["host"], _t(r["app_s"]), _t(r["mpi_s"]), f"{r['mpi_pct']:.2f}",
                    f"{r['outside_pct']:.2f}", r["calls"]] for r in shown],
                  ["rank", "host", "app", "MPI", "MPI%", "outside%", "calls"],
                  [">", "<", ">", ">", ">", ">", ">"])
    if len(rows) > 32:
        out.append(f"  ({len(rows) - 16} ranks with less MPI time not shown; see --json)")
    mp, op = m["mpi_pct"], m["outside_mpi_pct"]
    out.append(f"  MPI%: min {mp['min']:.2f}  mean {mp['mean']:.2f}  max {mp['max']:.2f}  "
               f"stdev {mp['stdev']:.2f}")
    out.append(f"  outside MPI: Avg/Max {m['outside_mpi_s']['avg_over_max']:.2f} "
               "(1.00 = perfectly balanced computation)")

    # ---- Extrae-style balance table ----
    fns = m["functions"][:min(top, 8)]
    if fns:
        out += ["", "Balance: % of each rank's app time (across ranks)"]
        cols = [("Outside MPI", op)] + [(f["name"], f["pct_of_app_per_rank"]) for f in fns]
        header = [""] + [c[0] for c in cols]
        stat_rows = []
        for label, key in (("Average", "mean"), ("Maximum", "max"), ("Minimum", "min"),
                           ("StDev", "stdev")):
            stat_rows.append([label] + [f"{c[1][key]:.2f}%" for c in cols])
        stat_rows.append(["Avg/Max"] + [f"{c[1]['avg_over_max']:.2f}" for c in cols])
        out += _table(stat_rows, header)

    # ---- functions ----
    out += ["", "MPI functions by time"]
    out += _table([[f["name"], f["calls"], _t(f["time_s"]), f"{f['app_pct']:.2f}",
                    f"{f['mpi_pct']:.2f}", _b(f["bytes_sent"]), _b(f["bytes_recv"]),
                    _b(f["mean_bytes"])] for f in m["functions"][:top]],
                  ["function", "calls", "time", "App%", "MPI%", "sent", "received", "avg size"])
    if len(m["functions"]) > top:
        out.append(f"  ({len(m['functions']) - top} more; --top N)")

    # ---- call sites ----
    out += ["", "MPI call sites by time (time summed over ranks; COV of per-rank time)"]
    out += _table([[c["id"], c["function"], c["where"], c["calls"], _t(c["time_s"]),
                    _t(c["mean_s"]), _t(c["max_s"]), f"{c['app_pct']:.2f}",
                    f"{c['mpi_pct']:.2f}", f"{c['cov']:.2f}", c["ranks"]]
                   for c in m["callsites"][:top]],
                  ["id", "function", "location", "calls", "time", "mean", "max", "App%", "MPI%",
                   "COV", "ranks"],
                  [">", "<", "<", ">", ">", ">", ">", ">", ">", ">", ">"])
    deep = [c for c in m["callsites"][:top] if c["stack_where"]]
    for c in deep:
        out.append(f"  site {c['id']} called from: " + " <- ".join(c["stack_where"]))
    if m["callsites_total"] > top:
        out.append(f"  ({m['callsites_total'] - top} more call sites; --top N)")

    # ---- counters (--counters) ----
    if m.get("counters"):
        evs = m["counters"]
        out += ["", "Counters per call site (summed over ranks; inside the calls / before them, "
                "since the thread's previous MPI call)"]
        header = ["id", "function", "location"]
        for ev in evs:
            header += [f"{ev} in", f"{ev} before"]
        out += _table([[c["id"], c["function"], c["where"]] +
                       [x for ev in evs for x in (c["counters"][ev]["inside"],
                                                  c["counters"][ev]["before"])]
                       for c in m["callsites"][:top] if "counters" in c],
                      header, [">", "<", "<"] + [">"] * (2 * len(evs)))
        rated = [c for c in m["callsites"][:top] if "counters_time_s" in c]
        if rated:
            out += ["", "Counter rates per call site (per second of the time the counts cover: "
                    "inside the calls / before them)"]
            header = ["id", "function", "location", "s in", "s before"]
            for ev in evs:
                header += [f"{ev}/s in", f"{ev}/s before"]
            out += _table([[c["id"], c["function"], c["where"],
                            f"{c['counters_time_s']['inside']:.3g}",
                            f"{c['counters_time_s']['before']:.3g}"] +
                           [_rate(c["counters"][ev].get(f"{k}_per_s"))
                            for ev in evs for k in ("inside", "before")] for c in rated],
                          header, [">", "<", "<"] + [">"] * (2 + 2 * len(evs)))
        out += ["", "Counters per rank (inside and between MPI calls, MPI_Init to MPI_Finalize)"]
        out += _table([[r["rank"]] + [r["counters"][ev] for ev in evs] for r in m["per_rank"]
                       if "counters" in r], ["rank"] + evs, [">"] * (1 + len(evs)))

    # ---- wait states (perfweave analyze) ----
    ws = data.get("wait_states")
    if ws and ws.get("error"):
        out += ["", f"Wait states: not shown ({ws['error']})"]
    elif ws:
        out += ["", "Wait states (perfweave analyze" +
                ("" if ws["complete"] else "; incomplete, see its notes") + ")"]
        if ws["patterns"]:
            out += _table([[p["name"], _t(p["time_s"]), f"{p['pct']:.2f}", p["callpath"]]
                           for p in ws["patterns"]],
                          ["pattern", "time", "%", "largest at"], ["<", ">", ">", "<"])
        else:
            out.append("  none found")

    # ---- message sizes ----
    sizes = [s for s in m["message_sizes"] if s["calls"]]
    if sizes:
        out += ["", "Message sizes (bytes per call; p2p, collectives, one-sided)"]
        sizes.sort(key=lambda s: (s["function"], s["bucket"]))
        out += _table([[s["function"], ("0" if not s["bucket"] else
                                         f"{_b(s['min_bytes'])}-{_b(s['max_bytes'])}"
                                         if s["max_bytes"] is not None
                                         else f">={_b(s['min_bytes'])}"), s["calls"], _b(s["bytes"]), _t(s["time_s"])]
                       for s in sizes],
                      ["function", "size", "calls", "bytes", "time"])
    return "\n".join(out + _timeline(data)) + "\n"


def _timeline(data):
    tl = data.get("node_timeline")
    if not tl:
        return []
    from perfweave.report.timeline import render
    return render(tl, _table)


def _wrap(text, width=88):
    """One advice item: '  - ' and the text wrapped under it."""
    import textwrap
    return textwrap.wrap(text, width, initial_indent="  - ", subsequent_indent="    ",
                         break_on_hyphens=False)


def _activity(name):
    """An activity's name as the report shows it (analysis/sampling.py ACTIVITIES)."""
    return {"io": "I/O", "alloc": "allocation", "thread_sync": "thread sync"}.get(
        name, name.replace("_", " "))


def _rate(x):
    """A counter rate per second, three digits and an SI prefix."""
    if x is None:
        return "-"
    for div, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {p}"
    return f"{x:.3g}"


def _sampling(data):
    sm = data.get("sampling")
    if not sm:
        return []
    if sm.get("error"):
        return ["", f"Sampled time: not shown ({sm['error']})"]
    act = ", ".join(f"{_activity(k)} {v:.1f} %" for k, v in sm["activity_pct"].items()
                    if v > 0)
    out = ["", f"Where the time goes ({sm['samples']} samples of {sm['processes']} processes; "
               f"{act})"]
    drop = sm.get("dropped") or {}
    if any(drop.values()):
        out.append(f"  threads not sampled: {drop['threads']} (more than the runtime's table), "
                   f"{drop['timers']} (no timer), {drop['memory']} (no memory)")
    tree = sm.get("call_tree") or []
    if tree:
        evs = sm.get("counters") or []
        out.append("  call tree (inclusive % / self %" +
                   (", [per rank min-max %]" if len(sm["ranks"]) > 1 else "") +
                   (f", {{{', '.join(evs)} inclusive}}" if evs else "") + "):")
        for n in tree[:30]:
            out.append(f"  {n['inclusive_pct']:6.1f} {n['exclusive_pct']:6.1f}  "
                       f"{'  ' * n['depth']}{n['name']}"
                       + (f"   [{n['per_rank_pct']['min']:.0f}-{n['per_rank_pct']['max']:.0f}]"
                          if len(sm["ranks"]) > 1 else "")
                       + (" {" + ", ".join(str(n["counters_inclusive"].get(ev, 0))
                                           for ev in evs) + "}"
                          if evs and "counters_inclusive" in n else ""))
        if len(tree) > 30:
            out.append(f"  ({len(tree) - 30} more nodes; see --json)")
    for title, key in (("functions (self)", "functions"), ("source lines (self)", "lines"),
                       ("functions (inclusive)", "inclusive")):
        rows = sm[key][:10]
        if not rows:
            continue
        evs = sm.get("counters") or []
        out += _table([[f"{r['pct']:.1f}", r["name"],
                        ", ".join(f"{_activity(k)} {v:.0f}" for k, v in
                                  r["by_state_pct"].items()),
                        f"{r['per_rank_pct']['min']:.1f}/{r['per_rank_pct']['mean']:.1f}/"
                        f"{r['per_rank_pct']['max']:.1f}", f"{r['imbalance']:.2f}"] +
                       [r.get("counters", {}).get(ev, 0) for ev in evs]
                       for r in rows],
                      ["%", title, "by activity (%)", "per rank min/mean/max %", "imbalance"]
                      + evs, [">", "<", "<", ">", ">"] + [">"] * len(evs))
    return out + _activity_phases(sm.get("timeline"))


def _activity_phases(tl, most=12):
    """The phases of the activity over time (bins with the same leading activity, mean
    over ranks, merged): the `most` longest, in time order."""
    phases = (tl or {}).get("phases") or []
    if not phases:
        return []
    shown = sorted(sorted(phases, key=lambda p: p["start_s"] - p["end_s"])[:most],
                   key=lambda p: p["start_s"])
    out = [f"  activity over time (leading activity, mean over ranks; "
           f"{len(tl['edges_s']) - 1} bins of {_t(tl['bin_s'])}):"]
    out += [f"  {p['start_s']:8.2f}-{p['end_s']:.2f} s  {p['activity'].replace('_', ' ')} "
            f"{p['pct']:.0f} %" for p in shown]
    if len(phases) > most:
        out.append(f"  ({len(phases) - most} shorter phases not shown; see --json)")
    return out

