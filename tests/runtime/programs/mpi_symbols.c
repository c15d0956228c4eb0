/* What a program sees of the MPI symbols (tests/runtime/test_mpi_symbols.py):
 *   mpi_symbols NAMES [LIBMPI]
 * For each name of the file NAMES (one a line): "NAME found" when dlsym(RTLD_DEFAULT)
 * finds it, else "NAME absent error" or "NAME absent noerror" as dlerror() says one
 * happened; then "weak NAME yes|no" for the program's weak references to MPI_Init and
 * MPI_File_read_c (an MPI-4 function: MPICH 4 has it, Open MPI 4.1 does not). Built with
 * -DWITH_MPI it calls MPI_Init and MPI_Finalize around that; with LIBMPI it first
 * dlopens that library (RTLD_GLOBAL). With -DFORTRAN_MAIN the report is the function
 * mpi_symbols_report(NAMES) of a Fortran program's (mpi_symbols.f90). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#ifdef WITH_MPI
#include <mpi.h>
#endif

int MPI_Init();
int MPI_File_read_c();
#pragma weak MPI_Init
#pragma weak MPI_File_read_c

void mpi_symbols_report(const char *names)
{
    FILE *f = fopen(names, "r");
    char name[256];
    while (f && fscanf(f, "%255s", name) == 1) {
        dlerror();
        void *p = dlsym(RTLD_DEFAULT, name);
        const char *e = dlerror();
        printf("%s %s\n", name, p ? "found" : e ? "absent error" : "absent noerror");
    }
    if (f)
        fclose(f);
    printf("weak MPI_Init %s\n", MPI_Init ? "yes" : "no");
    printf("weak MPI_File_read_c %s\n", MPI_File_read_c ? "yes" : "no");
    fflush(stdout);
}

#ifndef FORTRAN_MAIN
int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (argc > 2 && !dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "%s\n", dlerror());
        return 3;
    }
#ifdef WITH_MPI
    MPI_Init(&argc, &argv);
#endif
    mpi_symbols_report(argv[1]);
#ifdef WITH_MPI
    MPI_Finalize();
#endif
    return 0;
}
#endif
