/* A plug-in for dlopen_loop.c. Its constructor allocates, as real plug-ins do. */
#include <stdlib.h>
#include <string.h>

static char *table;

__attribute__((constructor)) static void init(void)
{
    table = malloc(1 << 16);
    if (table)
        memset(table, 1, 1 << 16);
}

__attribute__((destructor)) static void fini(void) { free(table); }

long plugin_square(long x) { return x * x + (table ? table[x] : 0); }
