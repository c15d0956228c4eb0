/*
 * Which frame of the stack is the program's (user_frame.h): the libraries that make
 * calls on the program's behalf are known by their file names (the C library,
 * libgfortran, libstdc++, the MPI libraries and their components, perfweave itself).
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <string.h>

#include "user_frame.h"

PW_TLS uintptr_t pw_user_lo, pw_user_hi;

static int library_object(int obj)
{
    static const char *const libs[] = {
        "libc.so",   "libc-",    "libm.so",     "libpthread", "ld-linux", "libgfortran",
        "libstdc++", "libgcc_s", "libquadmath", "libmpi",     "libmpich", "libopen-",
        "mca_",      "libpmix",  "libucs",      "libucp",     "libuct",   "libfabric",
        "libhwloc",  "libevent", "libperfweave"};
    const char *path = obj >= 0 ? pw_object_path(obj) : NULL;
    if (!path)
        return 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++)
        if (!strncmp(base, libs[i], strlen(libs[i])))
            return 1;
    return 0;
}

/* Walked with backtrace: libgfortran keeps no frame pointers. Code in no object of the
 * snapshot was loaded since (Open MPI dlopens its MPI-IO components, mca_sharedfp_sm.so,
 * at the first MPI_File_open): a library's, walked past too. */
__attribute__((noinline)) uintptr_t pw_user_frame_find(uintptr_t ra)
{
    uint64_t off;
    int obj = pw_object_of(ra, &off);
    if (obj >= 0 && !library_object(obj)) {
        uintptr_t base;
        pw_object_range(obj, &pw_user_lo, &pw_user_hi, &base);
        return ra;
    }
    void *bt[64];
    int n = backtrace(bt, 64);
    for (int i = 1; i < n; i++) {
        int o = pw_object_of((uintptr_t)bt[i], &off);
        if (o >= 0 && !library_object(o))
            return (uintptr_t)bt[i];
    }
    return ra;
}
