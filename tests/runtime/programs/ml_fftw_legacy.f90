! The mathlib module's FFTW ground truth through the legacy Fortran interface (fftw3.f):
! a 16^3 plan executed 3 times (dfftw_execute_dft), destroyed; a 32^3 plan executed once
! (dfftw_execute), destroyed.
program ml_fftw_legacy
  use mpi
  implicit none
  include 'fftw3.f'
  integer :: ierr
  call MPI_Init(ierr)
  call transform(16, 3)
  call transform(32, 1)
  call MPI_Finalize(ierr)
contains
  subroutine transform(n, times)
    integer, intent(in) :: n, times
    integer*8 :: plan
    double complex, allocatable :: x(:,:,:)
    integer :: i
    allocate(x(n,n,n))
    x = (1.0d0, 0.0d0)
    call dfftw_plan_dft_3d(plan, n, n, n, x, x, FFTW_FORWARD, FFTW_ESTIMATE)
    do i = 1, times
      if (times > 1) then
        call dfftw_execute_dft(plan, x, x)
      else
        call dfftw_execute(plan)
      end if
    end do
    call dfftw_destroy_plan(plan)
    deallocate(x)
  end subroutine transform
end program ml_fftw_legacy
