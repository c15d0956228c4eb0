"""mpi4py: every rank sends 7 messages of 100 bytes to the next rank and receives 7 from
the previous one, then 3 barriers (counts known by construction)."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out, into = bytearray(100), bytearray(100)
for i in range(7):
    if rank % 2 == 0:
        comm.Send([out, MPI.BYTE], dest=(rank + 1) % size, tag=i)
        comm.Recv([into, MPI.BYTE], source=(rank - 1) % size, tag=i)
    else:
        comm.Recv([into, MPI.BYTE], source=(rank - 1) % size, tag=i)
        comm.Send([out, MPI.BYTE], dest=(rank + 1) % size, tag=i)
for i in range(3):
    comm.Barrier()
print(f"mpi4py rank {rank} done", flush=True)
