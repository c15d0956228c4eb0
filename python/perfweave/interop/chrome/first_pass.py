"""The Chrome export's first pass: over each rank, chunk by chunk, what the file needs
before its first event (the trace's first time, the channels' counts), and what the second
pass reads back from files: the end of each user region and the rank's numbered message
ends."""

import os

import numpy as np

from perfweave import progress

from perfweave.interop.chrome.messages import LAST, PENDING, Channels, Messages, Posts, hash64
from perfweave.interop.chrome.sink import cannot_write

from perfweave.interop import last_index, pair_regions
from perfweave.clock import to_ns
from perfweave.model.trace import T, comm_keys
from perfweave.dtypes import TypeSet

NEVER = np.iinfo(np.int64).min  # a user region's end: not left in its thread


FIRST_TIMED = TypeSet("CALL", "FLUSH", "ENTER")


def first_pass(X, ends, path):
    """What the file needs before its first event, from a pass over the ranks that
    keeps little: the time (ns, rank 0's clock) of the trace's first timed record, and
    the channels of messages with their numbers of sends and receives (Channels).
    Each rank's message ends are numbered here (RankFirstPass) and written to directory
    ends for flows, with the ends of its user regions, rather than found again there."""
    first, found = [], {}
    sends, recvs = [], []
    with progress.task("Chrome trace: first pass", len(X.ranks), "rank") as bar:
        for r in X.ranks:
            p = RankFirstPass(X.stream(r), ends, path)
            p.run()
            bar.step()
            if p.t_min is not None and p.meta.get("clock"):
                # ticks become ns by an increasing linear map: the first stays the first
                first.append(int(to_ns(p.meta, p.t_min)[0]))
            sends.append(p.messages[0].counts.table())
            recvs.append(p.messages[1].counts.table())
            found[r] = p
    return (min(first) if first else 0), Channels(sends, recvs), found


class RankFirstPass:
    """The first pass over one rank, chunk by chunk (RankExportStream), and what it leaves
    for the second: the rank's threads, the end of its user regions (a file per
    thread, the end of each ENTER in order), its message ends (a file per kind and
    thread, in the order of the records).

    A message's number on its channel counts the rank's earlier messages of the
    channel in the order of posting, as perfweave analyze numbers them
    (model/trace.py _messages): the order of the records with one thread (a receive
    posted by an MPI_Irecv at the place of its post), of the calls' enter times with
    several (then thread, then record). A receive's channel is known at its
    completion (MPI_ANY_SOURCE), after later posts may have completed: messages wait
    here until no message posted before them can still come (the watermark: the
    position every thread has reached, and the oldest open receive request), then are
    numbered in order and written. With several threads, the threads' chunks are read
    side by side, the thread that is behind in time first. What is carried: open
    requests, per channel its count, messages waiting for an earlier one, open user
    regions; not the rank."""

    def __init__(self, stream, ends, path):
        self.stream, self.rank, self.meta = stream, stream.rank, stream.meta
        self.ends, self.path = ends, path
        self.timed = len(stream.threads()) > 1
        _, ckeys = comm_keys(self.meta)
        self.comm_keys = np.r_[np.int64(0), ckeys].astype(np.int64)
        self.t_min = None  # ticks: the first CALL, FLUSH or ENTER
        self.seen = set()  # threads with records
        self.enter_max = None  # ns: the last ENTER's time
        self.stacks, self.nenter = {}, {}  # per thread: open ENTERs (their number), ENTERs
        self.fds, self.sizes = {}, {}
        self.messages = (Messages(self, "sends"), Messages(self, "recvs"))
        self.posts = Posts()  # open receive requests
        self.threads = [0]
        self.end_of_rank = 0

    def file(self, name):
        return os.path.join(self.ends, f"{name}-{self.rank}.bin")

    def put(self, name, data, offset=None):
        """Write bytes to file name (at its end, or at offset)."""
        try:
            if name not in self.fds:
                self.fds[name] = os.open(self.file(name), os.O_WRONLY | os.O_CREAT, 0o600)
                self.sizes[name] = 0
            if offset is None:
                offset = self.sizes[name]
                self.sizes[name] += len(data)
            os.pwrite(self.fds[name], data, offset)
        except OSError as e:
            raise cannot_write(self.path, e) from None

    def run(self):
        stream = self.stream
        stream.begin()
        threads = stream.threads()
        chunks = {t: stream.thread_chunks(t, base=0) for t in threads}
        # per thread: no later message of it is posted before this (a record's index
        # with one thread, a call's enter time with several)
        reached = {t: NEVER for t in threads}
        try:
            while chunks:
                t = min(chunks, key=lambda u: (reached[u], u))
                c = next(chunks[t], None)
                if c is None:
                    del chunks[t]
                    reached[t] = LAST
                else:
                    reached[t] = max(reached[t], self.chunk(c))
                if not chunks:
                    # the rank's end: requests never completed posted no message
                    self.messages[1].give_up_waiting()
                    self.posts = Posts()
                below = min(reached.values(), default=LAST)
                self.messages[0].settle(below)
                self.messages[1].settle(min(below, self.posts.oldest()))
        finally:
            for fd in self.fds.values():
                os.close(fd)
        stream.end()
        self.threads = sorted(self.seen | {0})
        self.end_of_rank = (
            stream.t_end if self.enter_max is None else max(stream.t_end, self.enter_max)
        )

    def chunk(self, c):
        """Take one chunk (of one thread); returns how far its thread has come."""
        rec, typ, n = c.rec, c.rec["type"], len(c.rec)
        t = int(c.thread[0])
        self.seen.add(t)
        pos = c.base + np.arange(n)
        firsts = rec["t0"][FIRST_TIMED(typ)]
        if len(firsts):
            m = firsts.min(keepdims=True)
            self.t_min = m if self.t_min is None else np.minimum(self.t_min, m)
        is_call = typ == T["CALL"]
        # the call of each record (a sub-event follows its call in the chunk)
        owner = np.maximum(last_index(is_call), 0)
        # where each record's message stands in the order of posting
        k = c.t0[owner] if self.timed else pos
        self._regions(c, t, typ)
        self._sends(c, t, typ, pos, owner, k)
        self._recvs(c, t, typ, pos, owner, k)
        if self.timed:
            return int(c.t0[is_call].max()) if is_call.any() else NEVER
        return c.base + n

    def _local_comm(self, comm):
        lc = comm.astype(np.int64) + 1
        lc[(lc < 0) | (lc >= len(self.comm_keys))] = 0
        return lc

    def _rows(self, c, t, i, pos, k, peer, src, dst):
        rec = c.rec
        rows = np.zeros(len(i), PENDING)
        rows["chan"] = hash64(
            src, dst, self.comm_keys[self._local_comm(rec["comm"][i])], rec["tag"][i]
        )
        rows["seq"], rows["thread"], rows["idx"] = -1, t, pos[i]
        rows["k1"], rows["own"], rows["ready"], rows["out"] = k[i], k[i], True, peer >= 0
        return rows

    def _sends(self, c, t, typ, pos, owner, k):
        S = np.flatnonzero((typ == T["SEND"]) & (c.rec["peer"] >= 0))
        peer = c.rec["peer"][S]
        rows = self._rows(c, t, S, pos, k, peer, np.full(len(S), self.rank), peer)
        rows["ts"] = c.t0[owner[S]]
        self.messages[0].add(rows)

    def _recvs(self, c, t, typ, pos, owner, k):
        rec = c.rec
        P = np.flatnonzero(typ == T["IRECV"])
        V = np.flatnonzero(typ == T["RECV"])
        peer = rec["peer"][V]
        rows = self._rows(c, t, V, pos, k, peer, peer, np.full(len(V), self.rank))
        # the arrow ends inside the receiving call, just before its end
        cb, ce = c.t0[owner[V]], c.t1[owner[V]]
        rows["ts"], rows["bytes"] = ce - np.minimum(1, ce - cb), rec["bytes"][V]
        # a receive with a request was posted by the MPI_Irecv of its post (the model's
        # rule: by number, the runtime's, else by request key for imported traces)
        done = rec["t0"][V] != 0
        rows["number"], rows["key"] = rec["t1"][V], rec["t0"][V]
        rows["ready"] = ~done
        pending = self.messages[1]
        old = np.flatnonzero(~pending.rows["ready"])
        here = np.flatnonzero(done)
        found, ok = self.posts.link(
            rec["t1"][P],
            rec["t0"][P],
            k[P],
            P,
            np.r_[rows["number"][here], pending.rows["number"][old]],
            np.r_[rows["key"][here], pending.rows["key"][old]],
            np.r_[V[here], np.full(len(old), LAST)],
        )
        rows["k1"][here[ok[: len(here)]]] = found[: len(here)][ok[: len(here)]]
        rows["ready"][here[ok[: len(here)]]] = True
        if not self.timed:
            # one thread: a completion meets its post after it; none: unlinked
            rows["ready"][here] = True
        got = old[ok[len(here) :]]
        pending.rows["k1"][got] = found[len(here) :][ok[len(here) :]]
        pending.rows["ready"][got] = True
        pending.add(rows)

    def _regions(self, c, t, typ):
        """The end of each ENTER of the chunk (the time of its LEAVE, or NEVER) to the
        thread's regions file; ENTERs left open wait on a stack for theirs."""
        enter, leave = typ == T["ENTER"], typ == T["LEAVE"]
        ei = np.flatnonzero(enter)
        if not len(ei) and not leave.any():
            return
        stack = self.stacks.get(t, np.zeros(0, np.int64))
        s = len(stack)
        partner, _, _ = pair_regions(
            np.r_[np.ones(s, bool), enter], np.r_[np.zeros(s, bool), leave]
        )
        first = self.nenter.get(t, 0)
        pc = partner[s + ei]
        end = np.where(pc >= 0, c.t0[np.maximum(pc - s, 0)], NEVER)
        name = f"regions-{t}"
        self.put(name, end.astype(np.int64).tobytes())
        closed = partner[:s] >= 0
        for o, e in zip(stack[closed].tolist(), c.t0[partner[:s][closed] - s].tolist()):
            self.put(name, np.int64(e).tobytes(), offset=8 * o)
        self.stacks[t] = np.r_[stack[~closed], first + np.flatnonzero(pc < 0)]
        self.nenter[t] = first + len(ei)
        if len(ei):
            m = int(c.t0[ei].max())
            self.enter_max = m if self.enter_max is None else max(self.enter_max, m)
