"""The metric tree of the wait-state analysis, declared once.

Each metric: id (Scalasca's name where it has one), display name, parent, unit
(seconds, count or bytes), how its value is had ("stored": computed per call path and
rank and inclusive of its children by construction; "sum": the sum of its children),
and one sentence of what it means. The tree follows Scalasca 2.6 (Time > Execution >
MPI > Synchronization / Communication > ...) and, for one-sided communication, Hermanns
et al., "Scalable detection of MPI-2 remote memory access inefficiency patterns"
(IJHPCA 2012), Tables 2-3; see ../shared/wait-states.md.
"""

M = [
    # id, name, parent, unit, how, description
    ("time", "Time", None, "s", "sum", "All time of the ranks, from MPI_Init to MPI_Finalize."),
    ("execution", "Execution", "time", "s", "sum", "Time of the program itself."),
    (
        "computation",
        "Computation",
        "execution",
        "s",
        "stored",
        "Time outside MPI (in the program's own code, or in user functions when the program "
        "was built with -finstrument-functions).",
    ),
    ("mpi", "MPI", "execution", "s", "sum", "Time in MPI calls."),
    (
        "mpi_management",
        "Management",
        "mpi",
        "s",
        "sum",
        "Communicator, window and file management.",
    ),
    (
        "mpi_mgmt_comm",
        "Communicator management",
        "mpi_management",
        "s",
        "stored",
        "Creating and freeing communicators and topologies.",
    ),
    (
        "mpi_mgmt_win",
        "Window management",
        "mpi_management",
        "s",
        "stored",
        "Creating and freeing RMA windows.",
    ),
    (
        "mpi_rma_wait_at_create",
        "Wait at Window Create",
        "mpi_mgmt_win",
        "s",
        "stored",
        "Time in MPI_Win_create waiting for the last process to enter it.",
    ),
    (
        "mpi_rma_wait_at_free",
        "Wait at Window Free",
        "mpi_mgmt_win",
        "s",
        "stored",
        "Time in MPI_Win_free waiting for the last process to enter it.",
    ),
    (
        "mpi_mgmt_file",
        "File management",
        "mpi_management",
        "s",
        "stored",
        "Opening, closing, seeking and resizing MPI files.",
    ),
    (
        "mpi_synchronization",
        "Synchronization",
        "mpi",
        "s",
        "sum",
        "Explicit synchronisation: barriers and RMA window synchronisation.",
    ),
    (
        "mpi_sync_collective",
        "Collective",
        "mpi_synchronization",
        "s",
        "stored",
        "Time in MPI_Barrier.",
    ),
    (
        "mpi_barrier_wait",
        "Wait at Barrier",
        "mpi_sync_collective",
        "s",
        "stored",
        "Time in a barrier before the last rank entered it: load imbalance before the barrier.",
    ),
    (
        "mpi_barrier_completion",
        "Barrier Completion",
        "mpi_sync_collective",
        "s",
        "stored",
        "Time in a barrier after the first rank left it.",
    ),
    (
        "mpi_rma_synchronization",
        "One-sided",
        "mpi_synchronization",
        "s",
        "sum",
        "RMA window synchronisation.",
    ),
    (
        "mpi_rma_sync_active",
        "Active target",
        "mpi_rma_synchronization",
        "s",
        "stored",
        "Time in MPI_Win_fence, MPI_Win_post/start/complete/wait/test.",
    ),
    (
        "mpi_rma_sync_late_post",
        "Late Post",
        "mpi_rma_sync_active",
        "s",
        "stored",
        "Time an access epoch (MPI_Win_start or MPI_Win_complete) waits for the target's "
        "MPI_Win_post.",
    ),
    (
        "mpi_rma_early_wait",
        "Early Wait",
        "mpi_rma_sync_active",
        "s",
        "stored",
        "Time in MPI_Win_wait before the last origin entered MPI_Win_complete.",
    ),
    (
        "mpi_rma_late_complete",
        "Late Complete",
        "mpi_rma_early_wait",
        "s",
        "stored",
        "Part of Early Wait between the origin's last RMA operation and its MPI_Win_complete: "
        "the access epoch was closed late.",
    ),
    (
        "mpi_rma_wait_at_fence",
        "Wait at Fence",
        "mpi_rma_sync_active",
        "s",
        "stored",
        "Time in MPI_Win_fence before the last rank entered it.",
    ),
    (
        "mpi_rma_early_fence",
        "Early Fence",
        "mpi_rma_wait_at_fence",
        "s",
        "stored",
        "Part of Wait at Fence spent waiting for RMA operations to this rank to finish.",
    ),
    (
        "mpi_rma_sync_passive",
        "Passive target",
        "mpi_rma_synchronization",
        "s",
        "stored",
        "Time in MPI_Win_lock/unlock and flushes.",
    ),
    ("mpi_communication", "Communication", "mpi", "s", "sum", "Moving data."),
    (
        "mpi_point2point",
        "Point-to-point",
        "mpi_communication",
        "s",
        "stored",
        "Sends, receives, and the waits and tests that complete them.",
    ),
    (
        "mpi_latesender",
        "Late Sender",
        "mpi_point2point",
        "s",
        "stored",
        "Time in a receive (or the wait completing it) before the matching send started.",
    ),
    (
        "mpi_latesender_wo",
        "Late Sender, wrong order",
        "mpi_latesender",
        "s",
        "stored",
        "Late Sender caused by receiving messages in another order than they were sent.",
    ),
    (
        "mpi_lswo_different",
        "Different sources",
        "mpi_latesender_wo",
        "s",
        "stored",
        "The messages came from different ranks.",
    ),
    (
        "mpi_lswo_same",
        "Same source",
        "mpi_latesender_wo",
        "s",
        "stored",
        "The messages came from the same rank.",
    ),
    (
        "mpi_latereceiver",
        "Late Receiver",
        "mpi_point2point",
        "s",
        "stored",
        "Time in a synchronous (or blocking large) send before the receiver posted the receive.",
    ),
    (
        "mpi_collective",
        "Collective",
        "mpi_communication",
        "s",
        "stored",
        "Collective communication (all collectives but barriers).",
    ),
    (
        "mpi_earlyreduce",
        "Early Reduce",
        "mpi_collective",
        "s",
        "stored",
        "Time the root of an n-to-1 operation (Reduce, Gather) waits for the last sender.",
    ),
    (
        "mpi_earlyscan",
        "Early Scan",
        "mpi_collective",
        "s",
        "stored",
        "Time in MPI_Scan/Exscan waiting for a lower rank to enter.",
    ),
    (
        "mpi_latebroadcast",
        "Late Broadcast",
        "mpi_collective",
        "s",
        "stored",
        "Time in a 1-to-n operation (Bcast, Scatter) before the root entered it.",
    ),
    (
        "mpi_wait_nxn",
        "Wait at N x N",
        "mpi_collective",
        "s",
        "stored",
        "Time in an all-to-all operation (Allreduce, Allgather, Alltoall, Reduce_scatter) before "
        "the last rank entered it.",
    ),
    (
        "mpi_nxn_completion",
        "N x N Completion",
        "mpi_collective",
        "s",
        "stored",
        "Time in an all-to-all operation after the first rank left it.",
    ),
    (
        "mpi_rma_communication",
        "One-sided",
        "mpi_communication",
        "s",
        "stored",
        "Time in RMA operations (Put, Get, Accumulate, ...).",
    ),
    (
        "mpi_rma_comm_late_post",
        "Late Post / Early Transfer",
        "mpi_rma_communication",
        "s",
        "stored",
        "Time in an RMA operation issued before the target opened its exposure "
        "epoch (its MPI_Win_post).",
    ),
    ("mpi_io", "File I/O", "mpi", "s", "stored", "MPI-IO reads and writes."),
    (
        "mpi_other",
        "Other",
        "mpi",
        "s",
        "stored",
        "Other MPI calls (rank and size queries, datatypes, groups, ...).",
    ),
    (
        "overhead",
        "Overhead",
        "time",
        "s",
        "stored",
        "Time perfweave spent writing trace buffers (discounted from the program's time).",
    ),
    ("visits", "Visits", None, "count", "stored", "MPI calls."),
    (
        "bytes",
        "MPI bytes",
        None,
        "bytes",
        "stored",
        "Bytes sent and received by point-to-point, collective and one-sided calls.",
    ),
    (
        "mpi_latesender_count",
        "Late Sender instances",
        None,
        "count",
        "stored",
        "Receives that waited for their sender.",
    ),
    (
        "mpi_latereceiver_count",
        "Late Receiver instances",
        None,
        "count",
        "stored",
        "Sends that waited for their receiver.",
    ),
    (
        "mpi_rma_pairsync_count",
        "Pair-wise one-sided synchronizations",
        None,
        "count",
        "stored",
        "At each fence, the ranks of the window a rank synchronises with; at "
        "MPI_Win_complete / MPI_Win_wait, the members of the access / exposure group.",
    ),
    (
        "mpi_rma_pairsync_unneeded_count",
        "Unneeded",
        "mpi_rma_pairsync_count",
        "count",
        "stored",
        "Of those, the synchronisations with ranks that did not access this rank "
        "(target side) or that this rank did not access (MPI_Win_complete) in the epoch.",
    ),
    # root causes (analysis/rootcause.py; Scalasca 2.6's ids): computed over the whole
    # trace's event graph (by default up to ROOT_CAUSE_CALLS calls)
    (
        "critical_path",
        "Critical path",
        None,
        "s",
        "stored",
        "Time on the critical path (the chain of activities that set the run's length, "
        "followed backwards from the last location to finish across every wait state to "
        "its cause), by call path and the rank where it ran.",
    ),
    (
        "critical_path_imbalance",
        "Imbalance",
        "critical_path",
        "s",
        "stored",
        "A call path's time on the critical path minus its mean activity time per "
        "location, where positive (shared among ranks as their critical-path time).",
    ),
    (
        "delay",
        "Delay costs",
        None,
        "s",
        "sum",
        "Waiting time caused by each call path's excess time (delay) on the rank that made "
        "others wait: directly (short-term) and through waits it propagated (long-term).",
    ),
    ("delay_mpi", "MPI", "delay", "s", "sum", "Delays causing wait states in MPI calls."),
    ("delay_p2p", "Point-to-point", "delay_mpi", "s", "sum", "Delays causing p2p waits."),
]
for kid, name, parent, what in (
    ("latesender", "Late Sender", "delay_p2p", "Late Sender"),
    ("latereceiver", "Late Receiver", "delay_p2p", "Late Receiver"),
    ("barrier", "Barrier", "delay_collective", "Wait at Barrier, Fence and Window Create/Free"),
    ("n2n", "N x N", "delay_collective", "Wait at N x N"),
    ("12n", "1-to-N", "delay_collective", "Late Broadcast"),
    ("n21", "N-to-1", "delay_collective", "Early Reduce"),
    ("rma", "One-sided", "delay_mpi", "Late Post and Early Wait"),
):
    if kid == "barrier":
        M.append(
            (
                "delay_collective",
                "Collective",
                "delay_mpi",
                "s",
                "sum",
                "Delays causing waits in collective operations and RMA window synchronisation.",
            )
        )
    agg = f"delay_{kid}_aggregate"
    M += [
        (agg, name, parent, "s", "sum", f"Delays causing {what} wait states."),
        (
            f"delay_{kid}",
            "Short-term",
            agg,
            "s",
            "stored",
            f"Delays that directly cause {what} wait states.",
        ),
        (
            f"delay_{kid}_longterm",
            "Long-term",
            agg,
            "s",
            "stored",
            f"Delays that cause {what} wait states indirectly, through the waits they propagate.",
        ),
    ]
# Scalasca's suffixes: _latesender for direct / indirect, _ls for propagating / terminal
for group, gname, a, b, an, bn, adesc, bdesc, ls, lr in (
    (
        "waitstates_direct_vs_indirect",
        "Point-to-point wait states: direct vs. indirect",
        "mpi_wait_direct",
        "mpi_wait_indirect",
        "Direct",
        "Indirect",
        "Waiting caused by the partner's own delay.",
        "Waiting the partner passed on: the share of the wait due to its own wait states.",
        "latesender",
        "latereceiver",
    ),
    (
        "waitstates_propagating_vs_terminal",
        "Point-to-point wait states: propagating vs. terminal",
        "mpi_wait_propagating",
        "mpi_wait_terminal",
        "Propagating",
        "Terminal",
        "Waiting that made this rank late at a later synchronisation, causing waits there.",
        "Waiting that caused no further wait.",
        "ls",
        "lr",
    ),
):
    M += [
        (group, gname, None, "s", "sum", "Late Sender and Late Receiver time, classified."),
        (a, an, group, "s", "sum", adesc),
        (f"{a}_{ls}", "Late Sender", a, "s", "stored", adesc),
        (f"{a}_{lr}", "Late Receiver", a, "s", "stored", adesc),
        (b, bn, group, "s", "sum", bdesc),
        (f"{b}_{ls}", "Late Sender", b, "s", "stored", bdesc),
        (f"{b}_{lr}", "Late Receiver", b, "s", "stored", bdesc),
    ]
M.append(
    (
        "delay_savings",
        "Ideal-replay savings",
        None,
        "s",
        "stored",
        "For the largest causes of waiting (rank and call path): the run time the "
        "ideal-network replay saves when that delay is removed (the cause's bursts in it "
        "set to the waiting side's).",
    )
)

IDS = [m[0] for m in M]
INDEX = {m: i for i, m in enumerate(IDS)}
PARENT = {m[0]: m[2] for m in M}
NAME = {m[0]: m[1] for m in M}
UNIT = {m[0]: m[3] for m in M}
HOW = {m[0]: m[4] for m in M}
DESCRIPTION = {m[0]: m[5] for m in M}
CHILDREN = {i: [m[0] for m in M if m[2] == i] for i in IDS}

# time category of an MPI call (model/trace.classify) -> the metric holding its time
CATEGORY_METRIC = {
    "init": "mpi_other",
    "mgmt_comm": "mpi_mgmt_comm",
    "mgmt_win": "mpi_mgmt_win",
    "mgmt_file": "mpi_mgmt_file",
    "sync_coll": "mpi_sync_collective",
    "rma_active": "mpi_rma_sync_active",
    "rma_passive": "mpi_rma_sync_passive",
    "p2p": "mpi_point2point",
    "coll": "mpi_collective",
    "rma_comm": "mpi_rma_communication",
    "file_data": "mpi_io",
    "other": "mpi_other",
}


def root_of(mid):
    while PARENT[mid]:
        mid = PARENT[mid]
    return mid


# the metrics of the root-cause analysis (analysis/rootcause.py), not of the patterns
ROOT_CAUSE = [
    m for m in IDS if root_of(m) not in ("time", "visits", "bytes") and not m.endswith("_count")
]

# the wait-state patterns (time metrics that are waiting, not time in calls)
PATTERNS = [
    m
    for m in IDS
    if UNIT[m] == "s"
    and HOW[m] == "stored"
    and m not in CATEGORY_METRIC.values()
    and m not in ("computation", "overhead")
    and root_of(m) == "time"
]


def depth(mid):
    d = 0
    while PARENT[mid]:
        mid = PARENT[mid]
        d += 1
    return d


def roots():
    return [m[0] for m in M if m[2] is None]


def walk(mid=None):
    """Metric ids in tree order (depth first), from the roots or below mid."""
    for r in [mid] if mid else roots():
        yield r
        for c in CHILDREN[r]:
            yield from walk(c)
