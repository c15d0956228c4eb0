"""The MPI-IO layer's forms, with Open MPI and with MPICH: reads, writes and opens counted
as independent, collective, split collective (once, at _begin) or nonblocking (once, at
the post), Darshan's MPIIO_INDEP_/COLL_/SPLIT_/NB_ counters; the views. The program knows
its calls per form by construction (io_mpiio_forms.c); the stores are read through
perfweave.open(...).io, the export through `perfweave export --format darshan`."""

import subprocess

import perfweave
from perfweave._format import IO_FORMS, IO_LAYERS
from harness import PERFWEAVE, rank_counts

# the program's calls per form and rank (io_mpiio_forms.c's comment)
WRITES = {"indep": 6, "coll": 4, "split": 3, "nb": 5}
READS = {"indep": 2, "coll": 1, "split": 1, "nb": 2}
NRANKS = 3


def mpiio(io, name):
    recs = io.records
    sel = (recs["file"] == io.files.index(name)) & (recs["layer"] == IO_LAYERS.index("mpiio"))
    return recs[sel]


def test_io_mpiio_forms_exact_rank_counts(mpi, build, run_pw, tmp_path):
    prog = build(mpi, "io_mpiio_forms.c")
    r = run_pw(mpi.launch(NRANKS) + [prog, tmp_path], ["--io"])
    got = rank_counts(r.proc.stdout)
    assert sorted(got) == list(range(NRANKS))
    io = perfweave.open(r.exp).io
    m = mpiio(io, f"{tmp_path}/forms.dat")
    assert sorted(m["rank"].tolist()) == list(range(NRANKS))
    for rec in m:
        g = got[int(rec["rank"])]
        for i, form in enumerate(IO_FORMS):
            assert rec["form_writes"][i] == g[f"{form}_writes"] == WRITES[form], form
            assert rec["form_reads"][i] == g[f"{form}_reads"] == READS[form], form
        assert rec["writes"] == sum(WRITES.values()) and rec["reads"] == sum(READS.values())
        assert rec["bytes_written"] == sum(g[f"{f}_written"] for f in IO_FORMS) == 1290
        assert rec["bytes_read"] == sum(g[f"{f}_read_bytes"] for f in IO_FORMS) == 556
        # opened on MPI_COMM_WORLD: one collective open
        assert dict(zip(IO_FORMS, rec["form_opens"].tolist())) == dict(
            indep=0, coll=1, split=0, nb=0
        )
        assert (rec["opens"], rec["closes"], rec["views"], rec["syncs"]) == (1, 1, 1, 1)
    for rank in range(NRANKS):
        # opened on MPI_COMM_SELF: an independent open, one independent write
        (s,) = mpiio(io, f"{tmp_path}/self.{rank}.dat")
        assert s["form_opens"].tolist() == [1, 0, 0, 0]
        assert s["form_writes"].tolist() == [1, 0, 0, 0] and s["bytes_written"] == 64

    # the report: one line of forms per MPI-IO file
    files = r.report()["io"]["files"]
    row = next(f for f in files if f["layer"] == "mpiio" and f["pattern"].endswith("forms.dat"))
    assert row["forms"] == {
        "opens": {"coll": NRANKS},
        "reads": {k: v * NRANKS for k, v in READS.items()},
        "writes": {k: v * NRANKS for k, v in WRITES.items()},
        "views": NRANKS,
    }
    text = subprocess.run(
        [PERFWEAVE, "report", "--full", str(r.exp)], check=True, capture_output=True, text=True
    ).stdout
    assert (
        f"MPI-IO {tmp_path}/forms.dat: opens 3 collective; reads 6 independent, 3 collective, "
        "3 split, 6 nonblocking; writes 18 independent, 12 collective, 9 split, 15 nonblocking; "
        "3 views" in text
    )

    # the Darshan-comparable export: MPI-IO's form counters are the program's
    out = tmp_path / "darshan.txt"
    cmd = [PERFWEAVE, "export", str(r.exp), "--format", "darshan", "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    rows = [x.split("\t") for x in out.read_text().splitlines() if x and not x.startswith("#")]
    name = f"{tmp_path}/forms.dat"
    for rank in range(NRANKS):
        c = {x[3]: x[4] for x in rows if x[0] == "MPI-IO" and x[1] == str(rank) and x[5] == name}
        want = {"MPIIO_INDEP_OPENS": 0, "MPIIO_COLL_OPENS": 1, "MPIIO_VIEWS": 1}
        want |= {"MPIIO_SYNCS": 1, "MPIIO_BYTES_WRITTEN": 1290, "MPIIO_BYTES_READ": 556}
        for form in IO_FORMS:
            want[f"MPIIO_{form.upper()}_READS"] = READS[form]
            want[f"MPIIO_{form.upper()}_WRITES"] = WRITES[form]
        assert {k: int(c[k]) for k in want} == want
