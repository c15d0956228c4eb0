"""Activity over time per rank from the samples (report's samples.timeline) against
phases.c, whose three phases (compute, MPI_Allreduce loop, MPI_Sendrecv ring) it times
itself on the samples' clock (CLOCK_MONOTONIC, one node). The activity timeline's bins
are the report's alone (its sampling section, and its text lines): read from
`perfweave report --json`."""

import json
import statistics

from harness import reported_by_rank
from perfweave.analysis.timebins import MAX_BINS, MIN_SAMPLES_PER_BIN

SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]
PHASE_MS = 700


def test_phases_per_rank(mpi, build, run_pw):
    prog = build(mpi, "phases.c")
    r = run_pw(mpi.launch(3) + [prog, PHASE_MS], SAMPLE)
    phase = {}
    for line in r.proc.stdout.splitlines():
        if line.startswith("phase "):
            _, name, a, b = line.split()
            phase[name] = (int(a), int(b))
    assert set(phase) == {"compute", "coll", "p2p"}
    # each rank's own measure of its share of phase p2p in MPI_Sendrecv (the rest is the
    # MPI_Allreduce that ends each loop: a few % on an idle machine, 23 % seen for one
    # rank of MPICH beside other jobs)
    p2p_share = reported_by_rank(r.proc, "p2p_share")
    assert sorted(p2p_share) == [0, 1, 2], r.proc.stderr
    sm = r.report()["samples"]
    tl = sm["timeline"]
    # the bins' clock: ns since the node's first process started
    base = min(json.loads(p.read_text())["t_start"] for p in (r.exp / "samples").glob("*.json"))
    assert tl["ranks"] == [0, 1, 2]
    assert {"compute", "mpi_coll", "mpi_p2p"} <= set(tl["activities"])
    nbins = len(tl["edges_s"]) - 1
    # ~1000 samples per rank over ~2.5 s: 100 bins of ~25 ms, ~10 samples per rank each on
    # an idle machine; fewer where the ranks got fewer samples (a rank that waits for a
    # core is sampled when it runs again): MIN_SAMPLES_PER_BIN per rank and bin at least
    per_rank = statistics.median(sum(row) for row in tl["samples"])
    assert nbins == max(1, min(MAX_BINS, int(per_rank // MIN_SAMPLES_PER_BIN))), (nbins, per_rank)
    assert abs(tl["edges_s"][-1] - nbins * tl["bin_s"]) < 1e-6
    expected = {"compute": "compute", "coll": "mpi_coll", "p2p": "mpi_p2p"}
    for name, (a, b) in phase.items():
        lo, hi = (a - base) / 1e9, (b - base) / 1e9
        # bins wholly inside the phase, two bins of margin at each end (the ranks leave
        # a phase's last call at slightly different times; a descheduled rank gets its
        # pending sample late)
        inside = [
            k
            for k in range(nbins)
            if tl["edges_s"][k] >= lo + 2 * tl["bin_s"]
            and tl["edges_s"][k + 1] <= hi - 2 * tl["bin_s"]
        ]
        # the phase's bins, by its length on the program's clock, less the margins and a
        # bin cut at each end
        assert len(inside) >= (hi - lo) / tl["bin_s"] - 6, (name, inside)
        s = tl["activities"].index(expected[name])
        for j, rank in enumerate(tl["ranks"]):
            frac = [tl["fractions"][j][s][k] for k in inside]
            # a bin where a descheduled rank got no sample at all has no fraction (None);
            # on 2 shared cores that happens, rarely
            assert sum(f is None for f in frac) <= 0.1 * len(frac), (name, rank, frac)
            frac = [f for f in frac if f is not None]
            # a phase's activity holds the whole phase, but for phase p2p's Allreduces:
            # its share there is the rank's own measure, within 0.15
            share = p2p_share[rank] if name == "p2p" else 1.0
            assert sum(frac) / len(frac) > min(0.8, share - 0.15), (name, rank, share, frac)
            assert sum(f > share / 2 for f in frac) >= 0.8 * len(frac), (name, rank, frac)
    # the text report: the phases in order, each leading activity once at least
    text = r.text_report()
    assert "activity over time" in text
    lines = text[text.index("activity over time") :].splitlines()[1:]
    lines = lines[: lines.index("")] if "" in lines else lines  # its block, not later sections'
    # (the phases are lines "a-b s  ACTIVITY N %"; a short blip, such as the barrier
    # that lines the ranks up before the phases, may come first: the longest line of each
    # activity is its phase)
    longest = {}
    for ln in lines:
        for w in ("compute", "mpi coll", "mpi p2p"):
            if f" {w} " in ln:
                a, b = (float(x) for x in ln.split()[0].split("-"))
                if b - a > longest.get(w, (0, -1))[1]:
                    longest[w] = (a, b - a)
    starts = [longest[w][0] for w in ("compute", "mpi coll", "mpi p2p")]
    assert starts == sorted(starts), lines
