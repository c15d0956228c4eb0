/*
 * Wrapping a function of the C library (or of any library loaded after perfweave):
 * the one shape of every such wrapper in a module (docs/architecture.md).
 *
 *   PW_EXPORT int sched_yield(void)
 *   {
 *       PW_REAL(sched_yield);            // real_sched_yield: the next definition, cached
 *       if (!pw_wrap_enter())            // not measured, or re-entered: straight through
 *           return real_sched_yield();
 *       int64_t t0 = pw_ticks();
 *       int rc = real_sched_yield();     // called exactly once, whatever our state
 *       int64_t t1 = pw_ticks();
 *       PW_KEEP_ERRNO(record(t1 - t0));      // errno is the real call's after this
 *       pw_wrap_leave();
 *       return rc;                       // the return value untouched
 *   }
 *
 * A wrapper whose work is to keep a call's behaviour under perfweave (a blocking
 * call resumed after a profiling signal) takes the lookup from here but not the
 * guard: it must act in every context, nested or not.
 */
#ifndef PW_WRAP_H
#define PW_WRAP_H

#include <dlfcn.h>
#include <errno.h>

#include "elfsym.h"
#include "pw.h"

#pragma GCC visibility push(default)

/* > 0 while this thread is in a wrapper's recording or in the core's own work (the
 * dumps): wrapped calls made from there are not recorded. */
extern PW_TLS int pw_wrap_depth;
/* > 0 while this thread looks up a real function: dlsym may allocate (glibc: calloc
 * for its error state), and an allocator wrapper must then not look up its own real
 * function, which is being looked up: pw_wrap_bootstrap_alloc serves it instead. */
extern PW_TLS int pw_wrap_resolving;

/* Zeroed, 16-byte aligned memory from a static arena, for allocator wrappers while
 * pw_wrap_resolving; NULL when the arena is spent. Never returned to any allocator:
 * the wrapper of free checks pw_wrap_bootstrap_owns and leaves such a block alone. */
void *pw_wrap_bootstrap_alloc(size_t n);
int pw_wrap_bootstrap_owns(const void *p);
/* the bytes from p, a bootstrap block, to the arena's end (a block's size is not kept:
 * realloc copies at most this much of it); 0 for another pointer */
size_t pw_wrap_bootstrap_room(const void *p);

#pragma GCC visibility pop

/* The next definition of `name` after the core (the C library's, or that of a tool
 * preloaded after perfweave); NULL if there is none. Read from the loaded objects'
 * memory, not with dlsym, which would end the program's pending dlerror() (elfsym.c). */
static inline void *pw_wrap_next(const char *name)
{
    pw_wrap_resolving++;
    void *p = pw_next_symbol(name);
    pw_wrap_resolving--;
    return p;
}

/* real_FN, a cached pointer to the real FN, declared at file scope for wrappers and
 * helpers that share it; PW_REAL_RESOLVE(FN) looks it up on first use. */
#define PW_REAL_DECLARE(fn) static __typeof__(fn) *real_##fn
#define PW_REAL_RESOLVE(fn)                                                                        \
    do {                                                                                           \
        if (PW_UNLIKELY(!real_##fn))                                                               \
            *(void **)&real_##fn = pw_wrap_next(#fn);                                              \
    } while (0)
/* Both at once, in the one function that calls it. */
#define PW_REAL(fn)                                                                                \
    PW_REAL_DECLARE(fn);                                                                           \
    PW_REAL_RESOLVE(fn)
/* For a function that may be absent (a library the program may not load): real_FN is
 * NULL then, looked up once all the same. */
#define PW_REAL_OPTIONAL(fn)                                                                       \
    PW_REAL_DECLARE(fn);                                                                           \
    static int looked_##fn;                                                                        \
    if (PW_UNLIKELY(!looked_##fn)) {                                                               \
        *(void **)&real_##fn = pw_wrap_next(#fn);                                                  \
        looked_##fn = 1;                                                                           \
    }

/* A wrapper may record this call: the process is measured and this thread is not
 * already recording (a wrapped call made by our own code passes straight through).
 * Pair with pw_wrap_leave. */
static inline int pw_wrap_enter(void)
{
    if (PW_UNLIKELY(!pw_active) || pw_wrap_depth)
        return 0;
    pw_wrap_depth++;
    return 1;
}
static inline void pw_wrap_leave(void)
{
    pw_wrap_depth--;
    pw_hold_if_dying();
}

/* Run STATEMENT (the recording) with errno as the caller will see it kept: what the
 * real call set, whatever the recording's own calls do to it. */
#define PW_KEEP_ERRNO(statement)                                                                   \
    do {                                                                                           \
        int pw_errno_ = errno;                                                                     \
        statement;                                                                                 \
        errno = pw_errno_;                                                                         \
    } while (0)

#endif
