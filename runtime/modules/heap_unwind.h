/*
 * The heap module's unwinder of a new call path (heap_unwind.c): the frames of an
 * allocation from the call-frame information (.eh_frame) of the code it passes, one
 * rule per return address computed once and cached, so that a new call path through code
 * already seen costs a few loads per frame instead of libgcc's unwinder.
 */
#ifndef PW_HEAP_UNWIND_H
#define PW_HEAP_UNWIND_H

#include <stdint.h>

/* The cache mapped; 0 on success (else every unwind falls back). In the module's start. */
int pw_heap_unwind_init(void);

/* The call path of an allocation into frames[0..max): frames[0] = ra, the return address
 * into the wrapper's caller, then the return addresses further out. fp: the wrapper's frame
 * address (the runtime keeps frame pointers: the caller's frame pointer is saved at fp, ra
 * at fp + 8). Returns the frames found, 0 when the call-frame information of some frame
 * does not allow (no FDE, a rule it does not follow: the caller uses backtrace()). Not
 * async-signal-safe (dl_iterate_phdr for a return address not seen before). */
int pw_heap_unwind(uintptr_t ra, uintptr_t fp, uintptr_t *frames, int max);

#endif
