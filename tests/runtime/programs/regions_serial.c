/* A program built with perfweave's header (pkg-config --cflags perfweave), no MPI: it
 * runs the same with and without perfweave. Nested regions, phases and a thread's own
 * regions; a deterministic output and exit status 7. Output: "sum S", "regions N". */
#include <perfweave/perfweave.h>
#include <pthread.h>
#include <stdio.h>

static long thread_sum;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 5; i++) {
        perfweave_region_begin("thread-work");
        thread_sum += i;
        perfweave_region_end("thread-work");
    }
    return NULL;
}

int main(void)
{
    long sum = 0;
    int regions = 0;
    perfweave_phase_begin("setup");
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    pthread_join(th, NULL);
    perfweave_phase_begin("solve"); /* ends "setup" */
    for (int i = 0; i < 20; i++) {
        perfweave_region_begin("outer");
        for (int j = 0; j < 3; j++) {
            perfweave_region_begin("inner");
            sum += i * j;
            perfweave_region_end("inner");
            regions++;
        }
        perfweave_region_end("outer");
        regions++;
    }
    perfweave_region_end("outer"); /* nothing open: counted, ignored */
    perfweave_measure_off();
    perfweave_measure_on();
    perfweave_phase_end("solve");
    printf("sum %ld\nregions %d\nthread %ld\n", sum, regions, thread_sum);
    return 7;
}
