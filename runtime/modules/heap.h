/*
 * The heap module (heap.c, --heap): the allocation-site profile. It wraps the C
 * library's allocator (malloc, calloc, realloc, free, posix_memalign, aligned_alloc,
 * memalign, valloc, pvalloc, malloc_usable_size; C++ new and delete and Fortran ALLOCATE
 * reach them) and keeps, per call path, counts, bytes, sizes and lifetimes in
 * heap/HOST.PID.pwheap. It uses pw_opt.heap*, wrap.h (and its bootstrap arena, which
 * exists for it), the loaded objects' snapshot, the experiment's paths; no hook.
 */
#ifndef PW_MODULES_HEAP_H
#define PW_MODULES_HEAP_H

#include "pw.h"

extern const pw_module pw_module_heap;

#endif
