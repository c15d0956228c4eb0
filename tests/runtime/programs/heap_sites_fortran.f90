! heap_sites.c's three sites in Fortran: ALLOCATE and DEALLOCATE of real(8) arrays
! (gfortran calls malloc and free); prints "site count bytes byte_s" by its own clock
! (system_clock, integer(8): ns). Run with MPI (tests/runtime/test_heap.py).
module heap_sites_mod
  implicit none
  type block
    real(8), allocatable :: x(:)
  end type
contains
  real(8) function now()
    integer(8) :: c, rate
    call system_clock(c, rate)
    now = real(c, 8) / real(rate, 8)
  end function

  subroutine hold(s)
    real(8), intent(in) :: s
    real(8) :: t0
    t0 = now()
    do while (now() - t0 < s)
    end do
  end subroutine

  subroutine alloc_a(b, n)
    type(block), intent(inout) :: b
    integer, intent(in) :: n
    allocate(b%x(n)) ! @site A
  end subroutine

  subroutine alloc_b(b, n)
    type(block), intent(inout) :: b
    integer, intent(in) :: n
    allocate(b%x(n)) ! @site B
  end subroutine

  subroutine alloc_c(b, n)
    type(block), intent(inout) :: b
    integer, intent(in) :: n
    allocate(b%x(n)) ! @site C
  end subroutine
end module

program heap_sites
  use mpi
  use heap_sites_mod
  implicit none
  type(block) :: a(100), b(100), c(7)
  real(8) :: ta(100), tb(100), tc(7), bs_a, bs_b, bs_c
  integer :: i, k, ierr
  call MPI_Init(ierr)
  bs_a = 0; bs_b = 0; bs_c = 0
  do i = 1, 100
    call alloc_a(a(i), 262144)
    ta(i) = now()
  end do
  call hold(0.2d0)
  do i = 1, 100
    bs_a = bs_a + 2097152d0 * (now() - ta(i))
    deallocate(a(i)%x)
  end do
  do i = 0, 9999
    k = mod(i, 100) + 1
    if (i >= 100) then
      bs_b = bs_b + 65536d0 * (now() - tb(k))
      deallocate(b(k)%x)
    end if
    call alloc_b(b(k), 8192)
    tb(k) = now()
    call hold(0.00002d0)
  end do
  do k = 1, 100
    bs_b = bs_b + 65536d0 * (now() - tb(k))
    deallocate(b(k)%x)
  end do
  do i = 1, 7
    call alloc_c(c(i), 1048576)
    tc(i) = now()
  end do
  call hold(0.1d0)
  do i = 1, 7
    bs_c = bs_c + 8388608d0 * (now() - tc(i))
    deallocate(c(i)%x)
  end do
  write(*, '(a,i0,a,i0,a,es17.9)') 'A ', 100, ' ', 100_8 * 2097152_8, ' ', bs_a
  write(*, '(a,i0,a,i0,a,es17.9)') 'B ', 10000, ' ', 10000_8 * 65536_8, ' ', bs_b
  write(*, '(a,i0,a,i0,a,es17.9)') 'C ', 7, ' ', 7_8 * 8388608_8, ' ', bs_c
  call MPI_Finalize(ierr)
end program
