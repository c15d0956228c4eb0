/*
 * The io module's segment trace (io_segments.c, --io --trace): each call the record
 * store counts is also a segment, its interval, file, layer, operation, thread, bytes
 * and offset, in io/HOST.PID.segments (include/perfweave/format/io.h).
 */
#ifndef PW_MODULES_IO_SEGMENTS_H
#define PW_MODULES_IO_SEGMENTS_H

#include "io.h"

/* NULL: no segment trace (the hot path's one branch) */
extern pw_io_segments_header_rec *pw_io_segments;

/* The segment trace beside the store at store_path (NAME.pwio -> NAME.segments) of the
 * process pid, when --trace asks for one; none when it cannot be made, said once. */
void pw_io_segments_make(const char *store_path, int64_t pid);
/* One call (offset: -1 none) of the store's thread block `thread`. */
void pw_io_segment(const pw_io_call *c, int file, int64_t bytes, int64_t offset, int thread);
/* In a forked child, before it makes its store: the parent's trace is set aside (the
 * child makes its own with its store); then, once the store is made (made: 1) or not,
 * the parent's trace counts a child that has a store but no trace, and is unmapped. */
void pw_io_segments_fork_begin(void);
void pw_io_segments_fork_end(int made);

#endif
