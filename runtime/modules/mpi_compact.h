/*
 * The compact profile's reduction (mpi_compact.c; the file: include/perfweave/format/
 * mpi.h, docs/format.md "Compact profile"). It knows no MPI: mpi.c gives it the few
 * exchanges it needs, on the runtime's own communicator.
 */
#ifndef PW_MPI_COMPACT_H
#define PW_MPI_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "pw.h"

typedef struct pw_compact_comm {
    int rank, size;
    /* n bytes to rank `to`; from rank `from` a message of unknown size into malloc'ed
     * *buf (NULL, 0 when the peer had none) */
    void (*send)(int to, const void *p, size_t n);
    void (*recv)(int from, char **buf, size_t *n);
} pw_compact_comm;

/* Reduce every rank's call-site statistics (its pw_local) up a binomial tree of
 * ceil(log2 size) rounds, each rank holding at most its summary, one child's and their
 * merge while it is made (each bounded by the distinct call sites, not the ranks), and
 * write path on rank 0. Every rank calls it; 0 when written (rank 0) or sent. */
int pw_compact_reduce(const pw_local *l, const pw_compact_comm *c, const char *path);

#endif
