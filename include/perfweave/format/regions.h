/*
 * The regions module's part of the experiment format (runtime/modules/regions.c; the
 * vocabulary: include/perfweave/format.h).
 *
 * The program's regions, phases, MPI_Pcontrol marks and measurement-off windows
 * (perfweave_region_begin/end, perfweave_phase_begin/end, perfweave_measure_off/on,
 * MPI_Pcontrol): regions/NAME.intervals + regions/NAME.json per process (NAME: rank-R, or
 * HOST.PID without a rank). NAME.intervals holds one record per interval, written when
 * it ends (intervals still open when the process ends are written then, flagged OPEN);
 * NAME.json the names the records' name index stands for, the threads, and the counts of
 * ends that matched no open region (docs/format.md "Regions").
 */
#ifndef PERFWEAVE_FORMAT_REGIONS_H
#define PERFWEAVE_FORMAT_REGIONS_H

#include "perfweave/format.h"

/* clang-format off */
#define PW_REGIONS_VERSION 1
#define PW_REGIONS_MAGIC "perfweave-regions"

/* What an interval is (a record's kind) */
#define PW_REGION_KINDS(X)                                                                 \
    X(REGION, 0, "region") /* perfweave_region_begin .. _end: nested, per thread */        \
    X(PHASE, 1, "phase")   /* perfweave_phase_begin .. _end, or MPI_Pcontrol(N > 1) .. the \
                              next MPI_Pcontrol: top level, one at a time per thread */    \
    X(OFF, 2, "off")       /* perfweave_measure_off or MPI_Pcontrol(0) .. on again: the    \
                              process records no MPI call, sample or trace event */

#define PW_REGION_FLAGS(X)                                                                 \
    X(OPEN, 1) /* still open when the process ended: t_end is the end's time */

#define PW_REGION_INTERVAL_FIELDS(X, A)                                                    \
    X(int64_t, "<i8", t_begin)   /* CLOCK_MONOTONIC ns (the samples' and traces' clock) */ \
    X(int64_t, "<i8", t_end)                                                               \
    X(int64_t, "<i8", mpi_ns)    /* recorded MPI time of the thread inside (inclusive) */  \
    X(int64_t, "<i8", mpi_calls) /* recorded MPI calls of the thread inside */             \
    X(int32_t, "<i4", name)      /* index into NAME.json "names" */                        \
    X(int32_t, "<i4", thread)    /* index into NAME.json "threads" */                      \
    X(int16_t, "<i2", depth)     /* REGION: open regions around it; others 0 */            \
    X(uint8_t, "u1", kind)       /* PW_REGION_KINDS */                                     \
    X(uint8_t, "u1", flags)      /* PW_REGION_FLAGS */                                     \
    X(int32_t, "<i4", pad)

/* regions/NAME.json: X(type, key), O(type, key) (format.h JSON) */
#define PW_REGIONS_JSON_FIELDS(X, O)                                                       \
    PW_JSON_HEAD(X)                                                                        \
    X(str, state)                                                                          \
    X(strs, names)         /* by the records' name index */                                \
    X(list, threads)       /* by the records' thread index: the threads' OS ids */         \
    X(int, intervals)      /* records in NAME.intervals */                                 \
    X(int, unmatched_ends) /* region or phase ends that matched no open one (ignored) */   \
    X(int, dropped)        /* intervals not kept: too deep, names or memory exhausted */

#define PW_FORMAT_regions(FILE, RECORD, NAMES, CODES, CONST, JSON)                         \
    FILE(regions, "regions", PW_REGIONS_MAGIC, PW_REGIONS_VERSION)                         \
    RECORD(region_interval, PW_REGION_INTERVAL_FIELDS, pw_region_interval_rec)             \
    NAMES(region_kinds, PW_REGION_KINDS)                                                   \
    CODES(region_flags, PW_REGION_FLAGS)                                                   \
    JSON(regions, PW_REGIONS_JSON_FIELDS)
/* clang-format on */

PW_RECORD_STRUCT(PW_REGION_INTERVAL_FIELDS, pw_region_interval_rec)

#define PW_REGION_ENUM(name, value, str) PW_REGION_##name = value,
enum pw_region_kind { PW_REGION_KINDS(PW_REGION_ENUM) };
#undef PW_REGION_ENUM
#define PW_REGION_FLAG_ENUM(name, value) PW_REGION_F_##name = value,
enum pw_region_flag { PW_REGION_FLAGS(PW_REGION_FLAG_ENUM) };
#undef PW_REGION_FLAG_ENUM

#endif
