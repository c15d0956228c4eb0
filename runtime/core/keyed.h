/*
 * Keyed call-site tables (keyed.c): a thread's table of one module's aggregates keyed by
 * (64-bit key, return address), for a module whose record of a call is not the core's
 * call-site slot (pw_site: function id, return address, MPI bytes; sites.c), e.g. the
 * mathlib module's size classes. The module declares a pw_keyed (its slot's size, a
 * struct that begins with pw_keyed_slot; the bound on distinct sites; how a key's family
 * is read from it; how a new slot starts and how two slots of one site add up) and keeps
 * the TLS pointer to the thread's table; the core does the rest: the table's creation at
 * the thread's first call (mmap, errno kept, pushed on the module's list with one
 * compare-and-swap, so no lock and no allocation on the hot path), hashing and probing,
 * the bound (past it a new site's calls go to its family's overflow slot, return address
 * 0, and are counted in `dropped`), the merge of every thread's table for the dump, and
 * a forked child's forgetting of its parent's tables. The tables are private memory and
 * the module's re-entrancy guard (wrap.h, or its own depth) is what keeps a call from
 * recording twice: a table is written only by its thread, read by the dump.
 *
 * A module whose slots are records of a file of its own (io: the io_site records of its
 * mapped store, which a killed process leaves) gives the table its memory instead
 * (pw_keyed_init), says where its record keeps the return address and the count when
 * not in the pw_keyed_slot head (ra_at, count_at; the key is its first 8 bytes), and
 * may have no overflow slot (families 0: past the bound a new site's calls get none).
 */
#ifndef PW_CORE_KEYED_H
#define PW_CORE_KEYED_H

#include <stddef.h>
#include <stdint.h>

#include "pw.h"

/* Exported from libperfweave.so for module libraries (runtime/core/module_api.def). */
#pragma GCC visibility push(default)

/* The head of a module's slot. */
typedef struct pw_keyed_slot {
    uint64_t key;  /* the module's */
    uintptr_t ra;  /* return address into the caller; 0: the family's overflow slot */
    int64_t count; /* calls; 0: a free slot (the caller counts the call it got it for) */
} pw_keyed_slot;

struct pw_keyed_tab;
/* A module's declaration (static, one per module; max_sites set in its start). */
typedef struct pw_keyed {
    size_t slot_size; /* bytes of the module's slot: sizeof, a multiple of 8 */
    size_t max_sites; /* distinct sites per thread (1 or more) */
    /* distinct key >> family_shift: one overflow slot each; 0: none, a new site's calls
     * past the bound get no slot */
    size_t families;
    int family_shift;  /* the bits of a key below its family */
    size_t extra_size; /* bytes of per-thread data of the module's (pw_keyed_extra) */
    /* offsets of the return address (uintptr_t) and the count (int64_t) in a slot; 0:
     * the pw_keyed_slot head's */
    size_t ra_at, count_at;
    /* a new slot's fields after the head (NULL: zeros) */
    void (*fresh)(pw_keyed_slot *s);
    /* from's calls into into (the merge adds the counts; this the fields after them) */
    void (*add)(pw_keyed_slot *into, const pw_keyed_slot *from);
    struct pw_keyed_tab *tabs; /* every thread's table, for the dump */
} pw_keyed;

typedef struct pw_keyed_tab {
    struct pw_keyed_tab *next;
    pw_keyed_slot *last; /* the previous call's slot: a loop hits it */
    const pw_keyed *set;
    size_t nslots, used, max_used, bytes; /* bytes: 0 when the module gave the memory */
    size_t ra_at, count_at;
    int64_t dropped; /* calls folded into an overflow slot */
    char *slots;
    /* then the module's extra_size bytes, then the slots */
} pw_keyed_tab;

/* The calling thread's new table of set k (the caller keeps it in its TLS pointer);
 * NULL without memory. errno is kept. */
pw_keyed_tab *pw_keyed_create(pw_keyed *k);
/* t, a table of set k over nslots (a power of two) zero-filled slots at the module's
 * memory (not on k's list: the module reads them, pw_keyed_next). */
void pw_keyed_init(pw_keyed_tab *t, const pw_keyed *k, void *slots, size_t nslots);
/* The slot of (key, ra), made if new (past the bound: the family's overflow slot, or
 * NULL without families). Out of line: the inline pw_keyed_find (for a slot with the
 * pw_keyed_slot head) checks the previous call's slot first. */
pw_keyed_slot *pw_keyed_get(pw_keyed_tab *t, uint64_t key, uintptr_t ra);
static inline __attribute__((always_inline)) pw_keyed_slot *
pw_keyed_find(pw_keyed_tab *t, uint64_t key, uintptr_t ra)
{
    pw_keyed_slot *s = t->last;
    if (PW_UNLIKELY(s == NULL || s->key != key || s->ra != ra))
        t->last = s = pw_keyed_get(t, key, ra);
    return s;
}
/* The module's per-thread data of table t (extra_size bytes, zero-filled at creation). */
static inline void *pw_keyed_extra(pw_keyed_tab *t) { return t + 1; }
/* Head of the list of k's tables (a table's next is the following one). */
pw_keyed_tab *pw_keyed_tabs(pw_keyed *k);
/* The used slot after *i (start with *i = 0), NULL after the last. */
pw_keyed_slot *pw_keyed_next(const pw_keyed_tab *t, size_t *i);
/* Every thread's slots with calls merged by (key, ra) into one table of private memory,
 * unbounded (NULL without memory); *threads: the tables that had calls, *dropped: their
 * calls folded into overflow slots. Async-signal-safe (mmap). Free with pw_keyed_free. */
pw_keyed_tab *pw_keyed_merge(pw_keyed *k, int *threads, int64_t *dropped);
void pw_keyed_free(pw_keyed_tab *t);
/* In the child of a fork (one thread): every table of k released; the caller clears
 * its TLS pointer. */
void pw_keyed_forget(pw_keyed *k);

/* Slots of a table bounded to `sites` distinct sites with `families` overflow slots: a
 * power of two, at most half full (the rule of the core's call-site tables too). */
size_t pw_keyed_slots(size_t sites, size_t families);

#pragma GCC visibility pop

/* The tables' hash of (key, ra); also fine for a module's other small maps. */
static inline size_t pw_keyed_hash(uint64_t key, uintptr_t ra)
{
    uint64_t h = (key ^ (ra * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;
    return (size_t)(h ^ (h >> 29));
}

#endif
