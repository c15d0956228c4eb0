! The mathlib module's FFTW ground truth through the Fortran 2003 interface (fftw3.f03,
! bind(C) to the C functions): a 16^3 plan executed 3 times, destroyed; a 32^3 plan
! executed once, destroyed.
program ml_fftw_f03
  use, intrinsic :: iso_c_binding
  use mpi
  implicit none
  include 'fftw3.f03'
  integer :: ierr
  call MPI_Init(ierr)
  call transform(16, 3)
  call transform(32, 1)
  call MPI_Finalize(ierr)
contains
  subroutine transform(n, times)
    integer, intent(in) :: n, times
    type(c_ptr) :: plan
    complex(c_double_complex), allocatable :: x(:,:,:)
    integer :: i
    allocate(x(n,n,n))
    x = (1.0d0, 0.0d0)
    plan = fftw_plan_dft_3d(n, n, n, x, x, FFTW_FORWARD, FFTW_ESTIMATE)
    do i = 1, times
      call fftw_execute_dft(plan, x, x)
    end do
    call fftw_destroy_plan(plan)
    deallocate(x)
  end subroutine transform
end program ml_fftw_f03
