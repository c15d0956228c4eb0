/* No MPI (built static, so perfweave's runtime cannot enter it): prints, for itself and
 * each ancestor up to the child of process argv[2] (the test), one line with the name,
 * the signals ignored, blocked and caught, and what its stdin is; then exits with the
 * code argv[1]. What a launcher and its tasks inherit, to compare with and without
 * perfweave. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "pipe", "socket", "/dev/null", ... : the kind of file fd 0 of process pid is */
static void stdin_kind(long pid, char *out, size_t size)
{
    char path[64], target[PATH_MAX];
    snprintf(path, sizeof path, "/proc/%ld/fd/0", pid);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0) {
        snprintf(out, size, "closed");
        return;
    }
    target[n] = 0;
    char *colon = strchr(target, ':'); /* pipe:[123], socket:[456]: the kind alone */
    if (colon && target[0] != '/')
        *colon = 0;
    snprintf(out, size, "%s", target);
}

int main(int argc, char **argv)
{
    long top = argc > 2 ? atol(argv[2]) : 1;
    long pid = (long)getpid();
    while (pid > 1) {
        char path[64], line[256], name[64] = "?", ign[32] = "?", blk[32] = "?", cgt[32] = "?";
        long ppid = 0;
        snprintf(path, sizeof path, "/proc/%ld/status", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        while (fgets(line, sizeof line, f)) {
            sscanf(line, "Name: %63s", name);
            sscanf(line, "PPid: %ld", &ppid);
            sscanf(line, "SigBlk: %31s", blk);
            sscanf(line, "SigIgn: %31s", ign);
            sscanf(line, "SigCgt: %31s", cgt);
        }
        fclose(f);
        char in[PATH_MAX];
        stdin_kind(pid, in, sizeof in);
        printf("%s ignored %s blocked %s caught %s stdin %s\n", name, ign, blk, cgt, in);
        if (ppid == top)
            break;
        pid = ppid;
    }
    return argc > 1 ? atoi(argv[1]) : 0;
}
