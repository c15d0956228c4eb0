/*
 * The mathlib module's part of the experiment format (runtime/modules/mathlib.c; the
 * vocabulary: include/perfweave/format.h).
 *
 * Per process (NAME: rank-R, or HOST.PID without a rank), in mathlib/:
 *   NAME.calls  one record per (routine, size class, call site): the process's threads
 *               merged; the routine is an index of NAME.json "routines"
 *   NAME.plans  one record per FFTW plan created, in creation order
 *   NAME.json   the routines, the libraries that answered them, their internal calls,
 *               the loaded objects the call sites name, what did not fit
 * (docs/format.md "Math-library calls").
 */
#ifndef PERFWEAVE_FORMAT_MATHLIB_H
#define PERFWEAVE_FORMAT_MATHLIB_H

#include "perfweave/format.h"

/* clang-format off */
#define PW_MATHLIB_VERSION 2
#define PW_MATHLIB_MAGIC "perfweave-mathlib"

#define PW_MLCALL_FIELDS(X, A)                                                             \
    X(int32_t, "<i4", routine)           /* index of NAME.json "routines" */               \
    X(int32_t, "<i4", object)            /* the call site's object ("objects"), -1 none */ \
    X(int64_t, "<i8", offset)            /* return address - object base; the address     \
                                            when object is -1; 0: the overflow site */     \
    A(int32_t, "<i4", dim_bucket, 3)     /* floor(log2(dim)) + 1 of each dim, 0: none */   \
    A(uint8_t, "u1", chars, 4)           /* transpose/uplo/side/diag/job letters, 0 none */ \
    X(int64_t, "<i8", count)             /* calls */                                       \
    X(int64_t, "<i8", total_ns)                                                            \
    X(int64_t, "<i8", min_ns)                                                              \
    X(int64_t, "<i8", max_ns)                                                              \
    X(double, "<f8", flops)              /* by the spec's formula, summed */               \
    X(double, "<f8", bytes)              /* bytes touched, by the spec's formula */        \
    A(int64_t, "<i8", dim_sum, 3)        /* sum of each dim over the calls */
PW_RECORD_STRUCT(PW_MLCALL_FIELDS, pw_mlcall_rec)

#define PW_MLPLAN_FIELDS(X, A)                                                             \
    X(int64_t, "<i8", gen)               /* creation order in the process */               \
    X(int32_t, "<i4", routine)           /* the planner, index of "routines" */            \
    X(int32_t, "<i4", object)            /* where it was created */                        \
    X(int64_t, "<i8", offset)                                                              \
    X(int32_t, "<i4", kind)              /* index of "fft_kinds": c2c r2c c2r */           \
    X(int32_t, "<i4", rank)                                                                \
    A(int64_t, "<i8", n, 3)              /* the first three dims, 0 beyond rank */         \
    X(int64_t, "<i8", howmany)                                                             \
    X(int64_t, "<i8", procs)             /* an MPI plan: its communicator's size; 1 */     \
    X(double, "<f8", size)               /* product of all dims (MPI: the global ones) */  \
    X(int32_t, "<i4", sign)              /* -1 forward, +1 backward, 0 real transforms */  \
    X(uint32_t, "<u4", flags)            /* FFTW planner flags */                          \
    X(int32_t, "<i4", inplace)                                                             \
    X(int32_t, "<i4", live)              /* not destroyed at the process's end */          \
    X(int64_t, "<i8", plan_ns)           /* planning time */                               \
    X(int64_t, "<i8", executes)                                                            \
    X(int64_t, "<i8", exec_ns)                                                             \
    X(double, "<f8", flops)              /* of its executes */
PW_RECORD_STRUCT(PW_MLPLAN_FIELDS, pw_mlplan_rec)

#define PW_FORMAT_mathlib(FILE, RECORD, NAMES, CODES, CONST, JSON)                               \
    FILE(mathlib, "mathlib", PW_MATHLIB_MAGIC, PW_MATHLIB_VERSION)                         \
    RECORD(mlcall, PW_MLCALL_FIELDS, pw_mlcall_rec)                                        \
    RECORD(mlplan, PW_MLPLAN_FIELDS, pw_mlplan_rec)                                        \
    JSON(mathlib, PW_MATHLIB_JSON_FIELDS)

/* mathlib/NAME.json: X(type, key), O(type, key) (format.h JSON) */
#define PW_MATHLIB_JSON_FIELDS(X, O)                                                       \
    PW_JSON_HEAD(X)                                                                        \
    X(str, state)                                                                          \
    X(int, t_start)                                                                        \
    X(int, t_end)                                                                          \
    X(int, threads)                                                                        \
    O(int, max_sites)                    /* --mathlib-max-sites */                         \
    X(int, dropped)                      /* calls folded into overflow sites */            \
    X(int, plans_dropped)                                                                  \
    X(int, unknown_plan_executes)                                                          \
    X(strs, routines)                    /* by the records' routine index */               \
    X(strs, groups)                      /* each routine's library interface */            \
    X(strs, libraries)                   /* the object that answered each, "" not called */\
    X(list, internal)                    /* calls inside another math-library call */      \
    X(strs, fft_kinds)                                                                     \
    X(list, not_wrapped)                 /* [routine, why] */                              \
    X(list, objects)                     /* the loaded objects: [path, build-id] */
/* clang-format on */

#endif
