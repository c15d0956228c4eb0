/*
 * The shape of a perfweave module, annotated. This file is compiled by every
 * build (so it cannot rot) and linked into nothing. Copy it to start a module.
 *
 * A module wraps some functions of the measured program, records each call into
 * the calling thread's call-site table, and registers a dump callback that the
 * core runs when the process ends. It costs nothing when its option is off.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

#include "pw.h"

/* Function ids of this module. Real modules generate them (mpi.spec) or declare
 * them in an X-macro table, so that names reach the profile file from one place. */
enum { PW_EXAMPLE_FN_usleep, PW_EXAMPLE_NFN };
static const char *example_names[PW_EXAMPLE_NFN] = {"usleep"};
static const char *example_families[PW_EXAMPLE_NFN] = {"other"};

/* Re-entrancy guard: a wrapper called from inside another wrapper of this
 * thread (or from our own code) passes straight through. */
static PW_TLS int example_depth;

/* The wrapper. Its shape never changes:
 *   1. resolve the real symbol once (the next definition after ours);
 *   2. call it exactly once, whatever the tool's state;
 *   3. time around it; record only when active and not re-entered;
 *   4. never change the return value or errno. */
PW_EXPORT int usleep(useconds_t usec)
{
    static int (*real)(useconds_t);
    if (PW_UNLIKELY(!real))
        real = (int (*)(useconds_t))dlsym(RTLD_NEXT, "usleep");
    if (!pw_active || example_depth)
        return real(usec);
    example_depth++;
    int64_t t0 = pw_ticks(); /* durations in ticks; the writer converts to ns */
    int rc = real(usec);
    int64_t t1 = pw_ticks();
    int saved_errno = errno; /* recording must not disturb what the caller sees */
    pw_sitetab *t = pw_sitetab_self();
    if (t) {
        /* the caller's return address identifies the call site; the core turns it
         * into (module, offset) when the data is written */
        pw_site *s = pw_site_get(t, PW_EXAMPLE_FN_usleep,
                                 (uintptr_t)__builtin_return_address(0), NULL, 0);
        pw_site_add(s, t1 - t0, 0, 0);
    }
    errno = saved_errno;
    example_depth--;
    return rc;
}

/* The dump callback: write this process's data, or return 0 to let the core
 * write its plain process record. Keep it async-signal-safe when in_signal. */
static int example_dump(int state, int in_signal)
{
    (void)in_signal;
    pw_rank_rec r = {.rank = -1, .state = state, .t_start = pw_t_start};
    r.pid = (int32_t)getpid();
    r.t_fini_enter = r.t_end = pw_now();
    pw_local l;
    if (pw_local_build(&l, &r, example_names, example_families, PW_EXAMPLE_NFN) != 0)
        return 0;
    /* ... pw_profile_write(&l.prof, path) into the experiment directory ... */
    pw_local_free(&l);
    return 0;
}

__attribute__((constructor)) static void example_init(void)
{
    pw_register_dump(example_dump);
}
