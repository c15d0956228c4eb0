! The communication matrix of Fortran receives from MPI_ANY_SOURCE, by construction
! (test_comm_matrix.py), N >= 2 ranks; r is the world rank. Every rank but 0 sends to
! rank 0 (integers of 4 bytes):
!   tag 1: IRECV_INTS(r) = 10 * (r + 1), received by MPI_Irecv from MPI_ANY_SOURCE and
!          one MPI_Waitall(MPI_STATUSES_IGNORE)
!   tag 2: WAIT_INTS(r) = 20 + r, by MPI_Irecv from MPI_ANY_SOURCE and MPI_Wait with
!          MPI_STATUS_IGNORE, one at a time
!   tag 3: RECV_INTS(r) = 30 + 2 * r, by MPI_Recv from MPI_ANY_SOURCE, MPI_STATUS_IGNORE
program comm_matrix_anysrc
  use mpi
  implicit none
  integer :: r, n, i, ierr, req(64), one
  integer :: buf(4096, 8), out(4096)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, r, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  out = 0
  if (r == 0) then
    do i = 1, n - 1
      call MPI_Irecv(buf(1, 1 + mod(i, 8)), 4096, MPI_INTEGER, MPI_ANY_SOURCE, 1, &
                     MPI_COMM_WORLD, req(i), ierr)
    end do
    call MPI_Waitall(n - 1, req, MPI_STATUSES_IGNORE, ierr)
    do i = 1, n - 1
      call MPI_Irecv(buf(1, 1), 4096, MPI_INTEGER, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, one, ierr)
      call MPI_Wait(one, MPI_STATUS_IGNORE, ierr)
    end do
    do i = 1, n - 1
      call MPI_Recv(buf(1, 2), 4096, MPI_INTEGER, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
    end do
  else
    call MPI_Send(out, 10 * (r + 1), MPI_INTEGER, 0, 1, MPI_COMM_WORLD, ierr)
    call MPI_Send(out, 20 + r, MPI_INTEGER, 0, 2, MPI_COMM_WORLD, ierr)
    call MPI_Send(out, 30 + 2 * r, MPI_INTEGER, 0, 3, MPI_COMM_WORLD, ierr)
  end if
  call MPI_Finalize(ierr)
end program comm_matrix_anysrc
