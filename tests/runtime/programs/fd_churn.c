/* perfweave's threads keep none of the program's descriptors: a copy of a pipe's write
 * end held in another thread's descriptor table would keep the pipe open after the
 * program closed it (its reader never sees EOF). From its first instruction, the
 * program makes and closes pipes for argv[1] seconds (default 0.3) while perfweave's
 * node thread starts (it copies the descriptor table and closes what it copied); then
 * it looks for its pipes' write ends in every thread's table (/proc/self/task/T/fd) and
 * prints "pipes N leaked L": L must be 0. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "spin.h"

#define MAXP 200000

static ino_t made[MAXP];
static int nmade;

static int ours(ino_t ino)
{
    for (int i = 0; i < nmade; i++)
        if (made[i] == ino)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 0.3, t0 = now();
    while (now() - t0 < seconds && nmade < MAXP) {
        int p[2];
        struct stat st;
        if (pipe(p) != 0)
            return 2;
        if (fstat(p[1], &st) == 0)
            made[nmade++] = st.st_ino;
        close(p[1]);
        close(p[0]);
    }
    int leaked = 0;
    DIR *tasks = opendir("/proc/self/task");
    struct dirent *t;
    while (tasks && (t = readdir(tasks))) {
        if (t->d_name[0] == '.')
            continue;
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/self/task/%s/fd", t->d_name);
        DIR *fds = opendir(dir);
        struct dirent *f;
        while (fds && (f = readdir(fds))) {
            char path[128];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, f->d_name);
            if (f->d_name[0] != '.' && stat(path, &st) == 0 && S_ISFIFO(st.st_mode) &&
                ours(st.st_ino))
                leaked++;
        }
        if (fds)
            closedir(fds);
    }
    if (tasks)
        closedir(tasks);
    printf("pipes %d leaked %d\n", nmade, leaked);
    return 0;
}
