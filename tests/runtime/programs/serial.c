/* No MPI: prints a line and exits with the code given as argv[1]. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    printf("serial says hello\n");
    return argc > 1 ? atoi(argv[1]) : 0;
}
