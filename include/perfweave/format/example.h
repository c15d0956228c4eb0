/*
 * The example module's part of the experiment format (runtime/modules/example.c; the
 * vocabulary: include/perfweave/format.h). A module's format header declares the kinds
 * of file it writes (and the records of its binary files, if it has any: see
 * format/samples.h); the build turns them into perfweave/_format.py for its reader.
 *
 * example/NAME.json per process (NAME: rank-R, or HOST.PID without a rank) and
 * example/job.json, the job's totals (docs/format.md "Example module").
 */
#ifndef PERFWEAVE_FORMAT_EXAMPLE_H
#define PERFWEAVE_FORMAT_EXAMPLE_H

#include "perfweave/format.h"

#define PW_EXAMPLE_VERSION 1 /* of example/ files: bump when a field changes meaning */
#define PW_EXAMPLE_MAGIC "perfweave-example"
#define PW_EXAMPLE_JOB_MAGIC "perfweave-example-job"

/* The keys of its JSON files, X(type, key) (format.h JSON): the totals both files hold
 * (example.c's struct and writer of them are made from this list), each file's keys. */
/* clang-format off */
#define PW_EXAMPLE_TOTALS(X) X(int, threads) X(int, calls) X(int, total_ns) X(int, max_ns)
#define PW_EXAMPLE_FIELDS(X, O)                                                                    \
    PW_JSON_HEAD(X) X(str, state) X(str, function) PW_EXAMPLE_TOTALS(X)
#define PW_EXAMPLE_JOB_FIELDS(X, O)                                                                \
    X(str, format) X(int, version) X(int, ranks) X(int, reported) X(str, function)                 \
    PW_EXAMPLE_TOTALS(X)
/* clang-format on */

#define PW_FORMAT_example(FILE, RECORD, NAMES, CODES, CONST, JSON)                                 \
    FILE(example, "example", PW_EXAMPLE_MAGIC, PW_EXAMPLE_VERSION)                                 \
    FILE(example_job, "example", PW_EXAMPLE_JOB_MAGIC, PW_EXAMPLE_VERSION)                         \
    JSON(example, PW_EXAMPLE_FIELDS)                                                               \
    JSON(example_job, PW_EXAMPLE_JOB_FIELDS)

#endif
