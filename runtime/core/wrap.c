/*
 * The core's part of wrap.h: the per-thread guards and the bootstrap arena of
 * allocator wrappers.
 */
#include <stdint.h>

#include "wrap.h"

PW_TLS int pw_wrap_depth;
PW_TLS int pw_wrap_resolving;

/* dlsym's own needs while it looks up an allocator: a few small blocks, once per
 * process (64 KiB is ample; a request beyond it gets NULL, as from a full heap). */
static _Alignas(16) unsigned char arena[65536];
static size_t arena_used;

void *pw_wrap_bootstrap_alloc(size_t n)
{
    size_t size = (n + 15) & ~(size_t)15;
    size_t at = __atomic_fetch_add(&arena_used, size, __ATOMIC_RELAXED);
    if (size < n || size > sizeof arena || at > sizeof arena - size)
        return NULL;
    return arena + at; /* zeroed: static storage, never handed out twice */
}

int pw_wrap_bootstrap_owns(const void *p)
{
    return (const unsigned char *)p >= arena && (const unsigned char *)p < arena + sizeof arena;
}

size_t pw_wrap_bootstrap_room(const void *p)
{
    return pw_wrap_bootstrap_owns(p) ? (size_t)(arena + sizeof arena - (const unsigned char *)p)
                                     : 0;
}
