! Formatted records of known length and MPI-IO from Fortran (tests/runtime/test_io_mpi.py):
!   io_records DIR N
! Each rank writes N formatted records of 15 characters (16 bytes with the newline) to
! DIR/records.R.txt, then N MPI_File_write_at of 25 integers (100 bytes) to DIR/fmpiio.dat
! through the Fortran binding, and one collective MPI_File_write_at_all of the same 100
! bytes again at the last one's offset. It prints "rank R KEY VALUE" lines of what it wrote.
! MPI_File_close passes a variable to an INTENT(OUT) argument of `use mpi`'s interface:
! gfortran 12 gives its code the `program` statement's line.
program io_records
  use mpi
  implicit none
  integer :: ierr, rank, fh, i, n
  integer(kind=MPI_OFFSET_KIND) :: off
  integer :: buf(25)
  character(len=256) :: dir, arg, fname

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, dir)
  call get_command_argument(2, arg)
  read (arg, *) n
  write (fname, '(A,"/records.",I0,".txt")') trim(dir), rank
  open (unit=10, file=trim(fname), status='replace', action='write', form='formatted') ! @site open
  do i = 1, n
    write (10, '(A,I8)') 'record ', i ! @site record
  end do
  close (10) ! @site close

  buf = rank
  call MPI_File_open(MPI_COMM_WORLD, trim(dir)//'/fmpiio.dat', &
                     MPI_MODE_CREATE + MPI_MODE_WRONLY, MPI_INFO_NULL, fh, ierr)
  do i = 1, n
    off = (int(rank, MPI_OFFSET_KIND) * n + (i - 1)) * 100
    call MPI_File_write_at(fh, off, buf, 25, MPI_INTEGER, MPI_STATUS_IGNORE, ierr) ! @site fwrite
  end do
  call MPI_File_write_at_all(fh, off, buf, 25, MPI_INTEGER, MPI_STATUS_IGNORE, ierr) ! @site fall
  call MPI_File_close(fh, ierr) ! @site fclose
  print '(A,I0,A,I0)', 'rank ', rank, ' record_bytes ', n * 16
  print '(A,I0,A,I0)', 'rank ', rank, ' mpiio_bytes ', n * 100 + 100
  print '(A,I0,A,I0)', 'rank ', rank, ' last_byte ', (rank * n + n) * 100 - 1
  call MPI_Finalize(ierr)
end program io_records
