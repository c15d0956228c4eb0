"""The communication matrix of an MPI profile (its "comms" rows, profile version 6;
docs/mpi-profile.md "Communication matrix"): per communicator, sender x receiver
messages, bytes and time of point-to-point calls, and per collective each rank's calls,
bytes and time, with the ranks' hosts.

Point-to-point pairs are the senders' rows (a send names its receiver exactly); the
receivers' rows add the time spent receiving from each sender and the receives whose
source the runtime could not know (sender -2). One-sided calls are recorded by their
origin alone: an MPI_Put's row is a send to its target, an MPI_Get's a receive from it,
and both count as the pair's messages and bytes.
Communicators are told apart by their group (the runtime's hash of their members' world
ranks): duplicates of one group are one communicator here.
"""

import numpy as np

from perfweave._format import COMM_DIRS

SEND, RECV, COLL = (COMM_DIRS.index(d) for d in ("send", "recv", "coll"))
UNKNOWN = -2  # a peer the runtime could not name


def group_hash(world_ranks):
    """The runtime's hash of a group (mpi.c comm_describe): FNV-1a over its members'
    world ranks in its rank order, as a signed 64-bit integer (0 becomes 1)."""
    h = 0xCBF29CE484222325
    for r in world_ranks:
        h ^= int(r) & 0xFFFFFFFF
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    h = h or 1
    return h - (1 << 64) if h >= 1 << 63 else h


def _communicators(rows, world_size):
    """One entry per distinct group: id (0 the world's when used), name, size, first
    (world rank of its rank 0), members (the ranks that recorded calls on it)."""
    world = group_hash(range(world_size)) if world_size else None
    keys = sorted(
        {(int(r["comm_hash"]), int(r["comm_size"]), int(r["comm_first"])) for r in rows},
        key=lambda k: (k[0] != world, -k[1], k[2], k[0]),
    )
    out = []
    for i, (h, size, first) in enumerate(keys):
        mine = rows[rows["comm_hash"] == h]
        if h == 0:
            name = "(rows past the runtime's bound)"
        elif h == world and size == world_size:
            name = "MPI_COMM_WORLD"
        else:
            name = f"comm {i} ({size} ranks from world rank {first})"
        out.append(
            {
                "id": i,
                "name": name,
                "hash": h,
                "size": size,
                "first": first,
                "members": sorted(set(int(x) for x in mine["rank"])),
            }
        )
    return out


def analyze(profile):
    """The matrix as a dict: communicators (see _communicators), hosts (rank -> host
    name), p2p (one entry per communicator, sender, receiver: comm, sender, receiver,
    messages, bytes, send_s, recv_s; the receivers' rows alone where no send names the
    pair, e.g. an unknown sender), collectives (per communicator, function, rank:
    comm, function, rank, calls, bytes_sent, bytes_recv, time_s) and totals per
    communicator. Empty lists for a profile without rows (no MPI, or older files)."""
    rows = profile.comms
    hosts = {
        int(r["rank"]): profile.hosts[r["host"]] if 0 <= r["host"] < len(profile.hosts) else ""
        for r in profile.ranks
        if r["rank"] >= 0
    }
    comms = _communicators(rows, profile.world_size)
    cid = {c["hash"]: c["id"] for c in comms}
    pairs = {}
    one_sided = {i for i, f in enumerate(profile.families) if f == "rma"}
    for r in rows[rows["dir"] != COLL]:
        send = r["dir"] == SEND
        sender, receiver = (r["rank"], r["peer"]) if send else (r["peer"], r["rank"])
        key = (cid[int(r["comm_hash"])], int(sender), int(receiver))
        p = pairs.setdefault(key, {"messages": 0, "bytes": 0, "send_ns": 0, "recv_ns": 0,
                                   "recv_messages": 0, "recv_bytes": 0})  # fmt: skip
        if not send and int(r["fn"]) in one_sided:  # a Get: the origin's row is the pair's
            p["messages"] += int(r["messages"])
            p["bytes"] += int(r["bytes_recv"])
            p["recv_ns"] += int(r["total_ns"])
        elif send:
            p["messages"] += int(r["messages"])
            p["bytes"] += int(r["bytes_sent"])
            p["send_ns"] += int(r["total_ns"])
        else:
            p["recv_messages"] += int(r["messages"])
            p["recv_bytes"] += int(r["bytes_recv"])
            p["recv_ns"] += int(r["total_ns"])
    p2p = []
    for (c, s, d), p in sorted(pairs.items()):
        # a pair no send names (an unknown sender, a sender's rows lost with its file)
        # counts its receives
        sent = p["messages"] > 0
        p2p.append(
            {
                "comm": c,
                "sender": s,
                "receiver": d,
                "messages": p["messages"] if sent else p["recv_messages"],
                "bytes": p["bytes"] if sent else p["recv_bytes"],
                "send_s": p["send_ns"] / 1e9,
                "recv_s": p["recv_ns"] / 1e9,
            }
        )
    coll = {}
    for r in rows[rows["dir"] == COLL]:
        key = (cid[int(r["comm_hash"])], profile.functions[r["fn"]], int(r["rank"]))
        c = coll.setdefault(key, np.zeros(4, np.int64))
        c += [r["messages"], r["bytes_sent"], r["bytes_recv"], r["total_ns"]]
    collectives = [
        {
            "comm": k[0],
            "function": k[1],
            "rank": k[2],
            "calls": int(v[0]),
            "bytes_sent": int(v[1]),
            "bytes_recv": int(v[2]),
            "time_s": float(v[3]) / 1e9,
        }
        for k, v in sorted(coll.items())
    ]
    for c in comms:
        mine = [p for p in p2p if p["comm"] == c["id"]]
        c["p2p_messages"] = sum(p["messages"] for p in mine)
        c["p2p_bytes"] = sum(p["bytes"] for p in mine)
        cl = [x for x in collectives if x["comm"] == c["id"]]
        c["coll_calls"] = sum(x["calls"] for x in cl)
        c["coll_bytes"] = sum(x["bytes_sent"] + x["bytes_recv"] for x in cl)
    return {
        "communicators": comms,
        "hosts": {str(k): v for k, v in sorted(hosts.items())},
        "world_size": int(profile.world_size),
        "p2p": p2p,
        "collectives": collectives,
    }


def world_matrix(m, what="bytes"):
    """The point-to-point matrix over every communicator in world ranks: an n x n array,
    [sender, receiver] = sum of `what` ("messages", "bytes", "send_s", "recv_s");
    unknown senders left out."""
    n = m["world_size"]
    out = np.zeros((n, n), float if what.endswith("_s") else np.int64)
    for p in m["p2p"]:
        if 0 <= p["sender"] < n and 0 <= p["receiver"] < n:
            out[p["sender"], p["receiver"]] += p[what]
    return out


COMPACT_MISSING = (
    "pairs past the top by bytes, the time of each pair's sends and receives, receives "
    "from senders the runtime could not know and collectives per rank: above "
    "--full-profile-ranks only the compact profile is written"
)


def from_compact(p):
    """The matrix's summary in a compact profile (model/compact.py, version 3): as a dict,
    compact True, world_size, top_pairs (its bound), pairs (the top pairs by bytes: comm
    (its group's hash), comm_size, comm_first, sender, receiver, messages, bytes), ranks
    (per rank: rank, sent_bytes, sent_messages, recv_bytes, recv_messages, exact, every
    point-to-point row of the rank) and missing; None for a file without it."""
    if p is None or p.rank_comm is None:
        return None
    from perfweave.model.compact import RANK_COMM, TOP_PAIRS

    world = group_hash(range(p.world_size))
    pairs = [
        {
            "comm": int(x["comm_hash"]),
            "comm_name": "MPI_COMM_WORLD"
            if int(x["comm_hash"]) == world and int(x["comm_size"]) == p.world_size
            else f"comm ({int(x['comm_size'])} ranks from world rank {int(x['comm_first'])})",
            "sender": int(x["sender"]),
            "receiver": int(x["receiver"]),
            "messages": int(x["messages"]),
            "bytes": int(x["bytes"]),
        }
        for x in p.pairs
    ]
    ranks = [
        {"rank": r, **{k: int(p.rank_comm[m, r]) for m, k in enumerate(RANK_COMM)}}
        for r in range(p.world_size)
    ]
    return {
        "compact": True,
        "world_size": int(p.world_size),
        "top_pairs": TOP_PAIRS,
        "pairs": pairs,
        "ranks": ranks,
        "missing": COMPACT_MISSING,
    }
