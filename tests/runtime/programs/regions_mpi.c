/* Regions, phases, a thread's regions, MPI_Pcontrol and measurement off, with the
 * program's own clock around each mark (CLOCK_MONOTONIC, the runtime's): for each region
 * name it prints the sums of (after end - before begin) and (before end - after begin),
 * which bound the recorded inclusive time, and the counts it made. Usage: regions_mpi
 * STEPS. Output: lines "rank R NAME count N outer_ns A inner_ns B [mpi_calls C mpi_ns D]". */
#include <mpi.h>
#include <perfweave/perfweave.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

typedef struct {
    const char *name;
    long long count, outer, inner, mpi_calls, mpi_ns;
    long long a, b; /* before begin, after begin */
} timed;

static void tbegin(timed *t, void (*fn)(const char *))
{
    t->a = now();
    fn(t->name);
    t->b = now();
}

static void tend(timed *t, void (*fn)(const char *))
{
    long long c = now();
    fn(t->name);
    long long d = now();
    t->count++;
    t->outer += d - t->a;
    t->inner += c - t->b;
}

static void print(int rank, const timed *t)
{
    printf("rank %d %s count %lld outer_ns %lld inner_ns %lld mpi_calls %lld mpi_ns %lld\n", rank,
           t->name, t->count, t->outer, t->inner, t->mpi_calls, t->mpi_ns);
}

static volatile double sink;
static void spin(long long ns)
{
    long long end = now() + ns;
    double x = 1;
    while (now() < end)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
    sink = x;
}

static timed worker = {"worker"};
static void *thread_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 7; i++) {
        tbegin(&worker, perfweave_region_begin);
        spin(1000000);
        tend(&worker, perfweave_region_end);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 10, rank, size;
    timed setup = {"setup"}, solve = {"solve"}, step = {"step"}, halo = {"halo"}, work = {"work"},
          spinning = {"spinning"}, p3 = {"pcontrol 3"};
    tbegin(&setup, perfweave_phase_begin); /* before MPI_Init */
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    pthread_t th;
    pthread_create(&th, NULL, thread_main, NULL);
    pthread_join(th, NULL);
    tend(&setup, perfweave_phase_end);

    tbegin(&solve, perfweave_phase_begin);
    double v = rank, w = 0;
    for (int s = 0; s < steps; s++) {
        tbegin(&step, perfweave_region_begin);
        tbegin(&halo, perfweave_region_begin);
        int right = (rank + 1) % size, left = (rank + size - 1) % size;
        long long t0 = now();
        MPI_Sendrecv(&v, 1, MPI_DOUBLE, right, 1, &w, 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        halo.mpi_ns += now() - t0;
        halo.mpi_calls += 2;
        perfweave_region_end("not-open"); /* counted, ignored */
        tend(&halo, perfweave_region_end);
        tbegin(&work, perfweave_region_begin);
        spin(2000000);
        tend(&work, perfweave_region_end);
        tend(&step, perfweave_region_end);
    }
    tend(&solve, perfweave_phase_end);

    /* measurement off: these barriers are not recorded; 3 outside are */
    long long pc_a = now();
    MPI_Pcontrol(0);
    long long pc_b = now();
    for (int i = 0; i < 5; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    long long pc_c = now();
    MPI_Pcontrol(1);
    long long pc_d = now();
    for (int i = 0; i < 3; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    /* a phase "pcontrol 3" until the next MPI_Pcontrol, with 4 recorded allreduces */
    p3.a = now();
    MPI_Pcontrol(3);
    p3.b = now();
    for (int i = 0; i < 4; i++)
        MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    p3.mpi_calls = 4;
    long long c = now();
    MPI_Pcontrol(1);
    long long d = now();
    p3.count = 1;
    p3.outer = d - p3.a;
    p3.inner = c - p3.b;
    /* the program's own switch: no sample, no MPI call recorded while off; a spin of the
     * same length with measurement on beside it */
    long long off_a = now();
    perfweave_measure_off();
    long long off_b = now();
    spin(150000000);
    MPI_Barrier(MPI_COMM_WORLD);
    long long off_c = now();
    perfweave_measure_on();
    long long off_d = now();
    tbegin(&spinning, perfweave_region_begin);
    spin(150000000);
    tend(&spinning, perfweave_region_end);

    const timed *all[] = {&setup, &solve, &step, &halo, &work, &spinning, &p3, &worker};
    for (int i = 0; i < (int)(sizeof all / sizeof all[0]); i++)
        print(rank, all[i]);
    /* both windows of measurement off */
    printf("rank %d off count 2 outer_ns %lld inner_ns %lld mpi_calls 0 mpi_ns 0\n", rank,
           off_d - off_a + pc_d - pc_a, off_c - off_b + pc_c - pc_b);
    printf("rank %d result %.1f\n", rank, w);
    MPI_Finalize();
    return 0;
}
