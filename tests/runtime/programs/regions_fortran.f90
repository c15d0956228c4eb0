! Regions and a phase from Fortran (use perfweave): STEPS steps of region "fstep" holding
! region "fhalo" (one MPI_Allreduce, timed by the program), in phase "fsolve"; names
! with trailing blanks. The program's MPI_Wtime before and after each mark bounds the
! recorded time. Output: lines "rank R NAME count N outer_ns A inner_ns B mpi_calls C".
program regions_fortran
  use mpi
  use perfweave
  implicit none
  integer, parameter :: steps = 12
  integer :: rank, ierr, i
  double precision :: x, y, a, b, c, d
  double precision :: outer(3), inner(3)
  character(len=8) :: padded
  outer = 0
  inner = 0
  padded = 'fhalo'
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = rank
  a = MPI_Wtime()
  call perfweave_phase_begin('fsolve')
  b = MPI_Wtime()
  do i = 1, steps
    call bracket_begin('fstep', 1)
    call bracket_begin(padded, 2)
    call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    call bracket_end(padded, 2)
    call bracket_end('fstep', 1)
  end do
  c = MPI_Wtime()
  call perfweave_phase_end('fsolve')
  d = MPI_Wtime()
  outer(3) = d - a
  inner(3) = c - b
  write (*, '(a,i0,a,i0,a,i0,a,i0,a,i0)') 'rank ', rank, ' fstep count ', steps, &
    ' outer_ns ', nint(outer(1) * 1d9), ' inner_ns ', nint(inner(1) * 1d9), ' mpi_calls ', steps
  write (*, '(a,i0,a,i0,a,i0,a,i0,a,i0)') 'rank ', rank, ' fhalo count ', steps, &
    ' outer_ns ', nint(outer(2) * 1d9), ' inner_ns ', nint(inner(2) * 1d9), ' mpi_calls ', steps
  write (*, '(a,i0,a,i0,a,i0,a,i0,a,i0)') 'rank ', rank, ' fsolve count ', 1, &
    ' outer_ns ', nint(outer(3) * 1d9), ' inner_ns ', nint(inner(3) * 1d9), ' mpi_calls ', steps
  call MPI_Finalize(ierr)
contains
  subroutine bracket_begin(name, k)
    character(len=*), intent(in) :: name
    integer, intent(in) :: k
    common /marks/ t_before_c, t_after_c
    double precision :: t_before_c(3), t_after_c(3)
    t_before_c(k) = MPI_Wtime()
    call perfweave_region_begin(name)
    t_after_c(k) = MPI_Wtime()
  end subroutine bracket_begin
  subroutine bracket_end(name, k)
    character(len=*), intent(in) :: name
    integer, intent(in) :: k
    common /marks/ t_before_c, t_after_c
    double precision :: t_before_c(3), t_after_c(3), t1, t2
    t1 = MPI_Wtime()
    call perfweave_region_end(name)
    t2 = MPI_Wtime()
    outer(k) = outer(k) + (t2 - t_before_c(k))
    inner(k) = inner(k) + (t1 - t_after_c(k))
  end subroutine bracket_end
end program regions_fortran
