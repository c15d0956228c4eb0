/*
 * The gpu module's part of the experiment format (runtime/modules/gpu.c; docs/format.md
 * "GPU activity"). gpu/NAME.json per process that loaded the CUDA runtime or driver
 * (NAME: rank-R, or HOST.PID without a rank): CUPTI's activity records aggregated, each
 * table a list of rows whose columns are the NAMES lists below (perfweave._format
 * GPU_KERNEL_COLUMNS, ...). Times are ns on the process's CLOCK_MONOTONIC (the clock of
 * t_start_ns), whichever clock CUPTI kept ("clock": "callback" or "offset").
 */
#ifndef PERFWEAVE_FORMAT_GPU_H
#define PERFWEAVE_FORMAT_GPU_H

#include "perfweave/format.h"

#define PW_GPU_VERSION 1 /* of gpu/ files: bump when a field changes meaning */
#define PW_GPU_MAGIC "perfweave-gpu"

/* clang-format off */
/* kernels: one row per (name, device, context, stream, grid, block) */
#define PW_GPU_KERNEL_COLUMNS(X)                                                           \
    X(NAME, 0, "name") X(DEVICE, 1, "device") X(CONTEXT, 2, "context")                     \
    X(STREAM, 3, "stream") X(GRID_X, 4, "grid_x") X(GRID_Y, 5, "grid_y")                   \
    X(GRID_Z, 6, "grid_z") X(BLOCK_X, 7, "block_x") X(BLOCK_Y, 8, "block_y")               \
    X(BLOCK_Z, 9, "block_z") X(COUNT, 10, "count") X(TOTAL_NS, 11, "total_ns")             \
    X(MIN_NS, 12, "min_ns") X(MAX_NS, 13, "max_ns")
/* copies and memsets: one row per (direction, source and destination memory kinds,
 * device, context, stream); a memset's direction is "memset", its source kind "" */
#define PW_GPU_COPY_COLUMNS(X)                                                             \
    X(DIRECTION, 0, "direction") X(SRC_KIND, 1, "src_kind") X(DST_KIND, 2, "dst_kind")     \
    X(DEVICE, 3, "device") X(CONTEXT, 4, "context") X(STREAM, 5, "stream")                 \
    X(COUNT, 6, "count") X(BYTES, 7, "bytes") X(TOTAL_NS, 8, "total_ns")
/* host waits for the device: one row per (type, context, stream); stream -1: none */
#define PW_GPU_SYNC_COLUMNS(X)                                                             \
    X(TYPE, 0, "type") X(CONTEXT, 1, "context") X(STREAM, 2, "stream")                     \
    X(COUNT, 3, "count") X(TOTAL_NS, 4, "total_ns") X(MAX_NS, 5, "max_ns")
/* CUDA runtime and driver API calls: one row per (layer, function) */
#define PW_GPU_API_COLUMNS(X)                                                              \
    X(LAYER, 0, "layer") X(NAME, 1, "name") X(COUNT, 2, "count") X(TOTAL_NS, 3, "total_ns")
/* each device's busy time: the union of its kernels', copies' and memsets' intervals */
#define PW_GPU_BUSY_COLUMNS(X)                                                             \
    X(DEVICE, 0, "device") X(BUSY_NS, 1, "busy_ns") X(FIRST_NS, 2, "first_ns")             \
    X(LAST_NS, 3, "last_ns")

#define PW_GPU_FIELDS(X, O)                                                                \
    PW_JSON_HEAD(X) X(str, state)                                                          \
    X(str, status)         /* "active", or why not: "no-cupti", "cupti-error", ... */      \
    X(str, note)           /* the one line the report prints when not active */            \
    X(str, cuda)           /* the CUDA runtime or driver object that was loaded */         \
    X(str, cupti)          /* the CUPTI library opened, "" none */                         \
    X(str, clock)          /* "callback": CUPTI took perfweave's clock; "offset" */        \
    X(int, clock_offset_ns) /* added to CUPTI's times with "offset" */                     \
    X(int, t_start_ns) X(int, t_end_ns) /* the process's measured life */                  \
    X(int, records)        /* activity records read */                                     \
    X(int, dropped)        /* records CUPTI dropped (no buffer) */                         \
    X(int, lost)           /* records not kept: a table or the busy list full */           \
    X(int, buffers)        /* buffers handed to CUPTI */                                   \
    X(list, kernels) X(list, copies) X(list, syncs) X(list, apis) X(list, busy)
/* clang-format on */

#define PW_FORMAT_gpu(FILE, RECORD, NAMES, CODES, CONST, JSON)                                     \
    FILE(gpu, "gpu", PW_GPU_MAGIC, PW_GPU_VERSION)                                                 \
    NAMES(gpu_kernel_columns, PW_GPU_KERNEL_COLUMNS)                                               \
    NAMES(gpu_copy_columns, PW_GPU_COPY_COLUMNS)                                                   \
    NAMES(gpu_sync_columns, PW_GPU_SYNC_COLUMNS)                                                   \
    NAMES(gpu_api_columns, PW_GPU_API_COLUMNS)                                                     \
    NAMES(gpu_busy_columns, PW_GPU_BUSY_COLUMNS)                                                   \
    JSON(gpu, PW_GPU_FIELDS)

#endif
