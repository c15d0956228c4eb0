"""The communication matrix (profile "comms" rows, runtime/modules/mpi.c; analysis/
comm_matrix.py) of programs/comm_matrix.c, whose messages are known by construction: exact
messages and bytes per sender and receiver in world ranks, per communicator (a
MPI_Comm_split's peers too), ANY_SOURCE receives by their source, Isend/Irecv, and the
collectives' bytes by their size formulas; the report's three forms and the compact
profile beside it."""

from collections import Counter

import numpy as np
import pytest

from perfweave.readers import compact as rd
from perfweave.readers.profile import read_profile

N = 5
RING, NB = 3, 2  # the program's constants (its header comment)


def ring_bytes(r):
    return 100 * (r + 1)


def nb_bytes(r):
    return 64 * (r + 1)


def any_bytes(r):
    return 8 * (r + 1)


def split_bytes(r):
    return 1000 + r


def expected_world():
    """(sender, receiver) -> [messages, bytes] on MPI_COMM_WORLD."""
    want = {}

    def add(s, d, msgs, nbytes):
        w = want.setdefault((s, d), [0, 0])
        w[0] += msgs
        w[1] += nbytes

    for r in range(N):
        add(r, (r + 1) % N, RING, RING * ring_bytes(r))
        add(r, (r + 2) % N, NB, NB * nb_bytes(r))
        if r:
            add(r, 0, 1, any_bytes(r))
    return want


def parts():
    """MPI_Comm_split(color r % 2, key -r): each part's world ranks in its rank order."""
    return [sorted((r for r in range(N) if r % 2 == c), reverse=True) for c in (0, 1)]


@pytest.fixture(scope="module")
def runs():
    return {}


@pytest.fixture
def matrix_run(mpi, build, run_pw, runs):
    if mpi.name not in runs:
        runs[mpi.name] = run_pw(mpi.launch(N) + [build(mpi, "comm_matrix.c")])
    return runs[mpi.name]


def test_p2p_pairs_exact(matrix_run):
    """Every (communicator, sender, receiver) in world ranks with its exact messages and
    bytes: the world's ring, Isend pairs and ANY_SOURCE sends; each split part's
    Sendrecv ring named by world ranks, its communicator by size and first world rank."""
    df = matrix_run.open().comm_matrix()
    world = df[df["comm_name"] == "MPI_COMM_WORLD"]
    got = {(s, d): [m, b] for s, d, m, b in world[["sender", "receiver", "messages", "bytes"]]
           .itertuples(index=False)}  # fmt: skip
    assert got == expected_world()
    for members in parts():
        k = len(members)
        name = f"({k} ranks from world rank {members[0]})"
        sub = df[df["comm_name"].str.endswith(name)]
        got = {(s, d): [m, b] for s, d, m, b in sub[["sender", "receiver", "messages", "bytes"]]
               .itertuples(index=False)}  # fmt: skip
        want = {(members[i], members[(i + 1) % k]): [1, split_bytes(members[i])] for i in range(k)}
        assert got == want, name
    assert len(set(df["comm_name"])) == 3  # the world and the two parts
    assert (df["sender_host"] != "").all() and (df["receiver_host"] != "").all()


def test_receivers_rows(matrix_run):
    """The receivers' own rows: rank 0's MPI_Recv from MPI_ANY_SOURCE (status ignored by
    the program) under each sender's world rank with the message's bytes, not the
    8 KiB buffer's; Irecv rows under their explicit source; the Sendrecv's receive half
    under the world rank of the part's previous member; no unknown peer anywhere."""
    pf = read_profile(matrix_run.exp / "profile.pwprof")
    assert pf.header["version"] >= 6
    c, fns = pf.arrays["comms"], pf.header["functions"]
    recv = c[(c["dir"] == 1)]
    assert (recv["peer"] >= 0).all()

    def rows(rank, fn):
        sel = recv[(recv["rank"] == rank) & (np.array([fns[f] for f in recv["fn"]]) == fn)]
        return {int(x["peer"]): (int(x["messages"]), int(x["bytes_recv"])) for x in sel}

    want0 = {r: (1, any_bytes(r)) for r in range(1, N)}
    want0[N - 1] = (1 + RING, any_bytes(N - 1) + RING * ring_bytes(N - 1))  # the ring's too
    assert rows(0, "MPI_Recv") == want0
    for r in range(N):
        src = (r - 2) % N
        assert rows(r, "MPI_Irecv") == {src: (NB, NB * nb_bytes(src))}
    for members in parts():
        for i, r in enumerate(members):
            prev = members[i - 1]
            assert rows(r, "MPI_Sendrecv") == {prev: (1, split_bytes(prev))}
    # a send's count equals the sites' calls of the sends (a Sendrecv's send half included)
    sites = pf.arrays["sites"]
    for r in range(N):
        calls = sum(int(s["count"]) for s in sites[sites["rank"] == r]
                    if fns[s["fn"]] in ("MPI_Send", "MPI_Isend", "MPI_Sendrecv"))  # fmt: skip
        assert int(c[(c["rank"] == r) & (c["dir"] == 0)]["messages"].sum()) == calls


def test_collectives_by_size_formula(matrix_run):
    """One row per (communicator, collective, rank): MPI_Allreduce of 16 ints on the
    world, 64 bytes each way on every rank; each part's MPI_Bcast of 25 ints, 100 bytes
    sent by its root (sub-rank 0: the part's highest world rank), received by the others."""
    df = matrix_run.open().comm_matrix(collectives=True)
    ar = df[df["function"] == "MPI_Allreduce"]
    assert sorted(ar["rank"]) == list(range(N)) and set(ar["comm_name"]) == {"MPI_COMM_WORLD"}
    assert (ar["calls"] == 1).all() and (ar["bytes_sent"] == 64).all()
    assert (ar["bytes_recv"] == 64).all()
    bc = df[df["function"] == "MPI_Bcast"]
    assert sorted(bc["rank"]) == list(range(N))
    for members in parts():
        for r in members:
            row = bc[bc["rank"] == r].iloc[0]
            root = r == members[0]
            assert (row["bytes_sent"], row["bytes_recv"]) == ((100, 0) if root else (0, 100))
            assert row["comm_name"].endswith(f"({len(members)} ranks from world rank {members[0]})")


def test_report_forms_and_compact(matrix_run):
    """--json holds the whole matrix; the text report its top pairs; the compact profile
    of the same run is still written and decodes (the matrix is not in it)."""
    d = matrix_run.report()["comm_matrix"]
    world = next(c for c in d["communicators"] if c["name"] == "MPI_COMM_WORLD")
    pairs = Counter()
    for p in d["p2p"]:
        if p["comm"] == world["id"]:
            pairs[(p["sender"], p["receiver"])] += p["bytes"]
    assert dict(pairs) == {k: v[1] for k, v in expected_world().items()}
    text = matrix_run.text_report()
    assert "Communication matrix" in text and "MPI_Allreduce" in text
    raw = (matrix_run.exp / "profile.pwcompact").read_bytes()
    assert rd.decode(raw, "profile.pwcompact").world_size == N
