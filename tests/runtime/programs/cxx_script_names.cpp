// Sampling ground truth with hostile names for the HTML report: the time is spent in
// template instances and an operator whose demangled names contain "<script>", "&" and
// "<": burn<script>() 0.6 s, burn<Box<script> >() 0.2 s, operator&() 0.2 s, per rank;
// then rank 1 computes 0.3 s more in main while the others wait in MPI_Barrier.
#include <mpi.h>
#include "spin.h"

struct script {};
template <class T> struct Box { double v; };

template <class T> __attribute__((noinline)) void burn(double seconds) { spin(seconds); }

__attribute__((noinline)) Box<script> operator&(Box<script> a, Box<script> b)
{
    spin(0.2);
    return Box<script>{a.v + b.v};
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    burn<script>(0.6);
    burn<Box<script> >(0.2);
    Box<script> a{1}, b{2};
    Box<script> c = a & b;
    if (rank == 1)
        spin(0.3);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return c.v == 3 ? 0 : 1;
}
