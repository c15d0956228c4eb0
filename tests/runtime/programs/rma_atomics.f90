! Fortran atomics under --trace (tests/runtime/test_rma_trace.py): each rank adds 1 to
! the next rank's counter with MPI_Fetch_and_op and swaps its flag with
! MPI_Compare_and_swap, in a fence epoch (1 Fetch_and_op), a lock_all epoch (3 rounds of
! Fetch_and_op, Compare_and_swap, Win_flush) and a lock epoch (1 of each): per rank 5
! Fetch_and_op, 4 Compare_and_swap, 2 Win_fence, 3 Win_flush, 2 Win_lock (the last one
! reads the rank's own window). Every counter ends at 5
! and every flag at 7; anything else is exit status 3.
program rma_atomics
  use mpi
  implicit none
  integer :: ierr, rank, nranks, win, target, i, one, old, cmp, swap
  integer, volatile :: buf(2)
  integer :: got(2)
  integer(kind=MPI_ADDRESS_KIND) :: wsize, counter, flag

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  buf = 0
  one = 1
  cmp = 0
  swap = 7
  wsize = 8
  counter = 0
  flag = 1
  target = mod(rank + 1, nranks)
  call MPI_Win_create(buf, wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)

  call MPI_Win_fence(0, win, ierr)
  call MPI_Fetch_and_op(one, old, MPI_INTEGER, target, counter, MPI_SUM, win, ierr)
  call MPI_Win_fence(0, win, ierr)

  call MPI_Win_lock_all(0, win, ierr)
  do i = 1, 3
    call MPI_Fetch_and_op(one, old, MPI_INTEGER, target, counter, MPI_SUM, win, ierr)
    call MPI_Compare_and_swap(swap, cmp, old, MPI_INTEGER, target, flag, win, ierr)
    call MPI_Win_flush(target, win, ierr)
  end do
  call MPI_Win_unlock_all(win, ierr)

  call MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win, ierr)
  call MPI_Fetch_and_op(one, old, MPI_INTEGER, target, counter, MPI_SUM, win, ierr)
  call MPI_Compare_and_swap(swap, cmp, old, MPI_INTEGER, target, flag, win, ierr)
  call MPI_Win_unlock(target, win, ierr)

  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win, ierr)
  got = buf
  call MPI_Win_unlock(rank, win, ierr)
  call MPI_Win_free(win, ierr)
  if (got(1) /= 5 .or. got(2) /= 7) then
    print *, 'rank', rank, 'wrong results', got
    call MPI_Finalize(ierr)
    call exit(3)
  end if
  call MPI_Finalize(ierr)
end program rma_atomics
