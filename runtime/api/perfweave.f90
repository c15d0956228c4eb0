! perfweave's program API for Fortran (docs/regions.md): `use perfweave`, then
!   call perfweave_region_begin("halo") ... call perfweave_region_end("halo")
!   call perfweave_phase_begin("solve") ... call perfweave_phase_end("solve")
!   call perfweave_measure_off() ... call perfweave_measure_on()
! Build with `pkg-config --cflags --libs perfweave` (this module's directory and
! libperfweave-api.a, whose entry points do nothing unless perfweave's runtime is loaded).
! Trailing blanks of a name are dropped.
module perfweave
  implicit none
  interface
    subroutine perfweave_region_begin(name)
      character(len=*), intent(in) :: name
    end subroutine perfweave_region_begin
    subroutine perfweave_region_end(name)
      character(len=*), intent(in) :: name
    end subroutine perfweave_region_end
    subroutine perfweave_phase_begin(name)
      character(len=*), intent(in) :: name
    end subroutine perfweave_phase_begin
    subroutine perfweave_phase_end(name)
      character(len=*), intent(in) :: name
    end subroutine perfweave_phase_end
    subroutine perfweave_measure_off()
    end subroutine perfweave_measure_off
    subroutine perfweave_measure_on()
    end subroutine perfweave_measure_on
  end interface
end module perfweave
