! use mpi bindings: rank 0 sends 3 messages of 50 integers to rank 1; every rank
! calls MPI_Allreduce twice on 4 double precision values and MPI_Barrier once.
program fortran_usempi
  use mpi
  implicit none
  integer :: rank, nranks, ierr, i, status(MPI_STATUS_SIZE)
  integer :: buf(50)
  double precision :: x(4), y(4)
  buf = 0
  x = 1.0d0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  do i = 1, 3
    if (rank == 0) then
      call MPI_Send(buf, 50, MPI_INTEGER, 1, 0, MPI_COMM_WORLD, ierr) ! @site send
    else if (rank == 1) then
      call MPI_Recv(buf, 50, MPI_INTEGER, 0, 0, MPI_COMM_WORLD, status, ierr) ! @site recv
    end if
  end do
  do i = 1, 2
    call MPI_Allreduce(x, y, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr) ! @site allreduce
  end do
  call MPI_Barrier(MPI_COMM_WORLD, ierr) ! @site barrier
  ! not measured: MPI_Pcontrol(0) pauses recording until MPI_Pcontrol(1)
  call MPI_Pcontrol(0)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Pcontrol(1)
  call MPI_Finalize(ierr)
end program fortran_usempi
