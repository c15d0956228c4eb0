"""The summary's sentences, written once for the text and the HTML report so that both
say the same numbers in the same words (the JSON has the values: report/data.py).
Every percentage names what it is of: the app time (MPI_Init's return to MPI_Finalize's
entry), the samples (all of them, start-up and shutdown included), or the samples in
the app time."""


def duration(seconds):
    """Seconds as the report writes them: 3 decimals in the unit that fits (s, ms, us)."""
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


def _of_samples(su, phase):
    pct = (su.get("samples_pct") or {}).get(phase)
    return f" ({pct:.1f} % of the samples)" if pct is not None else ""


# the program's own time before MPI_Init is named from this much on (below it is the
# loader's and the constructors' few ms)
BEFORE_INIT_SHOWN_S = 0.1


def startup(data):
    """The start-up line (analysis/phases.py): time in MPI_Init and from MPI_Finalize to
    exit per rank (max, mean); None without MPI start-up times. It follows the app time,
    the line they are apart from."""
    su = data.get("startup")
    if not su:
        return None
    init, fini, before = su["init_s"], su["shutdown_s"], su["before_init_s"]
    out = (
        f"MPI_Init {duration(init['max'])} max, {duration(init['mean'])} mean per rank"
        f"{_of_samples(su, 'init')}; shutdown (after MPI_Finalize) "
    )
    out += (
        f"{duration(fini['max'])} max, {duration(fini['mean'])} mean{_of_samples(su, 'shutdown')}"
        if fini
        else "not measured (no samples)"
    )
    if before and before["max"] >= BEFORE_INIT_SHOWN_S:
        out += f"; before MPI_Init {duration(before['max'])} max{_of_samples(su, 'before_init')}"
    return out


def time_split(data):
    """The split of the app time by the samples in it (compute and MPI always, I/O,
    threads and sleep/wait when not 0.0), with its denominator; None without samples."""
    sm = data.get("samples") or {}
    split = sm.get("time_split")
    if not split:
        return (
            f"not split: none of the {sm['samples']} samples is in the app time"
            if sm.get("samples") and "phase_pct" in sm
            else None
        )
    of = (
        f"of the {sm['app_samples']} samples in the app time"
        if "phase_pct" in sm
        else "of the samples"
    )
    return (
        ", ".join(
            f"{k} {v:.1f} %" for k, v in split.items() if k in ("compute", "MPI") or round(v, 1)
        )
        + f" ({of})"
    )


def app_time(m):
    """The app time over ranks (the MPI profile m)."""
    a = m["app_time_s"]
    return (
        f"{duration(a['mean'])} mean, {duration(a['min'])} min, "
        f"{duration(a['max'])} max (MPI_Init to MPI_Finalize)"
    )


def mpi_share(m):
    """MPI's share of each rank's app time, over ranks (the MPI profile)."""
    p = m["mpi_pct"]
    return (
        f"{p['mean']:.1f} % mean, {p['min']:.1f} % min, {p['max']:.1f} % max "
        "of each rank's app time"
    )


def region(m):
    """The MPI_Pcontrol region of interest (the MPI profile m), or None without one."""
    g = m.get("region")
    if not g:
        return None
    n = g["intervals"]
    return (
        f"MPI_Pcontrol, {n} interval{'s' if n != 1 else ''}, {duration(g['region_s'])} "
        f"of {duration(g['app_s'])} (longest rank's)"
    )
