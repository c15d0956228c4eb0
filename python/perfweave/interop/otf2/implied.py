"""What an OTF2 event leaves implicit that a perfweave record says, derived the same way
by the export and the import: a record's flags (derived_flags: OTF2 says "MpiIsend"
where perfweave says SEND with the nonblocking flag, and the function of the enclosing
call says whether the send was synchronous or started a persistent request), and the
receive that completes a receive request (irecv_completions). Only a record whose flags
differ from the derived ones carries a "perfweave:flags" attribute; only a receive
request whose values differ from its receive's carries attributes of its own."""

import numpy as np

from perfweave._mpi import POSTS_REQUEST, SYNCHRONOUS
from perfweave.interop.otf2.mapping import blocking_twin, mpi_action
from perfweave.model.trace import F, T, family


def function_traits(functions):
    """Per function name (arrays over the list, and False for an unknown function after
    it): ssend, issend (a synchronous send, blocking or not), start (starts persistent
    requests), nonblocking collective, request-based RMA; from mpi.spec's table."""
    f = list(functions)

    def has(test):
        return np.array([bool(test(n)) for n in f] + [False])

    return {
        "ssend": has(lambda n: n in SYNCHRONOUS and mpi_action(n) == "send"),
        "issend": has(lambda n: n in SYNCHRONOUS and mpi_action(n) == "isend"),
        "start": has(lambda n: mpi_action(n) in ("start", "startall")),
        "nbcoll": has(lambda n: blocking_twin(n) != n),
        "rreq": has(lambda n: n in POSTS_REQUEST and family(n) == "rma"),
    }


def derived_flags(traits, fn, rtype, nonblocking_event, exclusive_lock=None):
    """The flags OTF2 implies for records of types rtype made by functions fn (index into
    the traits' list, -1 unknown); nonblocking_event: the record came from a request
    event (MpiIsend, MpiIrecvRequest); exclusive_lock: an exclusive RmaAcquireLock."""
    fn = np.where(fn >= 0, fn, len(traits["ssend"]) - 1)
    out = np.zeros(len(rtype), np.int64)
    send = rtype == T["SEND"]
    nb = np.asarray(nonblocking_event, bool)
    out |= np.where(send & ~nb & traits["ssend"][fn], F["SYNCHRONOUS"], 0)
    post = (send | (rtype == T["IRECV"])) & nb
    out |= np.where(post, F["NONBLOCKING"], 0)
    out |= np.where(send & nb & traits["issend"][fn], F["SYNCHRONOUS"], 0)
    out |= np.where(post & traits["start"][fn], F["PERSISTENT"], 0)
    out |= np.where((rtype == T["COLL"]) & traits["nbcoll"][fn], F["NONBLOCKING"], 0)
    out |= np.where((rtype == T["RMA"]) & traits["rreq"][fn], F["NONBLOCKING"], 0)
    if exclusive_lock is not None:
        out |= np.where((rtype == T["WSYNC"]) & np.asarray(exclusive_lock, bool), F["EXCLUSIVE"], 0)
    return out


def irecv_completions(typ, key, group):
    """For each IRECV record, the index of the RECV that completes it: the first RECV of
    the same request key after it in the same group (thread), or -1. OTF2's
    MpiIrecvRequest carries only the request, so an importer takes the receive's
    communicator, source, tag and size from there, and the exporter adds attributes only
    to requests whose values differ (MPI_ANY_SOURCE, a larger buffer)."""
    out = np.full(len(typ), -1, np.int64)
    cand = np.flatnonzero((typ == T["IRECV"]) | ((typ == T["RECV"]) & (key != 0)))
    if not len(cand):
        return out
    o = np.lexsort((-cand, key[cand], group[cand]))
    s = cand[o]
    is_recv = typ[s] == T["RECV"]
    idx = np.where(is_recv, np.arange(len(s)), -1)
    nearest = np.maximum.accumulate(idx)  # in reverse order: the next RECV after
    j = np.where(nearest >= 0, s[np.maximum(nearest, 0)], -1)
    ok = (
        (typ[s] == T["IRECV"])
        & (nearest >= 0)
        & (key[np.maximum(j, 0)] == key[s])
        & (group[np.maximum(j, 0)] == group[s])
    )
    out[s[ok]] = j[ok]
    return out
