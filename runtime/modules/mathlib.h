/*
 * The mathlib module (mathlib.c, --mathlib): calls of BLAS, CBLAS, LAPACK, LAPACKE, FFTW3,
 * cuBLAS and cuFFT by routine, size class, call site and the library that answered, with flops and
 * bytes touched; FFTW plans described at creation, their executes attributed to the live
 * plan. The wrappers are generated from runtime/mathlib/mathlib.spec
 * (runtime/mathlib/gen_wrappers.py); this header is their hot path. It uses of the core
 * pw_opt.mathlib and pw_opt.mathlib_max_sites, wrap.h (the lookup of the next
 * definition, pw_wrap_depth), pw_ticks, the loaded-object snapshot and the experiment's
 * paths, the keyed call-site tables (keyed.h: its per-thread table) and the call anchor
 * of a stack walker (pw_call_anchor, pw_want_anchor); no hook, no other module.
 */
#ifndef PW_MODULES_MATHLIB_H
#define PW_MODULES_MATHLIB_H

#include <stdint.h>

#include "keyed.h"
#include "pw.h"
#include "pw_ml_fn.h"
#include "wrap.h"

extern const pw_module pw_module_mathlib;

/* One aggregate of a thread's calls: (routine, size class, call site), a slot of the
 * core's keyed call-site tables (keyed.h). */
typedef struct pw_ml_slot {
    pw_keyed_slot site; /* key: routine + 1, the dims' log2 buckets, the characters; ra: 0
                         * the routine's overflow slot */
    int64_t ticks, min, max;
    double flops, bytes;
    int64_t dim_sum[3]; /* for the class's mean dims */
} pw_ml_slot;

extern int pw_ml_on;                    /* the module records (measured process, --mathlib) */
extern PW_TLS int pw_ml_depth;          /* 1 inside the thread's outermost math-library call */
extern PW_TLS int pw_ml_anchored;       /* that call keeps the thread's call anchor */
extern PW_TLS pw_keyed_tab *pw_ml_self; /* the thread's table (extra: pw_ml_internal) */

pw_keyed_tab *pw_ml_tab_create(void);
/* The thread's calls made inside another math-library call, by routine. */
static inline int64_t *pw_ml_internal(pw_keyed_tab *t) { return (int64_t *)pw_keyed_extra(t); }
/* The next definition of routine id (pw_wrap_next: also in an object loaded RTLD_LOCAL),
 * its library noted; NULL: none yet. */
void *pw_ml_resolve(int id);
/* A routine called that no loaded library defines: said once, the call does nothing. */
void pw_ml_missing(int id);

/* The thread's outermost math-library call begins (1), or the call is not recorded: the
 * module is off, the core is at work, or the call is inside another one (then counted
 * as the routine's internal call). Pair a 1 with pw_ml_record or a pw_ml_plan_*.
 * For a stack walker (pw_want_anchor), the call keeps the wrapper's frame as the thread's
 * anchor, unless an outer measured call (MPI) holds it: OpenBLAS's assembly kernels have
 * no unwind tables and their stacks stop there; the walker goes on from the wrapper. */
static inline __attribute__((always_inline)) int pw_ml_enter(int id)
{
    if (PW_UNLIKELY(!pw_ml_on) || pw_wrap_depth)
        return 0;
    if (pw_ml_depth) {
        pw_keyed_tab *t = pw_ml_self;
        if (PW_LIKELY(t != NULL) || (t = pw_ml_tab_create()) != NULL)
            pw_ml_internal(t)[id]++;
        return 0;
    }
    pw_ml_depth = 1;
    if (pw_want_anchor && !pw_call_anchor) {
        pw_call_anchor = (uintptr_t)__builtin_frame_address(0);
        pw_call_here = (uintptr_t)pw_code_here();
        pw_ml_anchored = 1;
    }
    return 1;
}

/* The thread's outermost math-library call ends (after pw_ml_enter returned 1). */
static inline void pw_ml_leave(void)
{
    if (pw_ml_anchored) {
        pw_call_anchor = 0;
        pw_ml_anchored = 0;
    }
    pw_ml_depth = 0;
    pw_hold_if_dying();
}

/* Characters as the size class keeps them: 7 bits each, upper case. */
static inline int pw_ml_char(char c) { return (c >= 'a' && c <= 'z' ? c - 32 : c) & 0x7f; }
/* A CBLAS or LAPACKE layout/enumeration as its letter. */
static inline int pw_ml_enum_char(int v)
{
    switch (v) {
    case 101:
        return 'R'; /* CblasRowMajor (LAPACK_ROW_MAJOR) */
    case 102:
        return 'C'; /* CblasColMajor */
    case 111:
        return 'N'; /* CblasNoTrans */
    case 112:
        return 'T';
    case 113:
        return 'C';
    case 121:
        return 'U'; /* CblasUpper */
    case 122:
        return 'L';
    case 131:
        return 'N'; /* CblasNonUnit */
    case 132:
        return 'U';
    case 141:
        return 'L'; /* CblasLeft */
    case 142:
        return 'R';
    default:
        return v > 0 && v < 128 ? pw_ml_char((char)v) : '?'; /* LAPACKE's chars */
    }
}
/* A cuBLAS cublasOperation_t (CUBLAS_OP_N 0, _T 1, _C 2) as its letter. */
static inline int pw_ml_op_char(int v) { return v == 0 ? 'N' : v == 1 ? 'T' : v == 2 ? 'C' : '?'; }
static inline uint64_t pw_ml_chars(int c0, int c1, int c2, int c3)
{
    return (uint64_t)c0 << 21 | (uint64_t)c1 << 14 | (uint64_t)c2 << 7 | (uint64_t)c3;
}
/* floor(log2(d)) + 1, 0 for d <= 0: the size class of a dimension (6 bits). */
static inline uint64_t pw_ml_bucket(int64_t d)
{
    return d <= 0 ? 0 : (uint64_t)(64 - __builtin_clzll((unsigned long long)d));
}
/* key: routine + 1 (bits 46-63), three buckets (28-45), four characters (0-27) */
static inline uint64_t pw_ml_key(int id, const int64_t d[3], uint64_t chars)
{
    return (uint64_t)(id + 1) << 46 | pw_ml_bucket(d[0]) << 40 | pw_ml_bucket(d[1]) << 34 |
           pw_ml_bucket(d[2]) << 28 | chars;
}

/* Into the thread's table, then the outermost call ends. No lock, no allocation but
 * the table's at the thread's first call. errno is the real call's: only the table's
 * creation could touch it, and keeps it. */
static inline void pw_ml_add(int id, uintptr_t ra, int64_t ticks, const int64_t d[3],
                             uint64_t chars, double flops, double bytes)
{
    pw_keyed_tab *t = pw_ml_self;
    if (PW_LIKELY(t != NULL) || (t = pw_ml_tab_create()) != NULL) {
        pw_ml_slot *s = (pw_ml_slot *)pw_keyed_find(t, pw_ml_key(id, d, chars), ra);
        s->site.count++;
        s->ticks += ticks;
        if (ticks < s->min)
            s->min = ticks;
        if (ticks > s->max)
            s->max = ticks;
        s->flops += flops;
        s->bytes += bytes;
        s->dim_sum[0] += d[0];
        s->dim_sum[1] += d[1];
        s->dim_sum[2] += d[2];
    }
}
static inline void pw_ml_record(int id, uintptr_t ra, int64_t ticks, const int64_t d[3],
                                uint64_t chars, double flops, double bytes)
{
    pw_ml_add(id, ra, ticks, d, chars, flops, bytes);
    pw_ml_leave();
}

/* ---- FFTW plans ---- */
/* What a planner was asked for (mathlib.spec's plan roles). */
typedef struct pw_ml_plan_desc {
    int kind; /* 0 c2c, 1 r2c, 2 c2r */
    int rank, sign, inplace;
    uint32_t flags;
    int64_t n[3]; /* the first three dims */
    int64_t howmany;
    int64_t procs; /* an MPI plan: its communicator's processes; 1 otherwise */
    double size;   /* the product of all dims (an MPI plan's: the global ones) */
} pw_ml_plan_desc;

/* A plan in the module's table, from its creation (by generation: a plan whose address a
 * destroyed one had is a new entry). */
typedef struct pw_ml_plan {
    void *ptr;
    int64_t gen;   /* creation order in the process, its index */
    int32_t fn;    /* the planner */
    int32_t live;  /* not destroyed */
    uintptr_t ra;  /* where it was created */
    int64_t ticks; /* planning time */
    int kind, rank, sign, inplace;
    uint32_t flags;
    int64_t n[3], howmany, procs;
    double size;
    int64_t executes, exec_ticks; /* atomically: a plan may run in several threads */
    double flops;
    int32_t inherited; /* made by the parent of this forked child: written if executed */
} pw_ml_plan;

static inline void pw_ml_plan_desc_init(pw_ml_plan_desc *d, int kind)
{
    *d = (pw_ml_plan_desc){.kind = kind, .howmany = 1, .procs = 1, .size = 1};
}
void pw_ml_plan_desc_dims(pw_ml_plan_desc *d, int rank, const int *n);
/* The same from 64-bit dims (ptrdiff_t: FFTW's MPI planners). */
void pw_ml_plan_desc_ldims(pw_ml_plan_desc *d, int rank, const int64_t *n);
/* The processes of an MPI communicator (PMPI_Comm_size of the loaded MPI, which the
 * caller's MPI_Comm is passed to as it came: a handle of either ABI); 1 if unknown. */
int64_t pw_ml_comm_procs(void *comm);
/* The processes of the BLACS grid of a ScaLAPACK descriptor (its context, desc[1]:
 * blacs_gridinfo_ of the loaded library, nprow x npcol); 1 if unknown. */
double pw_ml_grid_procs(const int *desc);
/* The outermost planner returned `plan` (NULL: FFTW could not plan). */
void pw_ml_plan_made(int id, uintptr_t ra, int64_t ticks, void *plan, const pw_ml_plan_desc *d);
/* The live plan at this address, NULL if none is known (a planner not wrapped). */
const pw_ml_plan *pw_ml_plan_find(const void *plan);
void pw_ml_plan_executed(int id, uintptr_t ra, int64_t ticks, const pw_ml_plan *p, double flops);
void pw_ml_plan_destroyed(int id, uintptr_t ra, int64_t ticks, const void *plan);

/* cuFFT: a plan is an int handle (cufftHandle); in the plan table it is this address,
 * tagged so that it meets no FFTW plan's (a heap address, below 2^47). */
static inline void *pw_ml_cufft_plan(int handle)
{
    return (void *)((uintptr_t)1 << 62 | (uintptr_t)(unsigned)handle);
}
/* A cufftType as the plan's kind: CUFFT_C2C 0x29 / Z2Z 0x69 c2c, R2C 0x2a / D2Z 0x6a r2c,
 * C2R 0x2c / Z2D 0x6c c2r. */
static inline int pw_ml_cufft_kind(int type)
{
    return (type & 0xf) == 0xa ? 1 : (type & 0xf) == 0xc ? 2 : 0;
}

/* log2 without libm (the runtime links none): x >= 1. */
static inline double pw_ml_log2(double x)
{
    int e = 0;
    while (x >= 2) {
        x *= 0.5;
        e++;
    }
    double t = (x - 1) / (x + 1), t2 = t * t, s = 0, p = t; /* ln x = 2 atanh t */
    for (int k = 1; k < 40; k += 2, p *= t2)
        s += p / k;
    return e + 2 * s / 0.69314718055994530942;
}

#endif
