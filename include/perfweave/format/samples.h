/*
 * The samples module's part of the experiment format (runtime/modules/samples.c; the
 * vocabulary: include/perfweave/format.h).
 *
 * Call-stack samples: samples/NAME.samples + samples/NAME.json, one pair per process
 * (NAME: rank-R, or HOST.PID without MPI). NAME.samples holds one record per sample;
 * NAME.json the process's threads, loaded objects and the names of the activities
 * (docs/format.md "Samples").
 */
#ifndef PERFWEAVE_FORMAT_SAMPLES_H
#define PERFWEAVE_FORMAT_SAMPLES_H

#include "perfweave/format.h"

/* X-macro tables, aligned by hand: their comments span lines. */
/* clang-format off */

/* 2: + counters; 3: the fields state and module, the description's "states" and "modules"
 * renamed activity, object, "activities" and "objects" (the layout is unchanged);
 * 4: the activity "mpi_io" (MPI-IO calls) renamed "mpi_file"; 5: a stack deeper than
 * PW_SAMPLE_FRAMES keeps its innermost frames but 8, then its outermost 8 (the layout is
 * unchanged) */
#define PW_SAMPLES_VERSION 5
#define PW_SAMPLES_MAGIC "perfweave-samples"
#define PW_SAMPLE_FRAMES 32  /* frames of a stack, innermost first */
#define PW_SAMPLE_COUNTERS 4 /* the first --counters events, read at each sample */

#define PW_SAMPLE_FIELDS(X, A)                                                             \
    X(int64_t, "<i8", t)                             /* CLOCK_MONOTONIC ns */              \
    X(int32_t, "<i4", thread)                        /* index into NAME.json "threads" */  \
    X(int16_t, "<i2", activity)                      /* the thread's activity (index of    \
                                                        NAME.json "activities":            \
                                                        PW_ACTIVITIES) */                  \
    X(int16_t, "<i2", depth)                         /* frames kept */                     \
    A(int32_t, "<i4", object, PW_SAMPLE_FRAMES)      /* loaded object of each frame (index \
                                                        of NAME.json "objects"), -1 none */ \
    A(int64_t, "<i8", offset, PW_SAMPLE_FRAMES)      /* address - the object's load base;  \
                                                        the address where object is -1 */  \
    A(int64_t, "<i8", counters, PW_SAMPLE_COUNTERS) /* -1: not read at this sample */
PW_RECORD_STRUCT(PW_SAMPLE_FIELDS, pw_sample_rec)

#define PW_FORMAT_samples(FILE, RECORD, NAMES, CODES, CONST, JSON)                               \
    FILE(samples, "samples", PW_SAMPLES_MAGIC, PW_SAMPLES_VERSION)                         \
    RECORD(sample, PW_SAMPLE_FIELDS, pw_sample_rec)                                        \
    CONST(sample_frames, PW_SAMPLE_FRAMES)                                                 \
    CONST(sample_counters, PW_SAMPLE_COUNTERS)                                             \
    JSON(samples, PW_SAMPLES_JSON_FIELDS)

/* samples/NAME.json: X(type, key), O(type, key) (format.h JSON), in the order the
 * runtime writes them. Versions 1 and 2 wrote "states" and "modules" for "activities" and
 * "objects" (the reader renames them first); version 1 had no "counters". */
#define PW_SAMPLES_JSON_FIELDS(X, O)                                                       \
    X(str, format)                                                                         \
    X(int, version)                                                                        \
    O(int, rank)                                                                           \
    O(int, pid)                                                                            \
    O(str, host)                                                                           \
    X(int, frames)                       /* PW_SAMPLE_FRAMES: the records' layout */       \
    O(strs, counters)                    /* the events of the records' counters */         \
    O(int, samples)                                                                        \
    O(str, unwinder)                                                                       \
    O(int, unwind_fallbacks)             /* samples by frame pointers instead */           \
    O(object, dropped)                   /* threads never sampled, and why */              \
    O(int, t_start)                                                                        \
    O(int, t_end)                                                                          \
    O(strs, activities)                  /* by the records' activity index */              \
    O(list, threads)                     /* by the records' thread index */                \
    O(list, objects)                     /* the loaded objects: [path, build-id] */
/* clang-format on */

#endif
