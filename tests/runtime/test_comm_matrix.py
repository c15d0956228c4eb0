"""The communication matrix (profile "comms" rows, runtime/modules/mpi.c; analysis/
comm_matrix.py) of programs/comm_matrix.c, whose messages are known by construction: exact
messages and bytes per sender and receiver in world ranks, per communicator (a
MPI_Comm_split's peers too), ANY_SOURCE receives by their source, Isend/Irecv, and the
collectives' bytes by their size formulas; the report's three forms and the compact
profile beside it. programs/comm_matrix_requests.c: receives whose source is known only at
their completion (MPI_Irecv from MPI_ANY_SOURCE completed by Waitall, Waitany, Test with
the statuses ignored), persistent requests, matched probes (Mprobe/Mrecv,
Improbe/Imrecv), one-sided Put and Get (fence and passive epochs) and the time of a
Sendrecv's receive against the program's own clock; programs/comm_matrix_anysrc.f90 the
same receives from Fortran."""

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


def pair_adder(want):
    """add(sender, receiver, messages, bytes) into want: (sender, receiver) -> [m, b]."""

    def add(s, d, msgs, nbytes):
        w = want.setdefault((s, d), [0, 0])
        w[0] += msgs
        w[1] += nbytes

    return add


def expected_world():
    """(sender, receiver) -> [messages, bytes] on MPI_COMM_WORLD."""
    want = {}
    add = pair_adder(want)
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
    of the same run is still written and decodes, its per-rank totals the full matrix's."""
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
    c = rd.decode(raw, "profile.pwcompact")
    assert c.world_size == N
    assert c.rank_comm[0].sum() == sum(p["bytes"] for p in d["p2p"] if p["sender"] >= 0)


def test_compact_only_matrix_summary(mpi, build, run_pw, matrix_run):
    """The same program with --full-profile-ranks 1 (the compact profile alone): its
    matrix summary's top pairs and per-rank totals equal, exactly, those of the full
    profile of the run without the option; perfweave.open and the report show them."""
    import perfweave

    full = perfweave.open(matrix_run.exp).comm_matrix()
    prof = read_profile(matrix_run.exp / "profile.pwprof")
    rows = prof.arrays["comms"]
    r = run_pw(mpi.launch(N) + [build(mpi, "comm_matrix.c")],
               options=["--full-profile-ranks", "1"])  # fmt: skip
    assert not (r.exp / "profile.pwprof").exists()
    exp = perfweave.open(r.exp)
    pairs = exp.comm_matrix()
    # every pair a sender names, by (sender, receiver, communicator group): the full
    # profile's matrix has fewer than the bound, so the summary holds them all
    full = full[full["sender"] >= 0].copy()  # the compact names a group by size and first
    full["comm_name"] = full["comm_name"].str.replace(r"^comm \d+ \((.*)\)$", r"comm (\1)",
                                                      regex=True)  # fmt: skip
    want = full.groupby(["sender", "receiver", "comm_name"])
    got = pairs.groupby(["sender", "receiver", "comm_name"])
    assert len(pairs) == len(want.size()) < 64
    assert want[["messages", "bytes"]].sum().to_dict() == got[["messages", "bytes"]].sum().to_dict()
    # the pairs most bytes first; the world's the program's known pattern
    assert list(pairs["bytes"]) == sorted(pairs["bytes"], reverse=True)
    world = pairs[pairs["comm_name"] == "MPI_COMM_WORLD"]
    assert {(s, d): [m, b] for s, d, m, b in world[["sender", "receiver", "messages", "bytes"]]
            .itertuples(index=False)} == expected_world()  # fmt: skip
    # per rank, exact: sent and received bytes and messages of its point-to-point rows
    totals = exp.comm_rank_totals().set_index("rank")
    for rank in range(N):
        mine = rows[rows["rank"] == rank]
        send, recv = mine[mine["dir"] == 0], mine[mine["dir"] == 1]
        assert totals.loc[rank].to_dict() == {
            "sent_bytes": send["bytes_sent"].sum(),
            "sent_messages": send["messages"].sum(),
            "recv_bytes": recv["bytes_recv"].sum(),
            "recv_messages": recv["messages"].sum(),
        }
    assert totals["sent_bytes"].sum() > 0
    m = r.report()["comm_matrix"]
    assert m["compact"] and len(m["pairs"]) == len(pairs) and len(m["ranks"]) == N
    text = r.text_report()
    assert "Communication matrix (compact profile" in text and "not available" in text


# ---- requests, matched probes, one-sided calls (programs/comm_matrix_requests.c) ----

NR = 4  # ranks
PERS = 3


def req_expected():
    """(sender, receiver) -> [messages, bytes] on MPI_COMM_WORLD, by the program's header."""
    want = {}
    add = pair_adder(want)
    for r in range(NR):
        nxt = (r + 1) % NR
        if r:
            add(r, 0, 3, 16 * (r + 1) + 24 * (r + 1) + 40 * (r + 1))  # Irecv ANY_SOURCE
            add(r, 0, PERS, PERS * (300 + 2 * r))  # to rank 0's persistent ANY_SOURCE
            add(r, 0, 2, (500 + r) + (600 + r))  # Mprobe/Mrecv, Improbe/Imrecv
        add(r, nxt, PERS, PERS * (200 + r))  # persistent ring
        add(r, nxt, 2, 8 * (r + 1) + 12 * (r + 1))  # Put, fence and passive
        add((r + 2) % NR, r, 1, 4 * (r + 1))  # Get: from its target
        add(r, nxt, 1, 700 + r)  # Sendrecv
    return want


@pytest.fixture
def requests_run(mpi, build, run_pw, runs):
    key = ("requests", mpi.name)
    if key not in runs:
        runs[key] = run_pw(mpi.launch(NR) + [build(mpi, "comm_matrix_requests.c")])
    return runs[key]


def recv_rows(run, rank):
    """{function: {peer: (messages, bytes_recv, seconds)}} of a rank's receive rows."""
    pf = read_profile(run.exp / "profile.pwprof")
    c, fns = pf.arrays["comms"], pf.header["functions"]
    out = {}
    for x in c[(c["dir"] == 1) & (c["rank"] == rank)]:
        out.setdefault(fns[x["fn"]], {})[int(x["peer"])] = (
            int(x["messages"]), int(x["bytes_recv"]), int(x["total_ns"]) / 1e9
        )  # fmt: skip
    return out


def test_requests_probes_and_one_sided_pairs_exact(requests_run):
    """Every pair of the world with its exact messages and bytes: ANY_SOURCE Irecvs,
    persistent sends and receives (one from ANY_SOURCE), matched probes, Put to the next
    rank and Get from the one after (counted from the origin alone), Sendrecv."""
    df = requests_run.open().comm_matrix()
    assert set(df["comm_name"]) == {"MPI_COMM_WORLD"}
    got = {(s, d): [m, b] for s, d, m, b in df[["sender", "receiver", "messages", "bytes"]]
           .itertuples(index=False)}  # fmt: skip
    assert got == req_expected()


def test_receives_named_at_completion(requests_run):
    """Rank 0's receive rows name each sender: MPI_Irecv from MPI_ANY_SOURCE completed by
    Waitall, Waitany and Test with the statuses ignored (3 messages each, the messages'
    bytes, not the 4 KiB buffers'), the persistent receive from MPI_ANY_SOURCE (started
    PERS times per sender, under its MPI_Recv_init beside the ring's), MPI_Mrecv and
    MPI_Imrecv under their probe's source; no receive row anywhere without its sender."""
    rows = recv_rows(requests_run, 0)
    counts = lambda fn: {p: v[:2] for p, v in rows[fn].items()}  # noqa: E731
    senders = range(1, NR)
    assert counts("MPI_Irecv") == {r: (3, 80 * (r + 1)) for r in senders}
    want = {r: (PERS, PERS * (300 + 2 * r)) for r in senders}
    want[NR - 1] = (2 * PERS, PERS * (300 + 2 * (NR - 1)) + PERS * (200 + NR - 1))  # and the ring's
    assert counts("MPI_Recv_init") == want
    assert counts("MPI_Mrecv") == {r: (1, 500 + r) for r in senders}
    assert counts("MPI_Imrecv") == {r: (1, 600 + r) for r in senders}
    for r in range(NR):
        assert all(p >= 0 for v in recv_rows(requests_run, r).values() for p in v), r


def test_one_sided_rows_by_origin(requests_run):
    """MPI_Put: the origin's send rows to the next rank, 2 per rank (fence and passive
    target epochs); MPI_Get: its receive row from the rank after next."""
    df = requests_run.open().comm_matrix()
    for r in range(NR):
        rows = recv_rows(requests_run, r)
        assert {p: v[:2] for p, v in rows["MPI_Get"].items()} == {(r + 2) % NR: (1, 4 * (r + 1))}
    pf = read_profile(requests_run.exp / "profile.pwprof")
    c, fns = pf.arrays["comms"], pf.header["functions"]
    put = c[np.array([fns[f] == "MPI_Put" for f in c["fn"]])]
    got = {(int(x["rank"]), int(x["peer"])): (int(x["messages"]), int(x["bytes_sent"]))
           for x in put}  # fmt: skip
    assert got == {(r, (r + 1) % NR): (2, 20 * (r + 1)) for r in range(NR)}
    assert len(df) == len(req_expected())


def test_sendrecv_receive_time_by_the_programs_clock(requests_run):
    """A Sendrecv's receive half carries the call's time (it was 0): each rank's receive
    row from its previous rank equals its send row's time and the time the program
    measured around the call (MPI_Wtime), less than 1 ms apart, minus up to 10 %+5 ms of
    preemption between the program's clock and the wrapper's; odd ranks wait for a
    partner that slept 100 ms."""
    own = {}
    for line in requests_run.proc.stdout.splitlines():
        if line.startswith("sendrecv "):
            _, r, t = line.split()
            own[int(r)] = float(t)
    assert sorted(own) == list(range(NR))
    df = requests_run.open().comm_matrix()
    for r in range(NR):
        prev = (r - 1) % NR
        recv_s = recv_rows(requests_run, r)["MPI_Sendrecv"][prev][2]
        pair = df[(df["sender"] == prev) & (df["receiver"] == r)].iloc[0]
        assert pair["recv_s"] >= recv_s  # the pair's receive time includes the Sendrecv's
        assert 0.9 * own[r] - 0.005 <= recv_s <= own[r] + 0.001, (r, recv_s, own[r])
        if r % 2:
            assert recv_s > 0.05, (r, recv_s)


def test_fortran_receives_from_any_source(mpi, build, run_pw):
    """Fortran (use mpi): MPI_Irecv from MPI_ANY_SOURCE completed by MPI_Waitall with
    MPI_STATUSES_IGNORE and by MPI_Wait with MPI_STATUS_IGNORE, and MPI_Recv from
    MPI_ANY_SOURCE with MPI_STATUS_IGNORE: every receive under its sender, with the
    message's bytes (4-byte integers)."""
    run = run_pw(mpi.launch(NR) + [build(mpi, "comm_matrix_anysrc.f90")])
    rows = recv_rows(run, 0)
    senders = range(1, NR)
    assert {p: v[:2] for p, v in rows["MPI_Irecv"].items()} == {
        r: (2, 4 * (10 * (r + 1) + 20 + r)) for r in senders
    }
    assert {p: v[:2] for p, v in rows["MPI_Recv"].items()} == {
        r: (1, 4 * (30 + 2 * r)) for r in senders
    }
    df = run.open().comm_matrix()
    got = {(s, d): [m, b] for s, d, m, b in df[["sender", "receiver", "messages", "bytes"]]
           .itertuples(index=False)}  # fmt: skip
    assert got == {(r, 0): [3, 4 * (10 * (r + 1) + 20 + r + 30 + 2 * r)] for r in senders}
