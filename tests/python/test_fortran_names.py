"""Fortran procedure names as gfortran emits them, shown as written in the source
(symbols.fortran_name), only for code of Fortran source files."""

import pytest

from perfweave.symbols import fortran_name


@pytest.mark.parametrize(
    "symbol,path,shown",
    [
        ("__burn_MOD_heavy", "/src/burn.f90", "burn::heavy"),  # module procedure
        ("__my_mod_MOD_do_it", "/src/m.F90", "my_mod::do_it"),  # underscores in names
        ("light_", "/src/light.f90", "light"),  # external procedure
        ("solve_it_", "/src/old.f", "solve_it"),
        ("MAIN__", "/src/prog.f90", "MAIN__"),  # the main program
        ("light_", "/src/light.c", "light_"),  # C: as it is
        ("__m_MOD_p", "/src/x.c", "__m_MOD_p"),
        ("", "/src/x.f90", ""),
        ("omp_fn.0", "/src/x.f90", "omp_fn.0"),  # not a Fortran symbol
        ("__burn_MOD_heavy._omp_fn.2", "/src/burn.f90", "burn::heavy._omp_fn.2"),  # OpenMP
        ("light_._omp_fn.0", "/src/light.f90", "light._omp_fn.0"),  # regions outlined
        ("MAIN__._omp_fn.1", "/src/prog.f90", "MAIN__._omp_fn.1"),
    ],
)
def test_fortran_name(symbol, path, shown):
    assert fortran_name(symbol, path) == shown
