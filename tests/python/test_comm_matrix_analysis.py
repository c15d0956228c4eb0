"""The communication matrix's analysis (analysis/comm_matrix.py) on hand-made rows: the
runtime's group hash, the pairs from senders' and receivers' rows (an unknown sender
counted from the receiver), the heat map by host above HEAT_RANKS ranks, and a profile
without a "comms" array (files before version 6): no matrix, NoData from the API."""

import re

import numpy as np
import pytest

import perfweave
from perfweave.analysis.comm_matrix import COLL, RECV, SEND, analyze, group_hash, world_matrix
from perfweave.dtypes import COMM_DTYPE
from perfweave.errors import NoData
from perfweave.model.profile import Profile
from perfweave.report.section import View
from perfweave.report.sections import comm_matrix as section

FUNCS = ["MPI_Send", "MPI_Recv", "MPI_Allreduce", "MPI_Get"]
FAMILIES = ["p2p", "p2p", "coll", "rma"]


def profile(n, rows, hosts=("a", "b")):
    ranks = [{"rank": r, "host": r * len(hosts) // n} for r in range(n)]
    p = Profile.from_literal(FUNCS, FAMILIES, ranks, hosts=hosts)
    c = np.zeros(len(rows), COMM_DTYPE)
    world = group_hash(range(n))
    for i, d in enumerate(rows):
        d = dict(comm_hash=world, comm_size=n, comm_first=0, **d)
        d["fn"] = FUNCS.index(d["fn"])
        for k, v in d.items():
            c[i][k] = v
    p.comms = c
    return p


def test_group_hash_is_fnv1a_of_world_ranks():
    # FNV-1a 64 of the 32-bit values 0, 1 (each xor'ed in whole, as mpi.c does)
    h = 0xCBF29CE484222325
    for r in (0, 1):
        h = ((h ^ r) * 0x100000001B3) % (1 << 64)
    assert group_hash([0, 1]) == h - (1 << 64) * (h >= 1 << 63)
    assert group_hash([1, 0]) != group_hash([0, 1])  # rank order matters


def test_pairs_from_senders_and_unknown_senders_from_receivers():
    p = profile(
        4,
        [
            dict(rank=0, peer=1, fn="MPI_Send", dir=SEND, messages=3, bytes_sent=300, total_ns=5),
            dict(rank=1, peer=0, fn="MPI_Recv", dir=RECV, messages=3, bytes_recv=300, total_ns=7),
            dict(rank=2, peer=-2, fn="MPI_Recv", dir=RECV, messages=2, bytes_recv=16),
            dict(
                rank=3,
                peer=-1,
                fn="MPI_Allreduce",
                dir=COLL,
                messages=1,
                bytes_sent=8,
                bytes_recv=8,
            ),  # fmt: skip
        ],
    )
    m = analyze(p)
    assert [c["name"] for c in m["communicators"]] == ["MPI_COMM_WORLD"]
    pairs = {(x["sender"], x["receiver"]): x for x in m["p2p"]}
    assert (pairs[(0, 1)]["messages"], pairs[(0, 1)]["bytes"]) == (3, 300)
    assert (pairs[(0, 1)]["send_s"], pairs[(0, 1)]["recv_s"]) == (5e-9, 7e-9)
    assert (pairs[(-2, 2)]["messages"], pairs[(-2, 2)]["bytes"]) == (2, 16)
    assert m["collectives"] == [
        {
            "comm": 0,
            "function": "MPI_Allreduce",
            "rank": 3,
            "calls": 1,
            "bytes_sent": 8,
            "bytes_recv": 8,
            "time_s": 0.0,
        }  # fmt: skip
    ]
    w = world_matrix(m)
    assert w[0, 1] == 300 and w.sum() == 300  # the unknown sender is left out
    assert m["hosts"] == {"0": "a", "1": "a", "2": "b", "3": "b"}


def test_one_sided_receives_count_beside_sends():
    """An MPI_Get's row is its origin's receive from the target: the pair (target ->
    origin) counts it even where the target's own sends name the same pair."""
    p = profile(
        2,
        [
            dict(rank=1, peer=0, fn="MPI_Send", dir=SEND, messages=2, bytes_sent=64),
            dict(rank=0, peer=1, fn="MPI_Recv", dir=RECV, messages=2, bytes_recv=64, total_ns=9),
            dict(rank=0, peer=1, fn="MPI_Get", dir=RECV, messages=3, bytes_recv=24, total_ns=4),
        ],
    )
    (pair,) = analyze(p)["p2p"]
    assert (pair["sender"], pair["receiver"], pair["messages"], pair["bytes"]) == (1, 0, 5, 88)
    assert pair["recv_s"] == 13e-9


def test_title_wrapped_between_words():
    """A narrow terminal wraps the section's title between words: "point-to-point" and
    every other word whole, each line within the width."""
    rows = [dict(rank=r, peer=(r + 1) % 4, fn="MPI_Send", dir=SEND, messages=12345,
                 bytes_sent=10**9) for r in range(4)]  # fmt: skip
    data = {section.SECTION.name: analyze(profile(4, rows))}
    title = section.SECTION.text(data, View(max_rows=4, width=None, rows=None))[1]
    assert "point-to-point" in title
    for width in range(30, len(title) + 1, 7):
        lines = section.SECTION.text(data, View(max_rows=4, width=width, rows=None))
        head = lines[1 : next(i for i, ln in enumerate(lines) if "sender" in ln)]
        assert all(len(ln) <= width for ln in head), (width, head)
        assert " ".join(ln.strip() for ln in head) == title, (width, head)


def test_heat_map_per_host_above_its_rank_limit():
    n = section.HEAT_RANKS + 2
    half = n // 2
    rows = [dict(rank=r, peer=(r + half) % n, fn="MPI_Send", dir=SEND, messages=1,
                 bytes_sent=10) for r in range(n)]  # fmt: skip
    html = section.heat_map(analyze(profile(n, rows)))
    # one header per host, each host sending its half's 10 bytes per rank to the other
    assert len(re.findall(r"<th[ >]", html)) == 1 + 2 + 2
    assert html.count(f"{half} messages") == 2


def test_no_comms_array(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(
        exp / "profile.pwprof",
        dict(functions=FUNCS, families=FAMILIES, world_size=1, version=5),
        ranks=[dict(rank=0)],
        sites=[dict(rank=0, fn=0, object=-1, count=1)],
    )
    e = perfweave.open(exp)
    assert len(e._exp.profile.comms) == 0
    with pytest.raises(NoData, match="no communication matrix"):
        e.comm_matrix()
    assert section.SECTION.collect(e._exp, {}, 10) == {}
