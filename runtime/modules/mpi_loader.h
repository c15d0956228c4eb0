/*
 * The MPI module's loader (mpi_loader.c), the part of the MPI module that is in the
 * core library of every process: what the MPI builds it loads may call.
 */
#ifndef PW_MODULES_MPI_LOADER_H
#define PW_MODULES_MPI_LOADER_H

/* The next definition of a symbol after the preloaded core: the MPI library's, also
 * where it was loaded with RTLD_LOCAL. NULL if none. */
__attribute__((visibility("default"))) void *pw_mpi_next(const char *name);

#endif
