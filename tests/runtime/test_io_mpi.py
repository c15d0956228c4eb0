"""The I/O profile under MPI, with Open MPI and with MPICH: the MPI-IO layer that the MPI
module's MPI_File_* wrappers report to the io module (pw_hooks.file_call), beside the POSIX
layer beneath it, never subtracted from it. The programs know their own I/O by
construction (bytes, calls per rank); the stores are read through perfweave.open(...).io."""

import numpy as np

import perfweave
from perfweave._format import IO_LAYERS


def per_rank(stdout):
    """{rank: {key: value}} of lines 'rank R KEY VALUE'."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "rank":
            out.setdefault(int(parts[1]), {})[parts[2]] = int(parts[3])
    return out


def layer_records(io, name, layer):
    f = io.files.index(name)
    recs = io.records
    return recs[(recs["file"] == f) & (recs["layer"] == IO_LAYERS.index(layer))]


def test_io_mpiio_collective_writes_exact_per_rank(mpi, build, run_pw, tmp_path):
    prog = build(mpi, "io_mpiio.c")
    n, nranks = 20, 3
    r = run_pw(mpi.launch(nranks) + [prog, tmp_path, n], ["--io"])
    got = per_rank(r.proc.stdout)
    assert sorted(got) == list(range(nranks))
    # the _c large-count forms: MPICH 4's mpi.h has them, Open MPI 4.1's does not
    assert {g["has_c"] for g in got.values()} == {1 if mpi.name == "mpich" else 0}
    io = perfweave.open(r.exp).io
    name = f"{tmp_path}/mpiio.dat"
    m = layer_records(io, name, "mpiio")
    assert sorted(m["rank"].tolist()) == list(range(nranks))
    for rec in m:
        g = got[int(rec["rank"])]
        ints = (int(rec["rank"]) + 1) * 16
        assert (rec["bytes_written"], rec["writes"]) == (g["written"], g["writes"])
        assert (rec["bytes_read"], rec["reads"]) == (g["read"], g["reads"]) == (n * ints * 4, n)
        assert (rec["opens"], rec["closes"], rec["seeks"]) == (1, 1, 1)
        # the _at offsets reach the record as bytes of the file (the default view)
        assert rec["max_byte_written"] == g["last_byte"]
        # write_at_all: n calls of ints * 4 bytes, in the size bins (0-100, 100-1K)
        assert rec["size_write"][0 if ints * 4 <= 100 else 1] >= n
    # the POSIX layer beneath is shown too: the MPI library's own writes of the same file
    # (by the aggregators of collective buffering, so per rank they differ), at least
    # every byte the MPI-IO layer wrote, summed over the ranks
    p = layer_records(io, name, "posix")
    assert len(p) >= 1
    assert p["bytes_written"].sum() >= m["bytes_written"].sum() > 0
    # the call sites of the MPI-IO layer are the program's own lines
    sites = io.sites[
        (io.sites["file"] == io.files.index(name)) & (io.sites["layer"] == IO_LAYERS.index("mpiio"))
    ]
    assert int(sites["count"].sum()) == int(
        (m["opens"] + m["closes"] + m["seeks"] + m["writes"] + m["reads"]).sum()
    )
    assert {io.objects[o] for o in sites["object"] if o >= 0} == {str(prog)}
    assert np.all(sites["object"] >= 0)
