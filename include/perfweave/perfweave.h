/*
 * perfweave's program API: regions, phases and measurement on/off (docs/regions.md).
 *
 *   #include <perfweave/perfweave.h>     cc $(pkg-config --cflags perfweave) ...
 *
 *   perfweave_phase_begin("solve");
 *   perfweave_region_begin("halo");  ...  perfweave_region_end("halo");
 *   perfweave_phase_end("solve");
 *   perfweave_measure_off();  ...  perfweave_measure_on();
 *
 * A program needs no library to build or run with it: each function is inline and calls
 * the runtime's one entry point, perfweave_api_v1, a weak reference that the dynamic
 * loader binds to perfweave's runtime when `perfweave run` preloads it, and that stays
 * null otherwise (a call is then a load and a branch). Names are copied by the runtime
 * (at most 255 bytes are kept); a region's end names the region it ends.
 */
#ifndef PERFWEAVE_PERFWEAVE_H
#define PERFWEAVE_PERFWEAVE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a call of the entry point does (its `op`) */
enum perfweave_op {
    PERFWEAVE_OP_REGION_BEGIN = 0,
    PERFWEAVE_OP_REGION_END = 1,
    PERFWEAVE_OP_PHASE_BEGIN = 2,
    PERFWEAVE_OP_PHASE_END = 3,
    PERFWEAVE_OP_MEASURE_OFF = 4,
    PERFWEAVE_OP_MEASURE_ON = 5
};

/* The name's length: PERFWEAVE_NUL_TERMINATED, or its bytes (a Fortran string's) */
#define PERFWEAVE_NUL_TERMINATED ((size_t) - 1)

/* Defined by perfweave's runtime, present only where it is loaded. */
extern void perfweave_api_v1(int op, const char *name, size_t len) __attribute__((weak));

static inline void perfweave_call_(int op, const char *name)
{
    if (perfweave_api_v1)
        perfweave_api_v1(op, name, PERFWEAVE_NUL_TERMINATED);
}

static inline void perfweave_region_begin(const char *name)
{
    perfweave_call_(PERFWEAVE_OP_REGION_BEGIN, name);
}
static inline void perfweave_region_end(const char *name)
{
    perfweave_call_(PERFWEAVE_OP_REGION_END, name);
}
static inline void perfweave_phase_begin(const char *name)
{
    perfweave_call_(PERFWEAVE_OP_PHASE_BEGIN, name);
}
static inline void perfweave_phase_end(const char *name)
{
    perfweave_call_(PERFWEAVE_OP_PHASE_END, name);
}
static inline void perfweave_measure_off(void) { perfweave_call_(PERFWEAVE_OP_MEASURE_OFF, ""); }
static inline void perfweave_measure_on(void) { perfweave_call_(PERFWEAVE_OP_MEASURE_ON, ""); }

#ifdef __cplusplus
}
#endif

#endif
