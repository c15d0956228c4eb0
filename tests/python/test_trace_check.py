"""The reader's record checks (readers/trace.py _check): which damaged records it drops,
exactly, and that it leaves intact traces alone."""

import numpy as np

from perfweave.dtypes import EVENT_DTYPE, EVENT_TYPES as T
from perfweave.readers.trace import _check

META = {"functions": ["MPI_Send", "MPI_Recv", "MPI_Barrier"]}


def records(*rows):
    """rows: (type name or number, t0, t1, fn)."""
    rec = np.zeros(len(rows), EVENT_DTYPE)
    for i, (typ, t0, t1, fn) in enumerate(rows):
        rec[i]["type"] = T[typ] if isinstance(typ, str) else typ
        rec[i]["t0"], rec[i]["t1"], rec[i]["fn"] = t0, t1, fn
    return rec


def kept(rec, thread=None):
    thread = np.zeros(len(rec), np.int32) if thread is None else np.asarray(thread, np.int32)
    ok = _check(rec, np.ascontiguousarray(rec["type"]), thread, META)
    assert ok is None or (ok.dtype == bool and len(ok) == len(rec))
    return rec["t0"].tolist() if ok is None else rec[ok]["t0"].tolist()


def test_intact_trace_is_returned_as_is():
    rec = records(
        ("CALL", 10, 20, 0),
        ("SEND", 11, 11, 0),
        ("CALL", 30, 40, 1),
        ("RECV", 31, 31, 0),
        ("FLUSH", 50, 60, 0),
        ("CALL", 70, 80, 2),
        ("COLL", 71, 71, 0),
    )
    assert (
        _check(rec, np.ascontiguousarray(rec["type"]), np.zeros(len(rec), np.int32), META) is None
    )


def test_each_rule_drops_its_record_and_the_sub_events_that_hang_on_it():
    rec = records(
        ("SEND", 1, 1, 0),  # sub-event before any call: orphan
        ("CALL", 10, 20, 0),
        ("SEND", 11, 11, 0),
        (250, 25, 25, 0),  # unknown type
        ("CALL", 40, 30, 1),  # a call that ends before it begins
        ("RECV", 41, 41, 0),  # ... its sub-event goes with it
        ("SEND_DONE", 42, 42, 0),  # ... and the next one too
        ("CALL", 50, 60, 7),  # function index beyond the table
        ("CALL", 70, 80, 2),
        ("COLL", 71, 71, 0),
        ("RECV", 5, 3, 0),
    )  # t1 < t0 is fine for a sub-event
    assert kept(rec) == [10, 11, 70, 71, 5]


def test_a_sub_event_does_not_follow_another_threads_call():
    rec = records(
        ("CALL", 10, 20, 0),
        ("SEND", 11, 11, 0),
        ("RECV", 12, 12, 0),
        ("CALL", 30, 40, 1),
        ("RECV", 31, 31, 0),
    )
    # thread 1's records begin with a sub-event: its call was in another thread
    assert kept(rec, [0, 0, 1, 1, 1]) == [10, 11, 30, 31]
    assert kept(rec, [0, 0, 0, 1, 1]) == [10, 11, 12, 30, 31]


def test_flush_spans_are_checked_like_calls():
    rec = records(("CALL", 10, 20, 0), ("FLUSH", 30, 25, 0), ("CALL", 40, 50, 1))
    assert kept(rec) == [10, 40]
