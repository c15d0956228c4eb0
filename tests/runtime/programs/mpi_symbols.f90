! What a Fortran MPI program sees of the MPI symbols (tests/runtime/test_mpi_symbols.py):
!   mpi_symbols_f NAMES
! The report of mpi_symbols.c (built with -DFORTRAN_MAIN and linked in) between
! MPI_Init and MPI_Finalize.
program mpi_symbols_f
  use mpi
  use, intrinsic :: iso_c_binding
  implicit none
  interface
    subroutine report(names) bind(C, name="mpi_symbols_report")
      import :: c_char
      character(kind=c_char), dimension(*) :: names
    end subroutine
  end interface
  integer :: ierr
  character(len=4096) :: names
  call MPI_Init(ierr)
  call get_command_argument(1, names)
  call report(trim(names)//c_null_char)
  call MPI_Finalize(ierr)
end program mpi_symbols_f
