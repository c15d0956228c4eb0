/*
 * The timeline module's part of the experiment format (runtime/modules/timeline.c; the
 * vocabulary: include/perfweave/format.h).
 *
 * Node timeline: timeline/HOST.values + timeline/HOST.json. One reading thread per node
 * (in the first measured process that starts there) reads the node's sources every
 * --node-interval ms and appends one 24-byte record per series and tick to HOST.values.
 * HOST.json names the series (source, name, unit, kind) and says which sources were
 * absent and why. Counters are stored as cumulative values, already unwrapped; readers
 * derive rates (docs/format.md "Node timeline").
 */
#ifndef PERFWEAVE_FORMAT_TIMELINE_H
#define PERFWEAVE_FORMAT_TIMELINE_H

#include "perfweave/format.h"

/* 2: the series PID.mpi_io_ns (MPI-IO calls) renamed PID.mpi_file_ns */
#define PW_TIMELINE_VERSION 2
#define PW_TIMELINE_MAGIC "perfweave-timeline"

#define PW_TIMELINE_FIELDS(X, A)                                                                   \
    X(int64_t, "<i8", t)      /* CLOCK_MONOTONIC ns of the tick */                                 \
    X(int32_t, "<i4", series) /* index into HOST.json "series" */                                  \
    X(int32_t, "<i4", pad)    /* 0 */                                                              \
    X(double, "<f8", value)   /* counter: cumulative since the first tick; gauge: value */
PW_RECORD_STRUCT(PW_TIMELINE_FIELDS, pw_timeline_rec)

#define PW_FORMAT_timeline(FILE, RECORD, NAMES, CODES, CONST, JSON)                                \
    FILE(timeline, "timeline", PW_TIMELINE_MAGIC, PW_TIMELINE_VERSION)                             \
    RECORD(timeline, PW_TIMELINE_FIELDS, pw_timeline_rec)                                          \
    JSON(timeline, PW_TIMELINE_JSON_FIELDS)

/* timeline/HOST.json: X(type, key), O(type, key) (format.h JSON); the X-macro table is
 * aligned by hand */
/* clang-format off */
#define PW_TIMELINE_JSON_FIELDS(X, O)                                                              \
    X(str, format)                                                                                 \
    X(int, version)                                                                                \
    O(str, host)                                                                                   \
    O(int, pid)                                                                                    \
    O(num, interval_ms)                                                                            \
    O(bool, complete)                                                                              \
    O(int, ticks)                                                                                  \
    O(int, t_first)                                                                                \
    O(int, t_last)                                                                                 \
    O(num, sampler_cpu_ns)                                                                         \
    O(num, ns_per_tick)                                                                            \
    O(list, series)                                                                                \
    O(object, absent)
/* clang-format on */

#endif
