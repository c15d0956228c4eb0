"""The event graph (analysis/eventgraph.py) of traces written by hand: every call,
message, collective instance and RMA synchronisation is known by construction."""

from perfweave.analysis import eventgraph as eg
from perfweave.model.trace import Trace
from test_replay import recv, send, wsync


def barrier(b, e):
    return ("MPI_Barrier", b, e, [dict(type="COLL", comm=0)])


def lists(t):
    return {k: v.tolist() for k, v in t.items()}


def test_calls_in_order_with_their_useful_time_and_a_ping_pong():
    g = eg.from_trace(
        Trace.from_literal(
            {
                0: [
                    ("MPI_Init", 0, 10, []),
                    send(100, 110, 1),
                    recv(300, 400, 1),
                    barrier(500, 600),
                    ("MPI_Finalize", 700, 800, []),
                ],
                1: [
                    ("MPI_Init", 0, 10, []),
                    recv(50, 120, 0, nbytes=8),
                    send(250, 260, 0, fn="MPI_Ssend", flags=["SYNCHRONOUS"]),
                    barrier(550, 600),
                    ("MPI_Finalize", 700, 800, []),
                ],
            }
        )
    )
    c = g.calls
    assert c["loc"].tolist() == [0] * 5 + [1] * 5
    assert [g.call_name(i) for i in range(5)] == [
        "MPI_Init",
        "MPI_Send",
        "MPI_Recv",
        "MPI_Barrier",
        "MPI_Finalize",
    ]
    # computation before each call: enter minus the previous call's leave
    assert c["useful"].tolist() == [0, 90, 190, 100, 100, 0, 40, 130, 290, 100]
    assert lists(g.locations)["first"] == [0, 5]
    m = lists(g.messages)
    order = sorted(range(2), key=lambda i: m["src"][i])
    assert [m["scall"][i] for i in order] == [1, 7]
    assert [m["sdone"][i] for i in order] == [1, 7]
    assert [m["rpost"][i] for i in order] == [6, 2]
    assert [m["rdone"][i] for i in order] == [6, 2]
    assert [m["sync"][i] for i in order] == [0, 1]
    assert lists(g.coll_instances) == {
        "kind": [eg.COLL],
        "size": [2],
        "present": [2],
        "whole": [True],
        "bytes": [0],
    }
    assert sorted(zip(g.coll_parts["bcall"].tolist(), g.coll_parts["ecall"].tolist())) == [
        (3, 3),
        (8, 8),
    ]
    assert g.unmatched == {"sends": 0, "receives": 0, "collectives": 0}


def test_nonblocking_calls_link_their_start_and_completion():
    def icoll(b, e, number):
        sub = dict(type="COLL", comm=0, bytes=8, bytes2=8, key=number, number=number)
        return ("MPI_Iallreduce", b, e, [dict(sub, flags=["NONBLOCKING"])])

    def wait(b, e, typ, number, **kw):
        return ("MPI_Wait", b, e, [dict(type=typ, key=number, number=number, **kw)])

    g = eg.from_trace(
        Trace.from_literal(
            {
                0: [
                    icoll(10, 20, 1),
                    (
                        "MPI_Isend",
                        30,
                        40,
                        [
                            dict(
                                type="SEND",
                                peer=1,
                                comm=0,
                                bytes=64,
                                key=2,
                                number=2,
                                flags=["NONBLOCKING"],
                            )
                        ],
                    ),
                    wait(50, 60, "SEND_DONE", 2),
                    wait(70, 80, "COLL_DONE", 1),
                ],
                1: [
                    (
                        "MPI_Irecv",
                        5,
                        6,
                        [
                            dict(
                                type="IRECV", peer=0, comm=0, key=1, number=1, flags=["NONBLOCKING"]
                            )
                        ],
                    ),
                    icoll(15, 20, 2),
                    wait(30, 90, "COLL_DONE", 2),
                    wait(100, 110, "RECV", 1, peer=0, comm=0, bytes=64),
                ],
            }
        )
    )
    assert lists(g.messages) == {
        "scall": [1],
        "sdone": [2],
        "rpost": [4],
        "rdone": [7],
        "src": [0],
        "dst": [1],
        "bytes": [64],
        "sync": [0],
        "tag": [0],
    }
    p = g.coll_parts
    assert sorted(zip(p["bcall"].tolist(), p["ecall"].tolist())) == [(0, 3), (5, 6)]
    assert g.coll_instances["bytes"].tolist() == [16]  # 8 sent + 8 received


def test_fences_windows_and_active_target_epochs():
    def win(fn, b, e):
        return (fn, b, e, [dict(type="WIN", win=0, comm=0, flags=["FREE"] if "free" in fn else [])])

    put = ("MPI_Put", 120, 130, [dict(type="RMA", win=0, comm=0, peer=1, bytes=4)])
    g = eg.from_trace(
        Trace.from_literal(
            {
                0: [
                    win("MPI_Win_create", 0, 5),
                    wsync("MPI_Win_fence", 10, 20),
                    wsync("MPI_Win_fence", 30, 40),
                    wsync("MPI_Win_start", 100, 110, group=0),
                    put,
                    wsync("MPI_Win_complete", 140, 900),
                    win("MPI_Win_free", 950, 960),
                ],
                1: [
                    win("MPI_Win_create", 0, 5),
                    wsync("MPI_Win_fence", 12, 20),
                    wsync("MPI_Win_fence", 32, 40),
                    wsync("MPI_Win_post", 500, 510, group=1),
                    wsync("MPI_Win_wait", 520, 2000),
                    win("MPI_Win_free", 2100, 2110),
                ],
            },
            windows=[0],
            groups=[[1], [0]],
        )
    )
    i, p = g.coll_instances, g.coll_parts
    assert i["kind"].tolist() == [eg.FENCE, eg.FENCE, eg.WINDOW, eg.WINDOW]
    assert i["whole"].all()
    members = {}
    for inst, call in zip(p["inst"].tolist(), p["bcall"].tolist()):
        members.setdefault(inst, []).append(call)
    # the two fences, window creation, window free: one call of each rank
    assert sorted(members.values()) == [[0, 7], [1, 8], [2, 9], [6, 12]]
    # rank 1's post (call 10) before rank 0's complete (5); that complete before the wait
    assert lists(g.rma_sync) == {
        "kind": [eg.POST_COMPLETE, eg.COMPLETE_WAIT],
        "a": [10, 5],
        "b": [5, 11],
        "origin": [0, 0],
        "target": [1, 1],
    }
