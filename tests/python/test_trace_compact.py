"""Version 5 trace files (docs/format.md, "Compact records"), written record by record
here: the reader turns 16-byte heads and their extension records back into the event
records the runtime staged, including the fields that did not fit (a time delta above 32
bits: a BASE record; a duration above 32 bits and bytes above 4 GiB: extension records),
request keys that the post number stands for, a killed rank's partial block, and still
reads a version 4 file of the same events."""

import json

import numpy as np

from perfweave._format import RECORDS, TRACE_KINDS as K
from perfweave.dtypes import EVENT_DTYPE, EVENT_TYPES as T
from perfweave.readers import trace as rt
from test_trace_blocks import assert_stream_is_rank

CEVENT, CWIDE = RECORDS["cevent"], RECORDS["cwide"]
EXT = {f: K["EXT"] + i for i, f in enumerate(("t0", "t1", "fn", "peer", "tag", "comm", "bytes"))}
FUNCTIONS = ["MPI_Send", "MPI_Recv", "MPI_Wait"]
BASE = 1 << 40  # ticks
RA = 0x401234  # a call site's return address


def head(typ, s=0, a=0, b=0, c=0, flags=0):
    r = np.zeros(1, CEVENT)
    r["kind"], r["flags"], r["s"], r["a"], r["b"], r["c"] = T[typ], flags, s, a, b, c
    return r


def wide(kind, w, a=0):
    r = np.zeros(1, CWIDE)
    r["kind"], r["a"], r["w"] = kind, a, w
    return r.view(CEVENT)


def block(thread, number, records, slots=15, committed=None, tid=4321, garbage=()):
    """BLOCK, THREAD, the records, then the block's other slots (garbage, zeros)."""
    body = [wide(K["THREAD"], number, a=tid)] + list(records)
    h = head("BLOCK", a=len(body) if committed is None else committed, b=slots, c=thread)
    rest = np.zeros(slots, CEVENT)
    rows = np.concatenate(body + list(garbage))
    rest[: len(rows)] = rows
    return np.concatenate([h, rest])


def write(tmp_path, data, state="complete", records=0, version=5):
    d = tmp_path / "traces"
    d.mkdir(exist_ok=True)
    data.tofile(d / "rank-0.events")
    meta = {
        "format": "perfweave-trace",
        "version": version,
        "rank": 0,
        "world_size": 2,
        "state": state,
        "functions": FUNCTIONS,
        "records": records,
        "lost": 0,
    }
    (d / "rank-0.json").write_text(json.dumps(meta))
    return tmp_path


def event(typ, t0=0, t1=0, fn=0, peer=-1, tag=0, comm=-1, nbytes=0, flags=0):
    r = np.zeros(1, EVENT_DTYPE)
    r["type"], r["flags"], r["t0"], r["t1"], r["fn"] = T[typ], flags, t0, t1, fn
    r["peer"], r["tag"], r["comm"], r["bytes"] = peer, tag, comm, nbytes
    return r


# the events the records below hold, as the runtime staged them
EVENTS = np.concatenate(
    [
        # MPI_Send of 5 GiB (bytes above 32 bits)
        event("CALL", BASE + 10, BASE + 110, fn=0, nbytes=RA),
        event("SEND", peer=1, tag=7, comm=0, nbytes=5 << 30),
        # 2^41 ticks later (a delta above 32 bits: a new base), an MPI_Recv of 2^33 ticks
        # (a duration above 32 bits) at the same call site
        event("CALL", 3 * BASE, 3 * BASE + (1 << 33), fn=1, nbytes=RA),
        event("RECV", peer=1, tag=7, comm=0, nbytes=64),
        # MPI_Wait completing an Isend: post number 3 names it, the key is not stored
        event("CALL", 3 * BASE + (1 << 33) + 5, 3 * BASE + (1 << 33) + 9, fn=2, nbytes=RA + 8),
        event("SEND_DONE", t0=3, t1=3, peer=1, tag=9, comm=0),
    ]
)


def records():
    """EVENTS as the runtime encodes them (format.h PW_EVENT_LAYOUTS)."""
    return [
        wide(K["BASE"], BASE),
        wide(K["SITE"], RA, a=0),
        head("CALL", s=0, a=10, b=100, c=0),
        head("SEND", s=0, a=1, b=7, c=0),
        wide(EXT["bytes"], 5 << 30),
        wide(K["BASE"], 3 * BASE),
        head("CALL", s=1, a=0, b=0, c=0),
        wide(EXT["t1"], 3 * BASE + (1 << 33)),
        head("RECV", s=0, a=1, b=7, c=64),
        # 2^33 + 5 ticks after the base: a new base
        wide(K["BASE"], 3 * BASE + (1 << 33) + 5),
        wide(K["SITE"], RA + 8, a=1),
        head("CALL", s=2, a=0, b=4, c=1),
        head("SEND_DONE", s=0, a=1, b=7 + 2, c=3),
    ]


def test_compact_records_decode_to_the_staged_events(tmp_path):
    exp = write(tmp_path, block(0, 0, records(), slots=31), records=len(EVENTS))
    rf = rt.read_rank(exp, 0)
    assert rf.complete and rf.notes == []
    assert rf.records.tolist() == EVENTS.tolist()
    assert rf.thread.tolist() == [0] * len(EVENTS)
    assert rt.rank_thread_ids(exp, 0) == {0: 4321}
    assert rt.rank_threads(exp, 0, rf.meta) == [0]
    # the record count sizes the analysis' tables: at least the events
    assert rt.record_count(exp, 0) >= len(EVENTS)


def test_a_field_whose_record_is_missing_is_a_damaged_record(tmp_path):
    """A CALL whose call-site id no SITE record defined (and one before any time base):
    dropped as corrupt, with its sub-events, the rest kept."""
    body = records()
    bad = [head("CALL", s=0, a=1, b=1, c=7)]  # no site 7, and no base yet in the block
    exp = write(tmp_path, block(0, 0, bad + [head("SEND", a=1)] + body, slots=31), records=8)
    rf = rt.read_rank(exp, 0)
    assert rf.records.tolist() == EVENTS.tolist()
    assert not rf.complete and any("does not define" in n for n in rf.notes), rf.notes


def test_killed_rank_keeps_its_committed_compact_records(tmp_path):
    """SIGKILL while the second call was being encoded: the block counts the records of
    the first call only; the half-written ones after it and a block allocated but never
    begun (zeros) are not part of the trace."""
    body = records()
    data = np.concatenate(
        [block(0, 0, body[:5], slots=31, garbage=body[5:8]), np.zeros(32, CEVENT)]
    )
    exp = write(tmp_path, data, state="running")
    rf = rt.read_rank(exp, 0)
    assert rf.records.tolist() == EVENTS[:2].tolist()
    assert not rf.complete and rf.meta["state"] == "killed"
    assert any("killed" in n for n in rf.notes)


def test_blocks_of_threads_each_with_its_own_base_and_sites(tmp_path):
    """Thread 1's block uses its own site ids and base; a block's time base does not
    carry into the next block of the same thread."""
    body = records()
    t1 = [wide(K["BASE"], 7), wide(K["SITE"], 0x999, a=0), head("CALL", s=2, a=3, b=1, c=0)]
    later = [wide(K["BASE"], 100), head("CALL", s=2, a=1, b=1, c=0)]  # site 0 of thread 0
    data = np.concatenate([block(0, 0, body[:5]), block(1, 0, t1, tid=99), block(0, 1, later)])
    exp = write(tmp_path, data, records=4)
    rf = rt.read_rank(exp, 0)
    assert rf.complete, rf.notes
    assert rf.records["t0"].tolist() == [BASE + 10, 0, 10, 101]
    assert rf.records["bytes"].tolist() == [RA, 5 << 30, 0x999, RA]
    assert rf.thread.tolist() == [0, 0, 1, 0]
    assert rt.rank_thread_ids(exp, 0) == {0: 4321, 1: 99}


def test_version_4_trace_is_still_read(tmp_path):
    """The same events as a version 4 file: 40-byte records behind a BLOCK record whose
    peer is the thread's OS id."""
    h = event("BLOCK", t0=len(EVENTS), t1=len(EVENTS) + 1, peer=4321, tag=0)
    data = np.concatenate([h, EVENTS, np.zeros(1, EVENT_DTYPE)])
    data["t0"][1 + 5] = 0x7F00AA  # a version 4 completion holds its request key
    exp = write(tmp_path, data, records=len(EVENTS), version=4)
    rf = rt.read_rank(exp, 0)
    assert rf.complete and rf.notes == []
    want = EVENTS.copy()
    want["t0"][5] = 0x7F00AA
    assert rf.records.tolist() == want.tolist()
    assert rt.rank_thread_ids(exp, 0) == {0: 4321}


def test_post_numbers_that_follow_the_threads_previous_are_not_stored(tmp_path):
    """Posts (IRECV, a nonblocking SEND) numbered the thread's previous post's + 1 carry
    flag NEXT_POST instead of their number (1 for a thread's first); others have it in an
    extension record. The reader numbers them per thread, and gives the number as key."""
    nb, nxt = 1, 0x80  # EVENT_FLAGS NONBLOCKING, TRACE_NEXT_POST
    call = [wide(K["BASE"], 0), wide(K["SITE"], RA, a=0), head("CALL", a=1, b=1)]
    t0 = call + [
        head("IRECV", a=1, b=7, c=8, flags=nb | nxt),  # 1
        head("SEND", a=1, b=7, c=8, flags=nb | nxt),  # 2
        head("SEND", a=1, b=7, c=8, flags=nb),
        wide(EXT["t1"], 5),  # 3 and 4 were thread 1's
        head("IRECV", a=1, b=7, c=8, flags=nb | nxt),  # 6
        head("RECV", a=1, b=7, c=8),
        wide(EXT["t1"], 6),  # a completion: its number always stored
    ]
    t1 = call + [
        head("IRECV", a=0, b=1, c=8, flags=nb),
        wide(EXT["t1"], 3),
        head("IRECV", a=0, b=1, c=8, flags=nb | nxt),  # 4
    ]
    exp = write(tmp_path, np.concatenate([block(0, 0, t0, 31), block(1, 0, t1, 31)]), records=9)
    rf = rt.read_rank(exp, 0)
    assert rf.complete, rf.notes
    sub = rf.records[rf.records["type"] != T["CALL"]]
    assert sub["t1"].tolist() == [1, 2, 5, 6, 6, 3, 4]
    assert sub["t0"].tolist() == [1, 2, 5, 6, 6, 3, 4]  # the key the number stands for
    assert sub["flags"].tolist() == [nb, nb, nb, nb, 0, nb, nb]


def many(n, thread):
    """n iterations of a thread's calls: posts numbered in turn (mostly the next one:
    flag NEXT_POST), completions, a collective, a user function, times far apart enough
    that blocks need several time bases."""
    out = []
    for i in range(n):
        t = (i + 1) * (3 << 30) + thread  # a new base every other call or so
        post = 2 * i + 1 + (5 if i % 7 == 3 else 0)  # now and then a number skipped
        out += [
            event("CALL", t, t + 100, fn=0, nbytes=RA + 8 * (i % 3)),
            event("IRECV", t0=0x7000 + i, t1=post, peer=1, tag=7, comm=0, nbytes=64, flags=1),
            event("SEND", t0=0x8000 + i, t1=post + 1, peer=1, tag=7, comm=0, nbytes=64, flags=1),
            event("CALL", t + 200, t + 300 + (1 << 33) * (i % 5 == 0), fn=2, nbytes=RA),
            event("RECV", t0=post, t1=post, peer=1, tag=7, comm=0, nbytes=64),
            event("SEND_DONE", t0=post + 1, t1=post + 1, peer=1, tag=7, comm=0),
            event("ENTER", t + 400, tag=0, nbytes=0x5000 + i % 4),
            event("LEAVE", t + 500, tag=0, nbytes=0x5000 + i % 4),
            event("CALL", t + 600, t + 700, fn=1, nbytes=RA + 16),
            event("COLL", t0=0, t1=8, peer=-1, comm=70000, nbytes=8),  # comm: not 16 bits
        ]
    return np.concatenate(out)


def keyed(rec):
    """rec as read back: a request key whose post number is stored becomes the number."""
    want = rec.copy()
    from perfweave.readers.trace_compact import layout_of

    for t in np.unique(rec["type"]).tolist():
        key = layout_of(t)[1]
        sel = rec["type"] == t
        number = {"KEY_T1": rec["t1"], "KEY_TAG": rec["tag"].astype(np.int64)}.get(key)
        if number is not None:
            want["t0"][sel] = np.where(number[sel] != 0, number[sel], rec["t0"][sel])
    return want


def test_encoder_round_trips_through_the_decoder(tmp_path):
    """perfweave's numpy encoder (bench/tracegen.py writes with it) writes what the reader
    takes back: every field, in blocks of any size, whole or the last one cut short;
    posts numbered in turn carry flag NEXT_POST instead of their number."""
    from perfweave.readers import trace_compact as tc

    events = many(40, 0)
    for slots, cut in ((31, False), (255, True), (tc.BLOCK_SLOTS, True)):
        data = tc.encode(events, tid=4321, slots=slots, cut=cut)
        nblocks = -(-len(data) // (slots + 1))
        assert nblocks > 1 or slots == tc.BLOCK_SLOTS
        assert cut or len(data) == nblocks * (slots + 1)
        (tmp_path / str(slots)).mkdir()
        exp = write(tmp_path / str(slots), data, records=len(events))
        rf = rt.read_rank(exp, 0)
        assert rf.complete and rf.notes == [], rf.notes
        assert rf.records.tobytes() == keyed(events).tobytes()
        assert rt.rank_thread_ids(exp, 0) == {0: 4321}
    head = (data["kind"] < K["EXT"]) & (data["kind"] != T["BLOCK"])
    implicit = (data["flags"] & 0x80) != 0
    # 2 posts an iteration numbered in turn, but at the jump forward and back of each of
    # the 6 iterations whose numbers skip 5
    assert head.sum() == len(events) and implicit.sum() == 80 - 2 * 6
    # extension records: the number of each RECV (a completion; SEND_DONE has a slot for
    # it), of the 12 posts not in turn, 8 durations above 32 bits, the COLLs' comm
    assert (data["kind"] == EXT["t1"]).sum() == 40 + 12 + 8
    assert (data["kind"] == EXT["comm"]).sum() == 40


def test_a_rank_read_in_pieces_is_the_rank(tmp_path, monkeypatch):
    """The exports read a compact file a thread and a bounded number of records at a time
    (RankSource.pieces, trace_compact.Parts): for every chunk size, records, threads,
    times and notes are those of the rank decoded whole, with blocks cut inside (a time
    base, call-site ids and post numbers carried across), two threads' blocks
    interleaved, and damage: a record of unknown kind, a call whose site no record
    defines (dropped with its sub-events)."""
    from perfweave.interop import load
    from perfweave.readers import trace_compact as tc

    slots = 31
    t0 = tc.encode(many(12, 0), thread=0, tid=11, slots=slots, cut=False)
    t1 = tc.encode(many(9, 1), thread=1, tid=12, slots=slots, cut=False)
    b0, b1 = list(t0.reshape(-1, slots + 1)), list(t1.reshape(-1, slots + 1))
    assert len(b0) > 5 and len(b1) > 4
    # thread 0's, thread 1's, two of thread 0's..., then each one's others
    order = [b0[0], b1[0], b0[1], b0[2], b1[1], b1[2], b0[3]] + b0[4:] + b1[3:]
    data = np.concatenate(order)
    # damage: an extension record of no known kind, a site id no SITE record defines
    ext = np.flatnonzero(data["kind"] == EXT["t1"])
    data["kind"][ext[5]] = 200
    calls = np.flatnonzero(data["kind"] == T["CALL"])
    data["c"][calls[20]] = 999
    heads = int(((data["kind"] < K["EXT"]) & (data["kind"] != T["BLOCK"])).sum())
    exp = write(tmp_path, data, records=heads)
    (tmp_path / "experiment.json").write_text(
        json.dumps({"format": "perfweave-experiment", "version": 1, "state": "finished"})
    )
    X = load(exp)
    whole = X.rank(0)
    assert not whole.complete
    assert any("unknown kind" in n for n in whole.notes)
    assert any("does not define" in n for n in whole.notes)
    assert len(whole.rec) > 200
    for size in (1, 2, 3, 5, 7, 64, 100, 10_000):
        stream = assert_stream_is_rank(X, whole, size)
        assert stream.src.records is None  # decoded in pieces
        assert not stream.complete
