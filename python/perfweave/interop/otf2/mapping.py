"""perfweave's terms in OTF2's, for both directions: numbers (NS: nanoseconds a second,
an export's timer resolution; U32: OTF2's undefined rank and reference), the
attributes that carry what an event has no field for, and per MPI function its region
role, collective operation and kind of one-sided operation; the collective operations
of a window's creation and free, which an import folds into the window's record. What
maps to what is in docs/interop.md."""

import numpy as np

from perfweave.interop import blocking_twin, is_collective, is_p2p
from perfweave.model.trace import classify

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

# collective operation of a collective, by its blocking twin
COLL_OPS = {
    "MPI_Barrier": "BARRIER",
    "MPI_Bcast": "BCAST",
    "MPI_Gather": "GATHER",
    "MPI_Gatherv": "GATHERV",
    "MPI_Scatter": "SCATTER",
    "MPI_Scatterv": "SCATTERV",
    "MPI_Allgather": "ALLGATHER",
    "MPI_Allgatherv": "ALLGATHERV",
    "MPI_Alltoall": "ALLTOALL",
    "MPI_Alltoallv": "ALLTOALLV",
    "MPI_Alltoallw": "ALLTOALLW",
    "MPI_Allreduce": "ALLREDUCE",
    "MPI_Reduce": "REDUCE",
    "MPI_Reduce_scatter": "REDUCE_SCATTER",
    "MPI_Scan": "SCAN",
    "MPI_Exscan": "EXSCAN",
    "MPI_Reduce_scatter_block": "REDUCE_SCATTER_BLOCK",
    # OTF2 has no neighbourhood operations: the nearest all-to-all kind
    "MPI_Neighbor_allgather": "ALLGATHER",
    "MPI_Neighbor_allgatherv": "ALLGATHERV",
    "MPI_Neighbor_alltoall": "ALLTOALL",
    "MPI_Neighbor_alltoallv": "ALLTOALLV",
    "MPI_Neighbor_alltoallw": "ALLTOALLW",
}
# collective operations of RmaCollectiveEnd that create or free a window
WIN_OPS = (
    "CREATE_HANDLE",
    "DESTROY_HANDLE",
    "ALLOCATE",
    "DEALLOCATE",
    "CREATE_HANDLE_AND_ALLOCATE",
    "DESTROY_HANDLE_AND_DEALLOCATE",
)
# one-sided operations: puts and gets (RmaPut, RmaGet), the atomic ones' RmaAtomicType
PUTS = {"MPI_Put", "MPI_Rput"}
GETS = {"MPI_Get", "MPI_Rget"}
ATOMIC_TYPE = {
    "MPI_Compare_and_swap": "COMPARE_AND_SWAP",
    "MPI_Fetch_and_op": "FETCH_AND_ACCUMULATE",
    "MPI_Get_accumulate": "FETCH_AND_ACCUMULATE",
    "MPI_Rget_accumulate": "FETCH_AND_ACCUMULATE",
}


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
    if is_p2p(name) and name not in ("MPI_Start", "MPI_Startall", "MPI_Request_free", "MPI_Cancel"):
        return R.POINT2POINT
    if cat == "rma_comm":
        return R.RMA if name in PUTS | GETS else R.ATOMIC
    if cat == "file_data":
        return R.FILE_IO
    if cat == "mgmt_file":
        return R.FILE_IO_METADATA
    if name in ("MPI_Win_allocate", "MPI_Win_allocate_shared"):
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
