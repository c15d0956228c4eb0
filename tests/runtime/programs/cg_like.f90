! The communication and code pattern of NPB CG, built as it is (mpif.h, gfortran -O2
! -fallow-argument-mismatch): conjugate gradient on a sparse matrix (compressed rows)
! distributed by rows; the vectors and the matrix are allocatable arrays of a module, and
! each iteration is a halo exchange of one value with each neighbour (MPI_Irecv,
! MPI_Isend, MPI_Waitall), the matrix-vector product, the dot product p.q summed over the
! ranks by recursive doubling in pairs of MPI_Irecv, MPI_Send and MPI_Wait (NPB's own
! sums), the updates of z and r, and r.r summed by MPI_Allreduce.
!
! The matrix is tridiag(-1, 4, -1) of order N * ranks and b = A * (1, ..., 1): each round
! solves A z = b from z = 0 in CGITMAX iterations, and the rounds' largest error
! max |z - 1| must be below 1e-10 (CG's error falls by about 0.27 an iteration here).
! Rounds go on until SECONDS have passed on rank 0's clock (its decision reaches every
! rank through an MPI_Allreduce after each round).
! Usage: cg_like SECONDS (ranks: a power of two). Prints from rank 0 the rounds and
! iterations done, then each rank's count of each MPI call it made ("rank R NAME COUNT")
! and the wall time its conj_grad spent computing, between its MPI calls ("rank R
! kernel_us MICROSECONDS": where a sample's leaf is conj_grad).
module cg_like_data
  implicit none
  integer, parameter :: cgitmax = 25
  integer :: n, rank, nranks, left, right
  integer(kind=8) :: nirecv, nisend, nsend, nwaitall, nwait, nallreduce
  double precision :: kernel_s = 0
  integer, allocatable :: rowstr(:), colidx(:)
  double precision, allocatable :: a(:), b(:), z(:), p(:), q(:), r(:)
end module cg_like_data

program cg_like
  use cg_like_data
  implicit none
  include 'mpif.h'
  integer :: ierr, rounds
  double precision :: err, errmax, seconds, t0, done
  character(len=16) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call get_command_argument(1, arg)
  read (arg, *) seconds
  n = 20000
  call make_matrix()
  nirecv = 0
  nisend = 0
  nsend = 0
  nwaitall = 0
  nwait = 0
  nallreduce = 0
  errmax = 0
  rounds = 0
  t0 = MPI_Wtime()
  done = 0
  do while (done == 0)
    call conj_grad(err)
    errmax = max(errmax, err)
    rounds = rounds + 1
    if (rank == 0 .and. MPI_Wtime() - t0 >= seconds) done = 1
    call MPI_Allreduce(MPI_IN_PLACE, done, 1, MPI_DOUBLE_PRECISION, MPI_MAX, &
                       MPI_COMM_WORLD, ierr)
    nallreduce = nallreduce + 1
  end do
  call MPI_Allreduce(MPI_IN_PLACE, errmax, 1, MPI_DOUBLE_PRECISION, MPI_MAX, &
                     MPI_COMM_WORLD, ierr)
  nallreduce = nallreduce + 1
  if (rank == 0) then
    if (errmax < 1.0d-10) then
      print '(a,i0,a,i0,a)', 'rounds ', rounds, ' iterations ', rounds * cgitmax, ' verified'
    else
      print '(a,es10.3)', 'NOT verified: max error ', errmax
    end if
  end if
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call print_count('MPI_Irecv', nirecv)
  call print_count('MPI_Isend', nisend)
  call print_count('MPI_Send', nsend)
  call print_count('MPI_Waitall', nwaitall)
  call print_count('MPI_Wait', nwait)
  call print_count('MPI_Allreduce', nallreduce)
  call print_count('kernel_us', int(kernel_s * 1.0d6, kind=8))
  call MPI_Finalize(ierr)
end program cg_like

subroutine print_count(name, count)
  use cg_like_data
  implicit none
  character(len=*), intent(in) :: name
  integer(kind=8), intent(in) :: count
  print '(a,i0,3a,i0)', 'rank ', rank, ' ', name, ' ', count
end subroutine print_count

! This rank's rows of A (compressed rows; columns 0 and n + 1 are the neighbours' values
! of p, received before each product) and b = A * (1, ..., 1).
subroutine make_matrix()
  use cg_like_data
  implicit none
  include 'mpif.h'
  integer :: j, k
  left = rank - 1
  right = rank + 1
  if (left < 0) left = MPI_PROC_NULL
  if (right >= nranks) right = MPI_PROC_NULL
  allocate (rowstr(n + 1), colidx(3 * n), a(3 * n), b(n), z(n), p(0:n + 1), q(n), r(n))
  k = 0
  do j = 1, n
    rowstr(j) = k + 1
    if (j > 1 .or. left /= MPI_PROC_NULL) then
      k = k + 1
      colidx(k) = j - 1
      a(k) = -1.0d0
    end if
    k = k + 1
    colidx(k) = j
    a(k) = 4.0d0
    if (j < n .or. right /= MPI_PROC_NULL) then
      k = k + 1
      colidx(k) = j + 1
      a(k) = -1.0d0
    end if
    b(j) = sum(a(rowstr(j):k))
  end do
  rowstr(n + 1) = k + 1
end subroutine make_matrix

! One solve of A z = b from z = 0; err: max |z - 1| on this rank
subroutine conj_grad(err)
  use cg_like_data
  implicit none
  include 'mpif.h'
  double precision, intent(out) :: err
  integer :: j, k, cgit, ierr, nreq, req(4), stats(MPI_STATUS_SIZE, 4)
  double precision :: s, rho, rho0, alpha, beta, t

  t = MPI_Wtime()
  do j = 1, n
    q(j) = 0.0d0
    z(j) = 0.0d0
    r(j) = b(j)
    p(j) = r(j)
  end do
  p(0) = 0.0d0
  p(n + 1) = 0.0d0
  kernel_s = kernel_s + (MPI_Wtime() - t)
  call rr_sum(rho)

  do cgit = 1, cgitmax
    nreq = 0
    if (left /= MPI_PROC_NULL) then
      call MPI_Irecv(p(0), 1, MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, req(nreq + 1), ierr)
      call MPI_Isend(p(1), 1, MPI_DOUBLE_PRECISION, left, 2, MPI_COMM_WORLD, req(nreq + 2), ierr)
      nreq = nreq + 2
    end if
    if (right /= MPI_PROC_NULL) then
      call MPI_Irecv(p(n + 1), 1, MPI_DOUBLE_PRECISION, right, 2, MPI_COMM_WORLD, &
                     req(nreq + 1), ierr)
      call MPI_Isend(p(n), 1, MPI_DOUBLE_PRECISION, right, 1, MPI_COMM_WORLD, req(nreq + 2), ierr)
      nreq = nreq + 2
    end if
    call MPI_Waitall(nreq, req, stats, ierr)
    nirecv = nirecv + nreq / 2
    nisend = nisend + nreq / 2
    nwaitall = nwaitall + 1

    t = MPI_Wtime()
    do j = 1, n
      s = 0.0d0
      do k = rowstr(j), rowstr(j + 1) - 1
        s = s + a(k) * p(colidx(k))
      end do
      q(j) = s
    end do

    s = 0.0d0
    do j = 1, n
      s = s + p(j) * q(j)
    end do
    kernel_s = kernel_s + (MPI_Wtime() - t)
    call pair_sum(s)
    alpha = rho / s
    rho0 = rho

    t = MPI_Wtime()
    do j = 1, n
      z(j) = z(j) + alpha * p(j)
      r(j) = r(j) - alpha * q(j)
    end do
    kernel_s = kernel_s + (MPI_Wtime() - t)
    call rr_sum(rho)
    t = MPI_Wtime()
    beta = rho / rho0
    do j = 1, n
      p(j) = r(j) + beta * p(j)
    end do
    kernel_s = kernel_s + (MPI_Wtime() - t)
  end do
  t = MPI_Wtime()
  err = 0.0d0
  do j = 1, n
    err = max(err, abs(z(j) - 1.0d0))
  end do
  kernel_s = kernel_s + (MPI_Wtime() - t)
end subroutine conj_grad

! r.r over every rank, by MPI_Allreduce
subroutine rr_sum(rho)
  use cg_like_data
  implicit none
  include 'mpif.h'
  double precision, intent(out) :: rho
  double precision :: s
  integer :: j, ierr
  s = 0.0d0
  do j = 1, n
    s = s + r(j) * r(j)
  end do
  call MPI_Allreduce(s, rho, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  nallreduce = nallreduce + 1
end subroutine rr_sum

! v summed over the ranks by recursive doubling, log2(ranks) exchanges with a partner;
! the lower rank's part first, so that every rank adds the same numbers in one order
subroutine pair_sum(v)
  use cg_like_data
  implicit none
  include 'mpif.h'
  double precision, intent(inout) :: v
  double precision :: other
  integer :: step, partner, req, ierr, status(MPI_STATUS_SIZE)
  step = 1
  do while (step < nranks)
    partner = ieor(rank, step)
    call MPI_Irecv(other, 1, MPI_DOUBLE_PRECISION, partner, 3, MPI_COMM_WORLD, req, ierr)
    call MPI_Send(v, 1, MPI_DOUBLE_PRECISION, partner, 3, MPI_COMM_WORLD, ierr)
    call MPI_Wait(req, status, ierr)
    nirecv = nirecv + 1
    nsend = nsend + 1
    nwait = nwait + 1
    if (partner < rank) then
      v = other + v
    else
      v = v + other
    end if
    step = 2 * step
  end do
end subroutine pair_sum
