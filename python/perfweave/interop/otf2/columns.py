"""The OTF2 events of a chunk of a thread's records (interop.RankExportStream), as numpy
columns (columns): which record becomes which event (calls.K kinds), its up to six arguments
and attribute list, and the keys that sort a location's events into OTF2's order (time
first: SORT). The MPI calls, trace buffer flushes, user regions and the program's begin and
end are made here; what the calls did (their sub-records) by _sub_events, with what a rank's
chunks look up per function, communicator, window and group (_RankTables)."""

import collections

import numpy as np

from perfweave._mpi import LOCKS_WINDOW, UNLOCKS_WINDOW
from perfweave.errors import PerfweaveError
from perfweave.interop import SUB, last_index, pair_regions, region_names
from perfweave.interop.otf2.calls import K
from perfweave.interop.otf2.implied import derived_flags, function_traits
from perfweave.interop.otf2.library import enum_value
from perfweave.interop.otf2.mapping import U32, U64, atomic_type, collective_op, rma_op
from perfweave.model.trace import F, T, classify

I64_MIN = np.iinfo(np.int64).min
I64_MAX = np.iinfo(np.int64).max
# Events sort at one time stamp by (class, ...): leaves of regions with a duration, then
# enters (the longest first, so that they nest), then leaves of zero-length regions.
CLS_LEAVE, CLS_ENTER, CLS_LEAVE0 = 0, 1, 2
LATE = 1 << 40  # order key of sub-events written just before their call's Leave
SORT = ("k", "grp", "sec", "cls", "time")  # np.lexsort's order: time first

# per function (names, then one entry for an unknown function), communicator, window
# and group of one rank: what its chunks' events look up (_rank_tables)
_RankTables = collections.namedtuple(
    "_RankTables",
    "names traits op atype put get lock unlock roles comm_ref look win_ref win_comm groups",
)


class _Lookup:
    """A vectorised map from (local id, world rank) to the rank in that communicator (or
    its remote group for an intercommunicator)."""

    def __init__(self, lists, world):
        self.w = max(int(world), 1)
        keys, vals = [], []
        for cid, members in enumerate(lists):
            m = np.asarray(members, np.int64)
            keys.append(cid * self.w + m)
            vals.append(np.arange(len(m), dtype=np.int64))
        self.keys = np.concatenate(keys) if keys else np.zeros(0, np.int64)
        vals = np.concatenate(vals) if vals else np.zeros(0, np.int64)
        o = np.argsort(self.keys, kind="stable")
        self.keys, self.vals = self.keys[o], vals[o]

    def __call__(self, cid, world):
        """(value for OTF2 as uint32, peer attribute needed): negative world ranks keep
        their int32 bits (-1 is OTF2's undefined rank); a world rank that is no member is
        written undefined and carried by the peer attribute."""
        cid = np.asarray(cid, np.int64)
        world = np.asarray(world, np.int64)
        out = (world & U32).astype(np.uint64)
        need = np.zeros(len(world), bool)
        pos = (world >= 0) & (cid >= 0) & (world < self.w)
        if len(self.keys) and pos.any():
            key = cid * self.w + world
            j = np.clip(np.searchsorted(self.keys, key), 0, len(self.keys) - 1)
            found = pos & (self.keys[j] == key)
            out[found] = self.vals[j[found]].astype(np.uint64)
            lost = (world >= 0) & ~found
        else:
            lost = world >= 0
        out[lost] = U32
        need |= lost
        return out, need


def columns(ex, rt, carry):
    """The OTF2 events of one chunk of a thread (RankExportStream) as columns: sort keys
    (time, cls, sec, grp, k), kind, up to six arguments, attribute list (key of
    ex.attr_specs). ex is the export (exporter._Exporter), whose definitions the
    events name; carry holds what a chunk leaves to the next (stream.Carry). Returns the
    columns and (indices, ends) of regions entered in earlier chunks that end in
    this one (stream.Location fixes the keys of their Enter events still held). Record
    indices (grp) count in the whole rank (rt.base): the keys are those the whole
    rank at once would give."""
    rec, typ = rt.rec, rt.rec["type"]
    n = len(rec)
    parts = []
    specs = ex.attr_specs
    G = rt.base
    resolved = (np.zeros(0, np.int64), np.zeros(0, np.int64))

    def part(idx, time, cls, sec, grp, k, kind, args=(), attr=None):
        m = len(idx)
        # broadcast views, copied once by the concatenation at the end
        p = {
            "time": np.asarray(time, np.int64),
            "cls": np.broadcast_to(np.asarray(cls, np.int64), (m,)),
            "sec": np.asarray(sec, np.int64),
            "grp": np.asarray(grp, np.int64),
            "k": np.broadcast_to(np.asarray(k, np.int64), (m,)),
            "kind": np.broadcast_to(np.asarray(kind, np.int64), (m,)),
            "attr": np.broadcast_to(np.int64(-1), (m,)) if attr is None else attr,
        }
        for i in range(6):
            a = args[i] if i < len(args) else 0
            p[f"a{i + 1}"] = np.broadcast_to(np.asarray(a).astype(np.uint64, copy=False), (m,))
        parts.append(p)

    t0, t1 = rt.t0, rt.t1
    fn_names = rt.functions
    fn_ref = np.array([ex.mpi_regions.get(nm, U32) for nm in fn_names] + [U32], np.uint64)

    # ---- MPI calls and trace buffer flushes: Enter and Leave ----
    ci = np.flatnonzero(typ == T["CALL"])
    fnc = rec["fn"][ci].astype(np.int64)
    unknown = fnc >= len(fn_names)
    if unknown.any():
        raise PerfweaveError(
            f"rank {rt.rank}: calls of function ids beyond its function list; the trace is corrupt"
        )
    reg = fn_ref[fnc]
    part(ci, t0[ci], CLS_ENTER, -t1[ci], G + ci, 0, K["ENTER"], (reg,))
    part(
        ci,
        t1[ci],
        np.where(t1[ci] > t0[ci], CLS_LEAVE, CLS_LEAVE0),
        -t0[ci],
        -(G + ci),
        0,
        K["LEAVE"],
        (reg,),
    )
    fi = np.flatnonzero(typ == T["FLUSH"])
    if len(fi):
        attr = specs.extend([(("bytes", int(b)),) for b in rec["bytes"][fi].tolist()])
        part(fi, t0[fi], CLS_ENTER, -t1[fi], G + fi, 0, K["ENTER"], (ex.flush_region,), attr)
        part(
            fi,
            t1[fi],
            np.where(t1[fi] > t0[fi], CLS_LEAVE, CLS_LEAVE0),
            -t0[fi],
            -(G + fi),
            0,
            K["LEAVE"],
            (ex.flush_region,),
        )

    # ---- user regions ----
    enter, leave = typ == T["ENTER"], typ == T["LEAVE"]
    if enter.any() or leave.any():
        # the regions still open before this chunk come first, as ENTERs
        sidx, st0, sref = carry.stack
        m = len(sidx)
        ext = lambda open_, mine: np.r_[open_, mine]  # noqa: E731
        p, _, u = pair_regions(ext(np.ones(m, bool), enter), ext(np.zeros(m, bool), leave))
        gidx, et0 = ext(sidx, G + np.arange(n)), ext(st0, t0)
        partner = np.where(p >= 0, gidx[np.maximum(p, 0)], -1)
        lost = u[m:]
        carry.lost += int(lost.sum())
        names, files, lines = region_names(rt, enter | leave, ex.symbolizer)
        el = np.flatnonzero(enter | leave)
        named = rec["comm"][el] >= 0
        refs = np.zeros(n, np.uint64)
        cache = carry.regions
        for i, nm, fl, ln, nd in zip(
            el.tolist(), names.tolist(), files.tolist(), lines.tolist(), named.tolist()
        ):
            key = (nm, fl, ln, nd)
            r = cache.get(key)
            if r is None:
                r = cache[key] = ex.user_region(nm, fl, ln, nd)
            refs[i] = r
        pe = np.where(p >= 0, et0[np.maximum(p, 0)], I64_MAX)
        ei = np.flatnonzero(enter)
        # an Enter whose Leave is in a later chunk: I64_MAX as for one that never
        # ends, until stream.Location learns its end (resolved)
        part(ei, t0[ei], CLS_ENTER, -pe[m + ei], G + ei, 0, K["ENTER"], (refs[ei],))
        done = np.flatnonzero(p[:m] >= 0)
        resolved = (sidx[done], pe[done])
        still = np.flatnonzero(p < 0)
        still = still[(still < m) | enter[np.maximum(still - m, 0)]]
        carry.stack = (gidx[still], et0[still], ext(sref, refs)[still])
        li = np.flatnonzero(leave & ~lost & (p[m:] >= 0))
        carry.unpaired += int((leave & ~lost & (p[m:] < 0)).sum())
        start = et0[p[m + li]]
        part(
            li,
            t0[li],
            np.where(t0[li] > start, CLS_LEAVE, CLS_LEAVE0),
            -start,
            -partner[m + li],
            0,
            K["LEAVE"],
            (refs[li],),
        )

    # ---- what the calls did ----
    _sub_events(ex, rt, part, specs, carry)

    # ---- the application's time: ProgramBegin / ProgramEnd on the master thread, and
    # MPI_Init / MPI_Finalize as zero-length calls at its ends where the records hold
    # neither (the trace starts when MPI_Init has returned: its entry is not known) ----
    if n and G == 0 and rt.thread[0] == 0:  # the rank's first chunk is thread 0's
        z = np.zeros(1, np.int64)
        idx = np.zeros(1, np.int64)
        # first at t_begin: ProgramBegin, then MPI_Init's Enter and Leave, before any
        # other Enter (their sec is above I64_MIN)
        begin = [(K["PROGRAM_BEGIN"], ())]
        # last at t_end, after the zero-length calls there (CLS_LEAVE0, sec I64_MAX)
        end = [(K["PROGRAM_END"], (ex.exit_status if rt.meta.get("state") == "complete" else 1,))]
        if rt.rank not in ex.window_calls:
            init, fini = ex.window_regions["MPI_Init"], ex.window_regions["MPI_Finalize"]
            begin += [(K["ENTER"], (init,)), (K["LEAVE"], (init,))]
            end[:0] = [(K["ENTER"], (fini,)), (K["LEAVE"], (fini,))]
        for k, (kind, args) in enumerate(begin):
            part(idx, [rt.t_begin], CLS_ENTER, [I64_MIN], z, k, kind, args)
        for k, (kind, args) in enumerate(end):
            part(idx, [rt.t_end], CLS_LEAVE0, [I64_MAX], z, k, kind, args)
    lostrec = np.flatnonzero(typ == T["LOST"])
    if len(lostrec):
        carry.lost_events += int(rec["bytes"][lostrec].sum())
        carry.lost_records = True
    if not parts:
        return None, resolved
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}, resolved


def _rank_tables(ex, rt):
    """What _sub_events looks up per function, communicator, window and group of
    rank rt.rank (_RankTables): the same for every chunk of the rank."""
    otf2, names = ex.otf2, rt.functions

    def per_name(value, last, dtype):
        return np.array([value(nm) for nm in names] + [last], dtype)

    keys = ex.local_comm.get(rt.rank, [])
    wdefs = rt.meta.get("windows", [])
    return _RankTables(
        names=names,
        traits=function_traits(names),
        op=per_name(
            lambda nm: enum_value(getattr(otf2.CollectiveOp, collective_op(nm))),
            enum_value(otf2.CollectiveOp.BARRIER),
            np.uint64,
        ),
        atype=per_name(
            lambda nm: enum_value(getattr(otf2.RmaAtomicType, atomic_type(nm))),
            enum_value(otf2.RmaAtomicType.ACCUMULATE),
            np.uint64,
        ),
        put=per_name(lambda nm: rma_op(nm) == "PUT", False, bool),
        get=per_name(lambda nm: rma_op(nm) == "GET", False, bool),
        lock=per_name(lambda nm: nm in LOCKS_WINDOW, False, bool),
        unlock=per_name(lambda nm: nm in UNLOCKS_WINDOW, False, bool),
        roles=[classify(nm)[1] for nm in names],
        comm_ref=np.array([ex.comms[k]._ref for k in keys] + [ex.world_comm._ref], np.uint64),
        look=_Lookup([c.get("ranks", []) for c in rt.meta.get("comms", [])], ex.X.world_size),
        win_ref=np.array(
            [
                ex.wins.get((keys[wd["comm"]], int(wd.get("seq", 0))))._ref
                if 0 <= wd.get("comm", -1) < len(keys)
                else U32
                for wd in wdefs
            ]
            + [U32],
            np.uint64,
        ),
        win_comm=np.array([wd.get("comm", -1) for wd in wdefs] + [-1], np.int64),
        groups=np.array(ex.rank_groups.get(rt.rank, []) + [U32], np.uint64),
    )


def _sub_events(ex, rt, part, specs, carry):
    otf2 = ex.otf2
    rec, typ = rt.rec, rt.rec["type"]
    call = last_index(typ == T["CALL"])
    si = np.flatnonzero(SUB(typ) & (call >= 0))
    if not len(si):
        return
    c = call[si]
    fn = rec["fn"][c].astype(np.int64)
    if carry.tables is None:
        carry.tables = _rank_tables(ex, rt)
    tab = carry.tables
    traits = tab.traits
    st = typ[si]
    flags = rec["flags"][si].astype(np.int64)
    peer = rec["peer"][si].astype(np.int64)
    tag = rec["tag"][si].astype(np.int64)
    comm = rec["comm"][si].astype(np.int64)
    nbytes = rec["bytes"][si].astype(np.int64)
    r0 = rec["t0"][si].astype(np.int64)
    r1 = rec["t1"][si].astype(np.int64)

    def per_fn(table):
        """A per-function table of _RankTables, per event."""
        return table[np.minimum(fn, len(tab.names))]

    comm_ref, look, win_ref, win_comm = tab.comm_ref, tab.look, tab.win_ref, tab.win_comm
    groups = tab.groups
    ncomm = len(comm_ref) - 1
    has_comm = (comm >= 0) & (comm < ncomm)
    cref = comm_ref[np.where(has_comm, comm, ncomm)]
    # a record without a communicator is written on MPI_COMM_WORLD, peer as world rank
    local, need_peer = look(np.where(has_comm, comm, -1), peer)
    no_comm = ~has_comm & np.isin(st, [T["SEND"], T["RECV"], T["COLL"]])
    local = np.where(no_comm, (peer & U32).astype(np.uint64), local)
    need_peer &= ~no_comm
    winid = np.where(np.isin(st, [T["WIN"], T["RMA"], T["WSYNC"]]), tag, -1)
    nwin = len(win_ref) - 1
    okwin = (winid >= 0) & (winid < nwin)
    wref = win_ref[np.where(okwin, winid, nwin)]
    wlocal, wneed = look(win_comm[np.where(okwin, winid, nwin)], peer)
    tag32 = (tag & U32).astype(np.uint64)
    b64 = nbytes.astype(np.uint64)
    key64 = r0.astype(np.uint64)
    recv64 = r1.astype(np.uint64)

    kind = np.full(len(si), -1, np.int64)
    kind2 = np.full(len(si), -1, np.int64)  # a second event (the begin of a pair)
    late = np.zeros(len(si), bool)  # written at the call's end
    A = [np.zeros(len(si), np.uint64) for _ in range(6)]
    nb_event = np.zeros(len(si), bool)
    excl = np.zeros(len(si), bool)

    def setargs(mask, *cols):
        for i, col in enumerate(cols):
            A[i][mask] = np.broadcast_to(np.asarray(col).astype(np.uint64), (len(si),))[mask]

    # point-to-point
    s = st == T["SEND"]
    nb = s & ((flags & F["NONBLOCKING"]) != 0)
    kind[s & ~nb] = K["SEND"]
    kind[nb] = K["ISEND"]
    nb_event |= nb
    setargs(s, local, cref, tag32, b64, key64)
    r = st == T["RECV"]
    kr = r & (r0 != 0)
    kind[r & ~kr] = K["RECV"]
    kind[kr] = K["IRECV"]
    late |= r
    setargs(r, local, cref, tag32, b64, key64)
    ir = st == T["IRECV"]
    kind[ir] = K["IRECV_REQ"]
    nb_event |= ir
    setargs(ir, key64)
    sd = st == T["SEND_DONE"]
    kind[sd] = K["ISEND_DONE"]
    late |= sd
    setargs(sd, key64)
    # collectives: begin at the call's enter, end at its leave
    co = st == T["COLL"]
    op_col = per_fn(tab.op)
    # a nonblocking one as Score-P writes it: NonBlockingCollectiveRequest when it is
    # started, NonBlockingCollectiveComplete (with what the collective was) in the
    # call that completes it (its COLL_DONE: same request key and post number)
    nbc = co & ((flags & F["NONBLOCKING"]) != 0) & (r0 != 0)
    co &= ~nbc
    kind[co] = K["COLL_END"]
    kind2[co] = K["COLL_BEGIN"]
    late |= co
    setargs(co, op_col, cref, local, b64, recv64)
    kind[nbc] = K["NBC_REQUEST"]
    late |= nbc
    setargs(nbc, key64)
    cd = st == T["COLL_DONE"]
    kind[cd] = K["NBC_COMPLETE"]
    late |= cd
    post = np.full(len(si), -1, np.int64)
    if cd.any():
        started = {
            (int(k), int(n)): j
            for j, k, n in zip(np.flatnonzero(nbc).tolist(), r0[nbc].tolist(), tag[nbc].tolist())
        }
        post[cd] = [
            started.get((int(k), int(n)), -1) for k, n in zip(r0[cd].tolist(), r1[cd].tolist())
        ]
    pj = np.maximum(post, 0)
    found = cd & (post >= 0)
    # what a start needs to give its completion, from this chunk or an earlier one
    s_op, s_local, s_b64, s_recv = op_col[pj], local[pj], b64[pj], recv64[pj]
    s_need, s_peer = need_peer[pj], peer[pj]
    if cd.any() or nbc.any():
        for j in np.flatnonzero(cd & ~found).tolist():
            got = carry.started.pop((int(r0[j]), int(r1[j])), None)
            if got is not None:
                found[j] = True
                s_op[j], s_local[j], s_b64[j], s_recv[j], s_need[j], s_peer[j] = got
        done = {(int(k), int(n)) for k, n in zip(r0[cd].tolist(), r1[cd].tolist())}
        for j, k, n in zip(np.flatnonzero(nbc).tolist(), r0[nbc].tolist(), tag[nbc].tolist()):
            if (int(k), int(n)) not in done:
                carry.started[(int(k), int(n))] = (
                    op_col[j],
                    local[j],
                    b64[j],
                    recv64[j],
                    need_peer[j],
                    peer[j],
                )
    # a completion whose start is not in the trace: a barrier of unknown size
    setargs(
        cd,
        np.where(found, s_op, enum_value(otf2.CollectiveOp.BARRIER)),
        cref,
        np.where(found, s_local, U32),
        np.where(found, s_b64, 0),
        np.where(found, s_recv, 0),
        key64,
    )
    done_peer = found & s_need
    # windows
    wi = st == T["WIN"]
    free = wi & ((flags & F["FREE"]) != 0)
    kind[wi & ~free] = K["WIN_CREATE"]
    kind[free] = K["WIN_DESTROY"]
    late |= wi & ~free
    setargs(wi, wref)
    # one-sided operations
    rm = st == T["RMA"]
    put = rm & per_fn(tab.put) & (r1 == 0)
    get = rm & per_fn(tab.get) & (nbytes == 0)
    atom = rm & ~put & ~get
    kind[put] = K["PUT"]
    kind[get] = K["GET"]
    kind[atom] = K["ATOMIC"]
    setargs(put, wref, wlocal, b64, key64)
    setargs(get, wref, wlocal, recv64, key64)
    setargs(atom, wref, wlocal, per_fn(tab.atype), b64, recv64, key64)
    # window synchronisation
    ws = st == T["WSYNC"]

    def role_in(*wanted):
        # per function, then per event: comparing strings per event is most of the
        # time
        return per_fn(np.array([r in wanted for r in tab.roles] + [False]))

    fence = ws & role_in("win_fence")
    gsync = ws & role_in("win_post", "win_start", "win_complete", "win_wait", "win_test")
    lock = ws & per_fn(tab.lock)
    unlock = ws & per_fn(tab.unlock)
    other = ws & ~fence & ~gsync & ~lock & ~unlock
    kind[fence] = K["RMA_COLL_END"]
    kind2[fence] = K["RMA_COLL_BEGIN"]
    level = enum_value(otf2.RmaSyncLevel.PROCESS) | enum_value(otf2.RmaSyncLevel.MEMORY)
    setargs(fence, enum_value(otf2.CollectiveOp.BARRIER), level, wref, U32, 0, 0)
    kind[gsync] = K["GROUP_SYNC"]
    # the group of an epoch's closing call is that of the call that opened it
    gid = np.where(gsync & role_in("win_post", "win_start"), r1, -1)
    for opener, closers in (
        ("win_start", ["win_complete"]),
        ("win_post", ["win_wait", "win_test"]),
    ):
        idx = np.flatnonzero(ws & role_in(opener, *closers))
        if not len(idx):
            continue
        o = np.lexsort((idx, winid[idx]))
        sidx = idx[o]
        is_open = role_in(opener)[sidx]
        last = last_index(is_open)
        same = (last >= 0) & (winid[sidx[np.maximum(last, 0)]] == winid[sidx])
        close = ~is_open & same
        gid[sidx[close]] = r1[sidx[np.maximum(last, 0)][close]]
        # an epoch opened in an earlier chunk
        opened = carry.openers.setdefault(opener, {})
        for j in sidx[~is_open & ~same].tolist():
            gid[j] = opened.get(int(winid[j]), -1)
        for j in sidx[is_open].tolist():
            opened[int(winid[j])] = int(r1[j])
    ng = len(groups) - 1
    gref = groups[np.where((gid >= 0) & (gid < ng), gid, ng)]
    setargs(gsync, enum_value(otf2.RmaSyncLevel.PROCESS), wref, gref)
    kind[lock] = K["ACQUIRE"]
    exclusive = lock & ((flags & F["EXCLUSIVE"]) != 0)
    excl |= exclusive & (peer >= 0)
    setargs(
        lock,
        wref,
        wlocal,
        0,
        np.where(exclusive, enum_value(otf2.LockType.EXCLUSIVE), enum_value(otf2.LockType.SHARED)),
    )
    kind[unlock] = K["RELEASE"]
    setargs(unlock, wref, wlocal, 0)
    kind[other] = K["RMA_SYNC"]
    setargs(other, wref, wlocal, enum_value(otf2.RmaSyncType.MEMORY))
    late |= ws & ~fence

    # attributes: what the events cannot say
    dflags = derived_flags(traits, fn, st, nb_event, excl)
    want = {}
    bad_flags = flags != dflags
    peer_attr = np.zeros(len(si), bool)
    peer_attr |= (s | r | co) & need_peer
    peer_attr |= (rm | lock | unlock | other) & wneed
    peer_attr |= (fence | gsync | wi) & (peer >= 0)
    comm_attr = no_comm & (s | r)
    # a receive request says what it asked for only where its receive differs
    # (stream.irecv_attributes, found by the first pass)
    ir_attr = ir.copy()
    if ir.any():
        ir_attr[ir] = carry.irecv_attributes(int(ir.sum()))
    for j in np.flatnonzero(bad_flags | peer_attr | comm_attr | ir_attr | done_peer).tolist():
        spec = []
        if bad_flags[j]:
            spec.append(("flags", int(flags[j])))
        if done_peer[j]:
            spec.append(("peer", int(s_peer[j])))
        if ir_attr[j]:
            spec += [
                ("peer", int(peer[j])),
                ("tag", int(tag[j])),
                ("bytes", int(nbytes[j]) & U64),
                ("comm", int(cref[j]) if has_comm[j] else U32),
            ]
        elif peer_attr[j]:
            spec.append(("peer", int(peer[j])))
        if comm_attr[j]:
            spec.append(("comm", U32))
        want[j] = tuple(spec)
    attr = np.full(len(si), -1, np.int64)
    for j, spec in want.items():
        attr[j] = specs.add(spec)

    # order inside the call: record order; an event meant for the call's enter that
    # follows one written at its end is written at the end too
    em = np.concatenate([np.flatnonzero(kind2 >= 0), np.arange(len(si))])
    first = np.r_[np.ones(int((kind2 >= 0).sum()), bool), np.zeros(len(si), bool)]
    o = np.lexsort((~first, em))
    em, first = em[o], first[o]
    ekind = np.where(first, kind2[em], kind[em])
    elate = np.where(first, False, late[em])
    ec = c[em]
    grp_start = np.r_[True, ec[1:] != ec[:-1]] if len(ec) else np.zeros(0, bool)
    cs = np.cumsum(elate)
    base = np.repeat(
        cs[grp_start] - elate[grp_start], np.diff(np.r_[np.flatnonzero(grp_start), len(ec)])
    )
    elate = (cs - base) > 0
    ordinal = np.arange(len(em)) - np.repeat(
        np.flatnonzero(grp_start), np.diff(np.r_[np.flatnonzero(grp_start), len(ec)])
    )
    ok = ekind >= 0
    em, ec, ekind, elate, ordinal, first = (x[ok] for x in (em, ec, ekind, elate, ordinal, first))
    ta, tb = rt.t0[ec], rt.t1[ec]
    time_ = np.where(elate, tb, ta)
    cls = np.where(elate, np.where(tb > ta, CLS_LEAVE, CLS_LEAVE0), CLS_ENTER)
    sec = np.where(elate, -ta, -tb)
    grp = np.where(elate, -(rt.base + ec), rt.base + ec)
    k = np.where(elate, ordinal - LATE, ordinal + 1)
    args = [np.where(first, np.uint64(0), a[em]).astype(np.uint64) for a in A]
    at = np.where(first, -1, attr[em])
    part(si[em], time_, cls, sec, grp, k, ekind, args, at)
