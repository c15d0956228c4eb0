/* POP metrics' ground truth (tests/runtime/test_pop_runs.py): pop_cases CASE T_MS runs one of
 * the cases below, where "compute c" spins c on the wall clock.
 *
 * The region of interest is marked: MPI_Pcontrol(1) after a warm-up (every MPI function
 * the case uses called once, outside the region: a first call resolves symbols and
 * faults pages in before the wrapper's clock starts, time the program cannot tell from
 * MPI time and the tool sees outside MPI), MPI_Pcontrol(0) at the end. In the region
 * each rank keeps its own account with its own clock (CLOCK_MONOTONIC) around every MPI
 * call it makes: its useful time (outside MPI calls) and the useful-time clock of the
 * critical path (OTF-CPT's: every message carries the sender's clock, a receive takes
 * the max of the two, a collective the max of its members' clocks at their entry). It
 * prints on stderr
 *   rank R useful U clock C elapsed E first F last L calls M marks P
 * (seconds; E: its time in the region; F, L: CLOCK_MONOTONIC when it entered the region
 * first and left it last; M: its time around its MPI calls in the region, P: around its
 * MPI_Pcontrol calls, which bound where the tool's readings can differ from its own:
 * tests/runtime/test_pop_runs.py), so that the expected metrics follow from the run's own
 * clocks whatever the machine's load: LB = mean U / max U, SerE = max U / max C, and
 * with one interval TE = max C / (max L - min F), the region of all ranks.
 *
 *   sendrecv  2 ranks x 10 iterations: rank 0 computes 5T and sends its clock to rank 1,
 *             which computes T and receives; then an MPI_Allreduce (max) of the clocks:
 *             LB = (5+1)/2/5 = 0.6, SerE ~ 1, TE ~ 1 by construction.
 *   pipeline  P ranks x 5 iterations: rank k receives from k-1, computes T, sends to k+1;
 *             then MPI_Allreduce: the critical path holds every rank's T, SerE = 1/P.
 *   bcast     P ranks x 5 iterations: rank 0 computes T then MPI_Bcast (of its clock);
 *             the others MPI_Bcast then compute T; then MPI_Allreduce: SerE = 0.5.
 *   pcontrol  P ranks x 2 iterations: outside the region rank k computes (2P-1-2k)T
 *             (the whole run is balanced), inside MPI_Pcontrol(1) .. MPI_Pcontrol(0)
 *             it computes (1+2k)T then MPI_Allreduce: LB = P / (2P-1) in the region.
 *   exchange  2 ranks x 5 iterations: compute T, then MPI_Sendrecv of 64 MiB each way
 *             (its first 8 bytes: the clock): on an ideal network only the useful time
 *             is left, TE = C / E. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

volatile double sink;
static double useful, clk, last, elapsed; /* this rank's account (seconds) */
static double first = -1, final;           /* the region's first and last instants */
/* its time around its MPI calls in the region, and around its MPI_Pcontrol marks */
static double calls, marks, entered;
static int in_region;

static void compute(double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds)
        for (int i = 0; i < 100; i++)
            sink += i * 0.5;
}

/* around each MPI call of the program: the useful time since the last one counts */
static void enter(void)
{
    double t = now();
    if (in_region) {
        useful += t - last;
        clk += t - last;
    }
    entered = t;
}

static void leave(void)
{
    last = now();
    if (in_region)
        calls += last - entered;
}

static void take(double other)
{
    if (in_region && other > clk)
        clk = other;
}

static void clocks_max(void)
{
    enter();
    double mine = clk, top;
    MPI_Allreduce(&mine, &top, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    leave();
    take(top);
}

static void pcontrol(int level)
{
    static double since;
    enter();
    if (in_region) {
        final = now();
        elapsed += final - since;
    }
    in_region = level != 0;
    MPI_Pcontrol(level);
    last = now();
    marks += last - entered;
    since = last;
    if (in_region && first < 0)
        first = since;
}

/* every MPI function of the cases once, outside the region and not recorded */
static void warm_up(int rank, int size)
{
    double x = 0, y = 0;
    MPI_Pcontrol(0);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int peer = rank ^ 1;
    if (peer < size) {
        if (rank & 1) {
            MPI_Recv(&y, 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&x, 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD);
        } else {
            MPI_Send(&x, 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(&y, 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        MPI_Sendrecv(&x, 1, MPI_DOUBLE, peer, 2, &y, 1, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *c = argc > 1 ? argv[1] : "sendrecv";
    double T = (argc > 2 ? atof(argv[2]) : 10) * 1e-3, msg;
    size_t n = (size_t)64 << 20;
    char *out = NULL, *in = NULL;
    if (!strcmp(c, "exchange")) { /* pages touched before the region */
        out = malloc(n);
        in = malloc(n);
        memset(out, rank, n);
        memset(in, 0, n);
    }
    warm_up(rank, size);
    if (!strcmp(c, "sendrecv")) {
        pcontrol(1);
        for (int i = 0; i < 10; i++) {
            if (rank == 0) {
                compute(5 * T);
                enter();
                MPI_Send(&clk, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
                leave();
            } else if (rank == 1) {
                compute(T);
                enter();
                MPI_Recv(&msg, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                leave();
                take(msg);
            }
            clocks_max();
        }
        pcontrol(0);
    } else if (!strcmp(c, "pipeline")) {
        pcontrol(1);
        for (int i = 0; i < 5; i++) {
            if (rank > 0) {
                enter();
                MPI_Recv(&msg, 1, MPI_DOUBLE, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                leave();
                take(msg);
            }
            compute(T);
            if (rank < size - 1) {
                enter();
                MPI_Send(&clk, 1, MPI_DOUBLE, rank + 1, 0, MPI_COMM_WORLD);
                leave();
            }
            clocks_max();
        }
        pcontrol(0);
    } else if (!strcmp(c, "bcast")) {
        pcontrol(1);
        for (int i = 0; i < 5; i++) {
            if (rank == 0)
                compute(T);
            enter();
            msg = clk;
            MPI_Bcast(&msg, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            leave();
            take(msg);
            if (rank != 0)
                compute(T);
            clocks_max();
        }
        pcontrol(0);
    } else if (!strcmp(c, "pcontrol")) {
        for (int i = 0; i < 2; i++) {
            compute((2 * size - 1 - 2 * rank) * T);
            MPI_Barrier(MPI_COMM_WORLD);
            pcontrol(1);
            compute((1 + 2 * rank) * T);
            clocks_max();
            pcontrol(0);
        }
    } else if (!strcmp(c, "exchange")) {
        int peer = rank ^ 1;
        pcontrol(1);
        for (int i = 0; i < 5; i++) {
            compute(T);
            if (peer < size) {
                enter();
                memcpy(out, &clk, sizeof clk);
                MPI_Sendrecv(out, (int)n, MPI_BYTE, peer, 0, in, (int)n, MPI_BYTE, peer, 0,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                leave();
                memcpy(&msg, in, sizeof msg);
                take(msg);
            }
        }
        pcontrol(0);
    }
    free(out);
    free(in);
    MPI_Finalize();
    fprintf(stderr,
            "rank %d useful %.6f clock %.6f elapsed %.6f first %.6f last %.6f calls %.6f "
            "marks %.6f\n",
            rank, useful, clk, elapsed, first, final, calls, marks);
    return 0;
}
