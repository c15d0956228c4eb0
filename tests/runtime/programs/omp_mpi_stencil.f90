! MPI+OpenMP Fortran with a known imbalance among threads, built as such codes are
! (mpifort -g -fopenmp): each rank runs time steps of a parallel loop with one iteration
! per thread (schedule(static, 1)) in which thread 0 works 3 units and every other thread
! 1 unit, so the others wait at the loop's implicit barrier 2 of every 3 units. Work is
! spun for wall-clock time (omp_get_wtime), and the program measures what the sampler
! should see: per rank, the wall time of the regions, the threads' work in them, and the
! span from the first region's start to the last one's end, as
!   rank R threads N run_s T region_s G work_s W from A to B serial_to C
! (A, B: that span's ends by omp_get_wtime, CLOCK_MONOTONIC). Then 0.3 s of serial work
! in the main thread, ending at C, and an MPI_Allreduce, the workers idle.
! Usage: omp_mpi_stencil [SECONDS [THREADS]] (defaults 2 and 3; unit 4 ms)
module relaxation
  use omp_lib
  implicit none
  double precision :: sink = 0
contains
  double precision function relax(seconds)
    double precision, intent(in) :: seconds
    double precision :: t0
    integer :: i
    t0 = omp_get_wtime()
    do while (omp_get_wtime() - t0 < seconds)
      do i = 1, 200
        sink = sink + i * 0.5d0
      end do
    end do
    relax = omp_get_wtime() - t0
  end function relax
end module relaxation

program stencil
  use mpi
  use omp_lib
  use relaxation
  implicit none
  integer :: ierr, rank, nthreads, threads, steps, s, i, n
  double precision :: seconds, unit, work, region, total, t_first, t0, run, t_serial
  character(len=32) :: arg
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  seconds = 2.0d0
  threads = 3
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    read (arg, *) seconds
  end if
  if (command_argument_count() > 1) then
    call get_command_argument(2, arg)
    read (arg, *) threads
  end if
  unit = 0.004d0
  steps = int(seconds / (3 * unit))
  work = 0
  region = 0
  nthreads = 0
  t_first = omp_get_wtime()
  do s = 1, steps
    t0 = omp_get_wtime()
    !$omp parallel num_threads(threads) private(n) reduction(+:work)
    n = omp_get_num_threads()
    !$omp do schedule(static, 1)
    do i = 0, n - 1
      if (i == 0) then
        work = work + relax(3 * unit)
      else
        work = work + relax(unit)
      end if
    end do
    !$omp end do
    !$omp master
    nthreads = n
    !$omp end master
    !$omp end parallel
    region = region + (omp_get_wtime() - t0)
  end do
  run = omp_get_wtime() - t_first
  t0 = relax(0.3d0)
  t_serial = omp_get_wtime()
  call MPI_Allreduce(work, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  write (*, '(a, i0, a, i0, 3(a, f0.4), 3(a, f0.6))') 'rank ', rank, ' threads ', &
    nthreads, ' run_s ', run, ' region_s ', region, ' work_s ', work, ' from ', t_first, &
    ' to ', t_first + run, ' serial_to ', t_serial
  call MPI_Finalize(ierr)
end program stencil
