! The mathlib module's BLAS/LAPACK ground truth: on every rank, 3 x dgemm(300, 200, 100)
! (flops 3 x 2*300*200*100 = 36 000 000) and 1 x dgetrf(300) (2/3*300**3 = 18 000 000).
! Under the reference LAPACK, dgetrf calls dgemm_ through the PLT: internal calls.
program ml_blas
  use mpi
  implicit none
  integer, parameter :: m = 300, n = 200, k = 100
  double precision, allocatable :: a(:,:), b(:,:), c(:,:), lu(:,:)
  integer, allocatable :: ipiv(:)
  integer :: i, j, info, rank, ierr
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  allocate(a(m,k), b(k,n), c(m,n), lu(m,m), ipiv(m))
  a = 1.0d0
  b = 2.0d0
  c = 0.0d0
  do i = 1, 3
    call dgemm('N', 'N', m, n, k, 1.0d0, a, m, b, k, 1.0d0, c, m) ! @site gemm
  end do
  do j = 1, m
    do i = 1, m
      lu(i,j) = 1.0d0 / (i + j - 1)
    end do
    lu(j,j) = lu(j,j) + m
  end do
  call dgetrf(m, m, lu, m, ipiv, info) ! @site getrf
  print '(a,i0,a,f0.1,a,i0)', 'rank ', rank, ' c11 ', c(1,1), ' info ', info
  call MPI_Finalize(ierr)
end program ml_blas
