! Sampling ground truth in Fortran (use mpi): every rank alternates heavy (a module
! procedure, burn::heavy, gfortran's __burn_MOD_heavy) for 7 ms and light (an external
! subroutine, gfortran's light_) for 3 ms of the process's CPU time, for SECONDS seconds
! (first argument, default 2): 70 % and 30 % of its CPU time (CPU time, not wall time, so
! that the split holds when ranks share busy cores). Both spin in burn::spin. The split
! of the wall time, which a sampler measures, can differ on a busy machine (a rank that
! loses its core does so mostly in a clock read, a system call): each rank measures it
! (system_clock between the calls, so the two tile the loop) and prints it on stderr:
!   rank R heavy WALL_S light WALL_S
! Built with -O1 -fno-omit-frame-pointer -fno-inline (frames by frame pointers).
module burn
  implicit none
  double precision :: sink = 0
contains
  double precision function now()
    call cpu_time(now) ! @site clock
  end function now

  subroutine spin(seconds)
    double precision, intent(in) :: seconds
    double precision :: t0
    integer :: i
    t0 = now()
    do while (now() - t0 < seconds)
      do i = 1, 20000 ! a clock read (a system call here) per ~20 us of work
        sink = sink + i * 0.5d0 ! @site spin
      end do
    end do
  end subroutine spin

  subroutine heavy()
    call spin(0.007d0) ! @site heavy
  end subroutine heavy
end module burn

subroutine light()
  use burn, only: spin
  call spin(0.003d0) ! @site light
end subroutine light

program burn7030
  use, intrinsic :: iso_fortran_env, only: error_unit, int64
  use mpi
  use burn
  implicit none
  integer :: ierr, rank
  integer(int64) :: c0, c1, c2, rate
  double precision :: seconds, t0, in_heavy = 0, in_light = 0
  character(len=32) :: arg
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  seconds = 2.0d0
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    read (arg, *) seconds
  end if
  t0 = now()
  call system_clock(c0, rate)
  do while (now() - t0 < seconds)
    call heavy()
    call system_clock(c1)
    call light()
    call system_clock(c2)
    in_heavy = in_heavy + dble(c1 - c0) / rate
    in_light = in_light + dble(c2 - c1) / rate
    c0 = c2
  end do
  write (error_unit, '(a,i0,a,f0.6,a,f0.6)') 'rank ', rank, ' heavy ', in_heavy, &
    ' light ', in_light
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a)', 'done'
  call MPI_Finalize(ierr)
end program burn7030
