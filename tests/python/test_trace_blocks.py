"""Version 2 and later trace files (docs/format.md, "Traces"): blocks of one thread's records, each
behind a BLOCK record counting the committed ones. The reader takes exactly the committed
records, whatever the rest of a block holds (never written: zeros; being written when the
rank was killed: anything), marks a rank whose JSON still says "running" as killed, and
still reads version 1 files (records back to back)."""

import json

import numpy as np

from perfweave.readers import trace as rt
from perfweave.dtypes import EVENT_DTYPE, EVENT_TYPES as T

FUNCTIONS = ["MPI_Send", "MPI_Recv", "MPI_Barrier"]


def rec(typ, t0=0, t1=0, fn=0, tag=0):
    r = np.zeros(1, EVENT_DTYPE)
    r["type"], r["t0"], r["t1"], r["fn"], r["tag"] = T[typ], t0, t1, fn, tag
    r["peer"] = r["comm"] = -1
    return r


def block(thread, number, committed, slots, records, garbage=()):
    """A BLOCK record, the records, then the block's other slots: garbage records, zeros."""
    head = rec("BLOCK", committed, slots, tag=thread)
    head["bytes"] = number
    body = np.zeros(slots, EVENT_DTYPE)
    rows = list(records) + list(garbage)
    if rows:
        body[: len(rows)] = np.concatenate(rows)
    return np.concatenate([head, body])


def write(tmp_path, rank, data, meta):
    d = tmp_path / "traces"
    d.mkdir(exist_ok=True)
    data.tofile(d / f"rank-{rank}.events")
    if meta is not None:
        (d / f"rank-{rank}.json").write_text(json.dumps(meta))
    return tmp_path


def meta(state, records=0, version=2):
    return {
        "format": "perfweave-trace",
        "version": version,
        "rank": 0,
        "world_size": 1,
        "state": state,
        "functions": FUNCTIONS,
        "records": records,
        "lost": 0,
    }


def test_committed_records_of_each_block_in_file_order(tmp_path):
    t0 = [rec("CALL", 10, 20, 0), rec("SEND", 1, 0), rec("CALL", 30, 40, 2)]
    t1 = [rec("CALL", 15, 25, 1), rec("RECV", 2, 0)]
    more = [rec("CALL", 50, 60, 2)]
    data = np.concatenate([block(0, 0, 3, 7, t0), block(1, 0, 2, 7, t1), block(0, 1, 1, 7, more)])
    exp = write(tmp_path, 0, data, meta("complete", records=6))
    rf = rt.read_rank(exp, 0)
    assert rf.complete and rf.notes == []
    assert rf.records["t0"].tolist() == [10, 1, 30, 15, 2, 50]
    assert rf.thread.tolist() == [0, 0, 0, 1, 1, 0]
    assert T["BLOCK"] not in rf.types


def test_killed_rank_keeps_what_it_committed(tmp_path):
    """SIGKILL while a call's records were being written: the block counts 2 records,
    the third slot holds a half-written one, a block allocated after it was never begun
    (zeros)."""
    done = [rec("CALL", 10, 20, 0), rec("SEND", 1, 0)]
    half = [rec("CALL", 30, 0, 1)]
    data = np.concatenate([block(0, 0, 2, 7, done, garbage=half), np.zeros(8, EVENT_DTYPE)])
    exp = write(tmp_path, 0, data, meta("running"))
    rf = rt.read_rank(exp, 0)
    assert rf.records["t0"].tolist() == [10, 1]
    assert not rf.complete and rf.meta["state"] == "killed"
    assert len(rf.notes) == 1 and "killed while running" in rf.notes[0]


def test_truncated_block_and_missing_json(tmp_path):
    """A file cut inside a block (the count says 3, two are there), and no JSON at all:
    the two records are read, with notes."""
    three = [rec("CALL", 10, 20, 0), rec("SEND", 1, 0), rec("CALL", 30, 40, 2)]
    data = block(0, 0, 3, 7, three)[:3]
    exp = write(tmp_path, 0, data, None)
    rf = rt.read_rank(exp, 0)
    assert rf.records["t0"].tolist() == [10, 1]
    assert not rf.complete
    assert any("is missing" in n for n in rf.notes)
    assert any("counts 3 records of 2" in n for n in rf.notes)


def test_version_1_files_are_still_read(tmp_path):
    flat = np.concatenate([rec("CALL", 10, 20, 0), rec("SEND", 1, 0), rec("CALL", 30, 40, 2)])
    m = dict(
        meta("complete", records=3, version=1), flushes=[{"thread": 0, "first": 0, "count": 3}]
    )
    exp = write(tmp_path, 0, flat, m)
    rf = rt.read_rank(exp, 0)
    assert rf.complete and rf.notes == []
    assert rf.records["t0"].tolist() == [10, 1, 30]


def test_versions_1_and_2_name_the_mpi_io_family_io(tmp_path):
    """Before version 3 the MPI family of MPI_File_* calls was "io": read as "file"."""
    data = block(0, 0, 1, 7, [rec("CALL", 10, 20, 3)])
    m = dict(
        meta("complete", records=1),
        functions=FUNCTIONS + ["MPI_File_write"],
        families=["p2p", "p2p", "coll", "io"],
    )
    rf = rt.read_rank(write(tmp_path, 0, data, m), 0)
    assert rf.meta["families"] == ["p2p", "p2p", "coll", "file"]


def test_chunks_of_a_rank_are_the_rank(tmp_path, monkeypatch):
    """RankExportStream (interop's exports read a rank chunk by chunk) gives the records,
    threads, times and notes that ExportSource.rank gives at once, for every chunk size:
    the checks that look at the record before see the last one of the chunk before in
    file order. Damage of each kind: a sub-event first in a block that follows another
    thread's block (dropped, with the sub-event after it), one that follows its own
    thread's block (kept), a call of an unknown function (dropped with its sub-event),
    a span that ends before it starts, an unknown record type."""
    from perfweave.interop import load

    bad_fn = rec("CALL", 70, 80, 7)
    bad_span = rec("FLUSH", 90, 85)
    unknown = rec("CALL", 95, 99)
    unknown["type"] = 200
    a = [rec("CALL", 10, 20, 0), rec("SEND", 1, 0)]
    b = [rec("CALL", 15, 25, 1), rec("RECV", 2, 0), rec("RECV", 3, 0)]
    c = [
        rec("SEND", 4, 0),
        rec("CALL", 30, 40, 2),
        rec("ENTER", 41),
        bad_fn,
        rec("SEND", 5, 0),
        rec("SEND", 6, 0),
        rec("CALL", 42, 44, 0),
    ]
    d = [rec("RECV", 7, 0), rec("CALL", 45, 50, 1), bad_span, unknown, rec("LEAVE", 100)]
    e = [rec("SEND", 8, 0), rec("CALL", 101, 102, 0)]
    data = np.concatenate(
        [
            block(0, 0, 2, 3, a),
            block(1, 0, 3, 4, b),
            block(0, 1, 7, 7, c),
            block(0, 2, 5, 5, d),
            block(1, 1, 2, 2, e),
        ]
    )
    exp = write(
        tmp_path,
        0,
        data,
        dict(
            meta("complete", records=19),
            clock={"ticks": [0, 10], "ns": [0, 30], "t_init_ns": 5, "t_fini_ns": 400},
        ),
    )
    (tmp_path / "experiment.json").write_text(
        json.dumps({"format": "perfweave-experiment", "version": 1, "state": "finished"})
    )
    X = load(exp)
    whole = X.rank(0)
    assert len(whole.rec) == 12 and whole.notes == [
        "rank 0: 7 corrupt records dropped from rank-0.events"
    ]
    for size in (1, 2, 3, 4, 5, 7, 100):
        assert_stream_is_rank(X, whole, size)


def assert_stream_is_rank(X, whole, size):
    """Rank 0 of ExportSource X read in chunks of size records is whole, X.rank(0); returns
    the stream."""
    stream = X.stream(0)
    chunks = list(stream.chunks(size))
    for key in ("t0", "t1", "thread"):
        assert (
            np.concatenate([getattr(ch, key) for ch in chunks]).tolist()
            == getattr(whole, key).tolist()
        ), (size, key)
    assert np.concatenate([ch.rec for ch in chunks]).tobytes() == whole.rec.tobytes()
    assert [ch.base for ch in chunks] == np.cumsum([0] + [len(ch.rec) for ch in chunks])[
        :-1
    ].tolist()
    # no chunk begins with a sub-event: they stay with their call
    assert all(
        ch.rec["type"][0] in (T["CALL"], T["ENTER"], T["LEAVE"], T["FLUSH"]) for ch in chunks
    )
    assert (stream.t_begin, stream.t_end) == (whole.t_begin, whole.t_end)
    assert stream.finish_notes() == whole.notes, size
    return stream
