"""perfweave's terms in OTF2's, for both directions: numbers (NS: nanoseconds a second,
an export's timer resolution; U32: OTF2's undefined rank and reference), the
attributes that carry what an event has no field for, and per MPI function its blocking
twin, region role, collective operation and kind of one-sided operation (from mpi.spec's
table, perfweave/_mpi.py); the collective operations of a window's creation and free,
which an import folds into the window's record. What maps to what is in docs/interop.md."""

import numpy as np

from perfweave._mpi import ALLOCATES_WINDOW, FUNCTIONS, OTF2_COLLECTIVE_OPS, OTF2_RMA_OPS
from perfweave.model.trace import classify, family

NS = 10**9
U32 = 0xFFFFFFFF
U64 = 0xFFFFFFFFFFFFFFFF

# attributes that carry what an OTF2 event has no field for (docs/interop.md)
ATTRIBUTES = (
    (
        "flags",
        "UINT8",
        "perfweave record flags (PW_EVF_*) where they differ from the ones "
        "the event and its MPI function imply",
    ),
    (
        "peer",
        "INT32",
        "world rank: requested source of a receive request, or a peer that "
        "is not a member of the event's communicator",
    ),
    ("tag", "INT32", "requested tag of a receive request (-1: MPI_ANY_TAG)"),
    ("bytes", "UINT64", "buffer size of a receive request; bytes written by a trace buffer flush"),
    ("comm", "COMM", "communicator of a receive request; undefined: the record has none"),
)


def collective_op(name):
    """The OTF2_CollectiveOp (its name) of a collective MPI function: mpi.spec's, by the
    function's action; ALLREDUCE for one the spec does not wrap."""
    return OTF2_COLLECTIVE_OPS.get(name, "ALLREDUCE")


def rma_op(name):
    """What OTF2 makes of a one-sided communication: "PUT" (RmaPut), "GET" (RmaGet), or
    the OTF2_RmaAtomicType (its name) of an RmaAtomic; None for another function."""
    return OTF2_RMA_OPS.get(name)


def atomic_type(name):
    """The OTF2_RmaAtomicType (its name) of an RmaAtomic of function name: ACCUMULATE
    where name is no atomic operation (a put or get the export writes as one)."""
    op = OTF2_RMA_OPS.get(name)
    return "ACCUMULATE" if op in (None, "PUT", "GET") else op


# collective operations of RmaCollectiveEnd that create or free a window
WIN_OPS = (
    "CREATE_HANDLE",
    "DESTROY_HANDLE",
    "ALLOCATE",
    "DEALLOCATE",
    "CREATE_HANDLE_AND_ALLOCATE",
    "DESTROY_HANDLE_AND_DEALLOCATE",
)


# what identifies an MPI function here is mpi.spec's (perfweave/_mpi.py), as for
# model/trace.py classify(), so that export, import and the model agree


def blocking_twin(name):
    """MPI_Iallreduce -> MPI_Allreduce; other names unchanged."""
    f = FUNCTIONS.get(name)
    return f[3] or name if f else name


def is_collective(name):
    return family(name) == "coll"


def is_p2p(name):
    """A point-to-point MPI function (sends, receives, probes, persistent requests)."""
    return family(name) == "p2p"


def mpi_action(name):
    """The action of an MPI function in mpi.spec (\"\" for one it does not wrap)."""
    f = FUNCTIONS.get(name)
    return f[1] if f else ""


def region_role(otf2, name):
    """OTF2 region role of an MPI function, as Score-P gives them."""
    R = otf2.RegionRole
    cat, role = classify(name)
    twin = blocking_twin(name)
    if twin == "MPI_Barrier":
        return R.BARRIER
    if is_collective(name):
        c2, r2 = classify(twin)
        return {
            "n2n": R.COLL_ALL2ALL,
            "12n": R.COLL_ONE2ALL,
            "n21": R.COLL_ALL2ONE,
            "scan": R.COLL_OTHER,
        }.get(r2, R.COLL_ALL2ALL if "all" in twin.lower() or "Neighbor" in twin else R.COLL_OTHER)
    # starting or dropping requests moves nothing itself
    if is_p2p(name) and mpi_action(name) not in ("start", "startall", "request_free", "cancel"):
        return R.POINT2POINT
    if cat == "rma_comm":
        return R.RMA if rma_op(name) in ("PUT", "GET") else R.ATOMIC
    if cat == "file_data":
        return R.FILE_IO
    if cat == "mgmt_file":
        return R.FILE_IO_METADATA
    if name in ALLOCATES_WINDOW:
        return R.ALLOCATE
    return R.FUNCTION


def lookup(mapping, keys, default=-1):
    """mapping[key] for every key of an integer array (default where missing)."""
    keys = np.asarray(keys).astype(np.int64)
    if not mapping:
        return np.full(len(keys), default, np.int64)
    k = np.array(sorted(mapping), np.int64)
    v = np.array([mapping[x] for x in k.tolist()], np.int64)
    j = np.clip(np.searchsorted(k, keys), 0, len(k) - 1)
    return np.where(k[j] == keys, v[j], default)
