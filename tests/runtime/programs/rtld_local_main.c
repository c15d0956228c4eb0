/* Loads the MPI plug-in given as argv[1] with RTLD_LOCAL and runs it. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    int (*run)(int *, char ***) = (int (*)(int *, char ***))dlsym(h, "run_solver");
    return run(&argc, &argv);
}
