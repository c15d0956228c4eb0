"""Call-stack sampling of a Fortran MPI program (use mpi), built as Fortran codes are
(gfortran -g -O1 -fno-omit-frame-pointer): the report names its procedures as written in
the source (module procedure burn::heavy, external subroutine light, the main program
as "program burn7030", gfortran's MAIN__, the call tree's only root: gfortran's main is
left out) with file:line in the .f90 file, and splits the time between them as the
program measures it (70 % / 30 % of its CPU time; of the wall time on an idle machine).
The samples' analysis is read through the Python API (perfweave.open), the names in the
text report from it."""

from harness import by_name, reported_by_rank, sampled_life, share_bound, site_lines, tree_nodes

FFLAGS = ("-O1", "-fno-omit-frame-pointer", "-fno-inline")
SAMPLE = ["--sample", "--sample-interval-ms", "2", "--sample-capacity", "4000"]


def test_fortran_procedures_with_file_and_line(mpi, build, run_pw):
    prog = build(mpi, "burn7030.f90", FFLAGS)
    r = run_pw(mpi.launch(2) + [prog, 2], SAMPLE)
    assert r.proc.stdout == "done\n"
    exp = r.open()
    inc = by_name(exp.functions(inclusive=True))
    assert {"burn::heavy", "light", "burn::spin", "program burn7030"} <= set(inc)
    assert "MAIN__" not in inc and "main" not in inc
    assert not any("_MOD_" in name for name in inc)  # no gfortran symbols
    # the split of the program's own time (heavy + light; MPI_Init and MPI_Finalize
    # under the program are the rest) against the ranks' own measure of their wall time;
    # 3 binomial sd of the samples there + 2 points (harness.share_bound)
    heavy_s, light_s = (reported_by_rank(r.proc, fn) for fn in ("heavy", "light"))
    truth = 100 * sum(heavy_s.values()) / (sum(heavy_s.values()) + sum(light_s.values()))
    own = inc["burn::heavy"]["pct"] + inc["light"]["pct"]
    taken = own * len(exp.samples()) / 100
    assert inc["program burn7030"]["pct"] >= own
    assert abs(100 * inc["burn::heavy"]["pct"] / own - truth) <= share_bound(truth, taken), (
        inc["burn::heavy"],
        own,
        truth,
    )
    assert abs(100 * inc["light"]["pct"] / own - (100 - truth)) <= share_bound(
        100 - truth, taken
    ), (inc["light"], own, truth)
    # self time: the spin loop and its clock reads (burn::now, a system call: on a busy
    # machine the rank loses its core there more than anywhere, its wall time with it):
    # all of heavy's and light's but their calls
    fns = by_name(exp.functions())
    leaves = fns["burn::spin"]["pct"] + fns.get("burn::now", {"pct": 0})["pct"]
    assert leaves >= own - share_bound(own, len(exp.samples())), (leaves, own)
    # source lines in the .f90 file: the spin loop's line leads, or on a busy machine the
    # clock read's (above)
    sites = site_lines("burn7030.f90")
    top = exp.lines()["name"].iloc[0]
    at = int(top.rsplit(":", 1)[1].rstrip(")"))
    assert (
        top.startswith("burn::spin (burn7030.f90:") and abs(at - sites["spin"]) <= 2
    ) or top == f"burn::now (burn7030.f90:{sites['clock']})", top
    # the call tree: program burn7030 -> burn::heavy -> burn::spin, per rank, one root
    tree = tree_nodes(exp)
    assert [p[0] for p in tree if len(p) == 1] == ["program burn7030"]
    nodes = {p[-3:]: n for p, n in tree.items()}
    heavy = nodes[("program burn7030", "burn::heavy", "burn::spin")]
    assert abs(100 * heavy["inclusive_pct"] / own - truth) <= share_bound(truth, taken)
    # each rank's share by its own clock over its sampled life, the imbalance (max - mean)
    # / max anywhere within their bounds (both ranks do the same work)
    box = []
    for k in (0, 1):
        life, n = sampled_life(r.exp, k)
        share = 100 * heavy_s[k] / life
        box.append((share - share_bound(share, n), share + share_bound(share, n)))
    hi = 1 - sum(b[0] for b in box) / len(box) / max(b[1] for b in box)
    assert heavy["rank_min_pct"] > 0 and heavy["imbalance"] <= hi, (heavy, box)
    text = r.text_report()
    assert "burn::heavy" in text and "burn7030.f90:" in text
