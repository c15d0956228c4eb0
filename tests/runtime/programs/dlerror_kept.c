/* dlerror()'s message survives the runtime's wrappers (tests/runtime/test_mpi_symbols.py):
 * a failed dlopen, then the program's first calls of wrapped functions (puts, fopen,
 * nanosleep), then dlerror(); a second failed dlopen whose message dlerror() gives before
 * a first printf prints it. Prints both messages. */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

int main(void)
{
    dlopen("/nonexistent/first.so", RTLD_NOW);
    puts("pending");
    FILE *f = fopen("/nonexistent/file", "r");
    struct timespec t = {0, 1000};
    nanosleep(&t, NULL);
    const char *e = dlerror();
    fputs(e ? e : "(none)", stdout);
    fputs("\n", stdout);
    dlopen("/nonexistent/second.so", RTLD_NOW);
    printf("%s %d\n", dlerror(), f == NULL);
    return 0;
}
