"""How analysis processes share what the patterns need (Scalasca's parallel replay,
done in bulk).

Every rank of the traced run is owned by one analysis process. A pattern that needs
data of another rank (the sender's enter time at a receive, the latest enter of a
collective instance) sends the rows that carry it, as numpy records, to the process
that needs them: `route(rows, dest)` delivers each row to the process owning rank
(or instance) `dest`. In one process (`Local`) that is the identity, so the serial
and the parallel analysis run the same code and, since every time is an integer
number of nanoseconds, give identical results.
"""

import numpy as np


def _mix(keys):
    """A well-spread 64-bit hash of int64 keys (splitmix64 finaliser)."""
    x = np.asarray(keys).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


class Local:
    """One process owns every rank."""

    nproc = 1
    me = 0
    parallel = False

    def __init__(self, world_size):
        self.world_size = world_size

    def owner(self, ranks):
        return np.zeros(len(ranks), np.int64)

    def owner_of_keys(self, keys):
        return np.zeros(len(keys), np.int64)

    def owns(self, rank):
        return True

    def route(self, rows, dest_proc):
        return rows

    def allgather(self, obj):
        return [obj]

    def allreduce(self, array, op):
        """Element-wise reduction ("max", "min" or "sum") of a numpy array over the
        processes; every process gets the result."""
        return array

    def alltoallv(self, values, counts):
        """values: a 1-d numpy array, the first counts[0] elements for process 0, the
        next counts[1] for process 1, ...; returns what the processes sent this one,
        in the order of the processes."""
        return values

    def gather(self, obj):
        return [obj]

    def bcast(self, obj):
        return obj

    def barrier(self):
        pass


class MPI(Local):
    """Ranks split in contiguous blocks over the processes of an mpi4py communicator;
    instances (collectives, fences) spread by a hash of their key."""

    parallel = True

    def __init__(self, world_size, comm=None):
        from mpi4py import MPI as _mpi

        self._mpi = _mpi
        self.comm = comm or _mpi.COMM_WORLD
        self.nproc = self.comm.Get_size()
        self.me = self.comm.Get_rank()
        self.world_size = world_size

    def owner(self, ranks):
        r = np.asarray(ranks, np.int64)
        return np.clip(r * self.nproc // max(self.world_size, 1), 0, self.nproc - 1)

    def owner_of_keys(self, keys):
        return (_mix(keys) % np.uint64(self.nproc)).astype(np.int64)

    def owns(self, rank):
        return int(self.owner([rank])[0]) == self.me

    def route(self, rows, dest_proc):
        """Send rows[i] to process dest_proc[i]; returns the rows this process receives,
        in the order of the sending processes (and of the rows within each)."""
        rows = np.ascontiguousarray(rows)
        if self.nproc <= 1 << 16:  # a radix sort of few distinct values
            order = np.argsort(np.asarray(dest_proc).astype(np.uint16), kind="stable")
        else:
            order = np.argsort(dest_proc, kind="stable")
        whole = np.dtype((np.void, rows.dtype.itemsize))  # copy rows, not fields
        rows = rows.view(whole)[order].view(rows.dtype)
        counts = np.bincount(dest_proc, minlength=self.nproc).astype(np.int64)
        item = rows.dtype.itemsize
        recv_counts = np.zeros(self.nproc, np.int64)
        self.comm.Alltoall(counts, recv_counts)
        sb = rows.view(np.uint8) if len(rows) else np.zeros(0, np.uint8)
        out = np.empty(int(recv_counts.sum()), rows.dtype)
        rb = out.view(np.uint8) if len(out) else np.zeros(0, np.uint8)
        self._bytes(sb, counts * item, rb, recv_counts * item)
        return out

    def allgather(self, obj):
        return self.comm.allgather(obj)

    def alltoallv(self, values, counts):
        values = np.ascontiguousarray(values)
        item = values.dtype.itemsize
        counts = np.asarray(counts, np.int64)
        recv_counts = np.zeros(self.nproc, np.int64)
        self.comm.Alltoall(counts, recv_counts)
        out = np.empty(int(recv_counts.sum()), values.dtype)
        self._bytes(
            values.view(np.uint8) if len(values) else np.zeros(0, np.uint8),
            counts * item,
            out.view(np.uint8) if len(out) else np.zeros(0, np.uint8),
            recv_counts * item,
        )
        return out

    def _bytes(self, sb, sc, rb, rc):
        """Alltoallv of bytes (counts sc, rc in bytes), in rounds of pairwise exchanges
        beyond what one MPI message can carry."""
        mpi = self._mpi
        sd = np.r_[0, np.cumsum(sc)[:-1]]
        rd = np.r_[0, np.cumsum(rc)[:-1]]
        if max(int(sc.sum()), int(rc.sum())) >= 2**31:
            for shift in range(self.nproc):
                to = (self.me + shift) % self.nproc
                frm = (self.me - shift) % self.nproc
                self.comm.Sendrecv(
                    sb[sd[to] : sd[to] + sc[to]],
                    dest=to,
                    recvbuf=rb[rd[frm] : rd[frm] + rc[frm]],
                    source=frm,
                )
        else:
            self.comm.Alltoallv(
                [sb, (sc.astype(np.int32), sd.astype(np.int32)), mpi.BYTE],
                [rb, (rc.astype(np.int32), rd.astype(np.int32)), mpi.BYTE],
            )

    def allreduce(self, array, op):
        mpi = self._mpi
        a = np.ascontiguousarray(array)
        out = np.empty_like(a)
        self.comm.Allreduce(a, out, op={"max": mpi.MAX, "min": mpi.MIN, "sum": mpi.SUM}[op])
        return out

    def gather(self, obj):
        return self.comm.gather(obj, root=0)

    def bcast(self, obj):
        return self.comm.bcast(obj, root=0)

    def barrier(self):
        self.comm.Barrier()
