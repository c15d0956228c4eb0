/*
 * The io module's part of the experiment format (runtime/modules/io.c, --io; the
 * vocabulary: include/perfweave/format.h).
 *
 * io/NAME.pwio, one per process (NAME: HOST.PID, the name it has from its start): the
 * module's record store itself, a file mapped MAP_SHARED from the process's start, so
 * that a process killed by SIGKILL leaves what it counted. Layout (docs/format.md "I/O
 * profile"), every part at a multiple of 4096 bytes:
 *   one io_header; max_files io_file (the files' names, index = file id); max_objects
 *   io_object (the loaded objects call sites name); max_threads thread blocks, each
 *   max_files * PW_IO_NLAYERS io_rec (index file * PW_IO_NLAYERS + layer; file -1: unused)
 *   then max_sites io_site (count 0: unused; the slots of a keyed call-site table,
 *   runtime/core/keyed.h, that keeps --io-max-sites sites: at least twice as many).
 * Durations are in ticks (header.ns_per_tick converts them; pw_ticks()), times in ns of
 * CLOCK_MONOTONIC.
 *
 * io/NAME.segments, with --io and --trace: the process's segment trace, one
 * io_segment per call the store counts, in the order their slots were taken. One
 * io_segments_header, padded to 4096 bytes, then capacity io_segment slots; mapped
 * MAP_SHARED from the start like the store. A slot whose t1 is 0 was never committed
 * (past next, or its process killed while it wrote it). Calls past capacity are
 * counted in dropped, never written.
 */
#ifndef PERFWEAVE_FORMAT_IO_H
#define PERFWEAVE_FORMAT_IO_H

#include "perfweave/format.h"

/* clang-format off */
#define PW_IO_VERSION 3
#define PW_IO_MAGIC "perfweave-io"
#define PW_IO_MAGIC_NUMBER 0x31766f6977700a00LL /* header.magic */
#define PW_IO_PATH 232     /* bytes of a file's name kept (longer names: the last ones) */
#define PW_IO_OBJECT_PATH 248
#define PW_IO_HIST_BINS 10 /* Darshan's access-size bins: 0-100, -1K, -10K, -100K, -1M,
                              -4M, -10M, -100M, -1G, more */
#define PW_IO_COMMON 4     /* common access sizes kept per record */
#define PW_IO_SEGMENTS_VERSION 1
#define PW_IO_SEGMENTS_MAGIC "perfweave-io-segments"
#define PW_IO_SEGMENTS_MAGIC_NUMBER 0x31676573776f7000LL /* io_segments_header.magic */

/* The layers a call is of. */
#define PW_IO_LAYERS(X)                                                                    \
    X(POSIX, 0, "posix")                                                                    \
    X(STDIO, 1, "stdio")                                                                    \
    X(MPIIO, 2, "mpiio")
#define PW_IO_NLAYERS 3

/* What a call's time is charged to (io_rec.ticks[op]); close is its own. */
#define PW_IO_OPS(X)                                                                       \
    X(OPEN, 0, "open")                                                                      \
    X(CLOSE, 1, "close")                                                                    \
    X(READ, 2, "read")                                                                      \
    X(WRITE, 3, "write")                                                                    \
    X(SEEK, 4, "seek")                                                                      \
    X(STAT, 5, "stat")                                                                      \
    X(SYNC, 6, "sync")                                                                      \
    X(META, 7, "meta")   /* unlink, rename, mkdir, ftruncate, fcntl, dup, view, ... */      \
    X(MMAP, 8, "mmap")   /* mmap, munmap */
#define PW_IO_NOPS 9

/* The form of an MPI-IO call (Darshan's MPIIO_INDEP_, _COLL_, _SPLIT_ and _NB_ counters),
 * from the function's name: a split collective counts at its _begin, a nonblocking call
 * at its post; an open is collective on a communicator of more than one process. */
#define PW_IO_FORMS(X)                                                                     \
    X(INDEP, 0, "indep") /* MPI_File_read, _at, _shared; an open on one process */         \
    X(COLL, 1, "coll")   /* _all, _at_all, _ordered */                                      \
    X(SPLIT, 2, "split") /* _all_begin, _at_all_begin, _ordered_begin */                    \
    X(NB, 3, "nb")       /* MPI_File_iread, _iwrite_at, _iread_all, ... */
#define PW_IO_NFORMS 4

/* statfs f_type of the file systems the report names (others: their number). */
#define PW_IO_FS_TYPES(X)                                                                  \
    X(TMPFS, 0x01021994) X(RAMFS, 0x858458f6) X(EXT4, 0xef53) X(XFS, 0x58465342)            \
    X(BTRFS, 0x9123683e) X(NFS, 0x6969) X(LUSTRE, 0x0bd00bd0) X(GPFS, 0x47504653)           \
    X(BEEGFS, 0x19830326) X(CEPH, 0x00c36400) X(ZFS, 0x2fc12fc1) X(OVERLAY, 0x794c7630)     \
    X(FUSE, 0x65735546) X(PROC, 0x9fa0) X(SYSFS, 0x62656572) X(DEVPTS, 0x1cd1)              \
    X(PIPEFS, 0x50495045) X(SQUASHFS, 0x73717368)

#define PW_IO_HEADER_FIELDS(X, A)                                                          \
    X(int64_t, "<i8", magic)           /* PW_IO_MAGIC_NUMBER */                             \
    X(int32_t, "<i4", version)         /* PW_IO_VERSION */                                  \
    X(int32_t, "<i4", rank)            /* the process's rank once known, else -1 */         \
    X(int64_t, "<i8", pid)                                                                  \
    X(int64_t, "<i8", parent_pid)      /* a process forked by a measured one: its parent */ \
    X(int32_t, "<i4", max_files)                                                            \
    X(int32_t, "<i4", max_threads)                                                          \
    X(int32_t, "<i4", max_sites)       /* io_site slots per thread block */                 \
    X(int32_t, "<i4", max_objects)                                                          \
    X(int32_t, "<i4", nfiles)          /* io_file entries in use */                         \
    X(int32_t, "<i4", nthreads)        /* thread blocks in use */                           \
    X(int32_t, "<i4", state)           /* -1 running (or killed), else PW_STATES */         \
    X(int32_t, "<i4", forks_dropped)   /* children that could not make a store of their own */ \
    X(int64_t, "<i8", t_start)         /* ns: the module's start */                         \
    X(int64_t, "<i8", t_end)           /* ns: the dump, or the last update */               \
    X(double, "<f8", ns_per_tick)      /* at t_end */                                       \
    X(int64_t, "<i8", busy_ticks)      /* in POSIX/stdio calls, overlaps once; + solo_ticks */ \
    X(int64_t, "<i8", dropped_files)   /* calls on files past max_files */                  \
    X(int64_t, "<i8", dropped_threads) /* calls of threads past max_threads */              \
    X(int64_t, "<i8", dropped_sites)   /* calls from sites past max_sites (in the rec) */   \
    X(int64_t, "<i8", mmap_estimated)  /* 1: mmap bytes were estimated (mincore) */       \
    X(int64_t, "<i8", solo_ticks)      /* the first I/O thread's while alone (io.md) */
PW_RECORD_STRUCT(PW_IO_HEADER_FIELDS, pw_io_header_rec)

#define PW_IO_FILE_FIELDS(X, A)                                                            \
    X(uint64_t, "<u8", hash)           /* of the whole name; 0: free */                     \
    X(int64_t, "<i8", fs_type)         /* statfs f_type; 0: unknown */                      \
    X(int32_t, "<i4", memory)          /* 1: memory-backed (tmpfs, ramfs) */                \
    X(int32_t, "<i4", length)          /* of the whole name */                              \
    A(char, "S1", path, PW_IO_PATH)    /* as the program named it, NUL-terminated */
PW_RECORD_STRUCT(PW_IO_FILE_FIELDS, pw_io_file_rec)

#define PW_IO_OBJECT_FIELDS(X, A)                                                          \
    X(uint64_t, "<u8", hash)                                                                \
    A(char, "S1", path, PW_IO_OBJECT_PATH)
PW_RECORD_STRUCT(PW_IO_OBJECT_FIELDS, pw_io_object_rec)

/* Darshan-comparable counters of one (file, layer) in one thread. */
#define PW_IO_REC_FIELDS(X, A)                                                             \
    X(int32_t, "<i4", file)            /* index of io_file; -1: unused */                   \
    X(int32_t, "<i4", layer)           /* PW_IO_LAYERS */                                   \
    X(int64_t, "<i8", opens)                                                                \
    X(int64_t, "<i8", closes)                                                               \
    X(int64_t, "<i8", reads)                                                                \
    X(int64_t, "<i8", writes)                                                               \
    X(int64_t, "<i8", seeks)                                                                \
    X(int64_t, "<i8", stats)                                                                \
    X(int64_t, "<i8", syncs)                                                                \
    X(int64_t, "<i8", metas)                                                                \
    X(int64_t, "<i8", mmaps)                                                                \
    X(int64_t, "<i8", bytes_read)                                                           \
    X(int64_t, "<i8", bytes_written)                                                        \
    X(int64_t, "<i8", max_byte_read)   /* highest offset read + 1; -1 none */               \
    X(int64_t, "<i8", max_byte_written)                                                     \
    X(int64_t, "<i8", seq_reads)       /* at an offset past the previous access's end */    \
    X(int64_t, "<i8", seq_writes)                                                           \
    X(int64_t, "<i8", consec_reads)    /* at exactly the previous access's end */           \
    X(int64_t, "<i8", consec_writes)                                                        \
    X(int64_t, "<i8", rw_switches)     /* a read after a write or the reverse */            \
    A(int64_t, "<i8", size_read, PW_IO_HIST_BINS)                                           \
    A(int64_t, "<i8", size_write, PW_IO_HIST_BINS)                                          \
    A(int64_t, "<i8", access_size, PW_IO_COMMON)  /* the first sizes seen (0: none) */      \
    A(int64_t, "<i8", access_count, PW_IO_COMMON) /* ... and their accesses */              \
    A(int64_t, "<i8", ticks, PW_IO_NOPS)          /* time per PW_IO_OPS */                  \
    A(int64_t, "<i8", calls, PW_IO_NOPS)          /* calls per PW_IO_OPS */                 \
    X(int64_t, "<i8", first_tick)      /* start of the first call */                        \
    X(int64_t, "<i8", last_tick)       /* end of the last call */                           \
    X(int64_t, "<i8", max_read_ticks)  /* the slowest read */                               \
    X(int64_t, "<i8", max_write_ticks)                                                      \
    X(int64_t, "<i8", mmap_bytes)      /* estimated: resident pages of its mappings */      \
    X(int64_t, "<i8", last_end)        /* offset after the previous access; -1 none */      \
    X(int32_t, "<i4", last_op)         /* PW_IO_OP of the previous read/write, -1 */        \
    X(int32_t, "<i4", reserved)                                                             \
    A(int64_t, "<i8", form_opens, PW_IO_NFORMS)  /* mpiio: per PW_IO_FORMS (version 3) */   \
    A(int64_t, "<i8", form_reads, PW_IO_NFORMS)                                             \
    A(int64_t, "<i8", form_writes, PW_IO_NFORMS)                                            \
    X(int64_t, "<i8", views)           /* mpiio: MPI_File_set_view (version 3) */
PW_RECORD_STRUCT(PW_IO_REC_FIELDS, pw_io_rec)

/* Calls of one (file, layer, op) from one call site in one thread. */
#define PW_IO_SITE_FIELDS(X, A)                                                            \
    X(int32_t, "<i4", file)                                                                 \
    X(int16_t, "<i2", layer)                                                                \
    X(int16_t, "<i2", op)                                                                   \
    X(int32_t, "<i4", object)          /* index of io_object; -1 unknown */                 \
    X(int32_t, "<i4", reserved)                                                             \
    X(uint64_t, "<u8", offset)         /* return address - the object's base */             \
    X(uint64_t, "<u8", ra)             /* return address (this run's) */                    \
    X(int64_t, "<i8", count)           /* 0: unused */                                      \
    X(int64_t, "<i8", bytes)                                                                \
    X(int64_t, "<i8", ticks)
PW_RECORD_STRUCT(PW_IO_SITE_FIELDS, pw_io_site_rec)

/* The segment trace's header. A tick is ns_start + (tick - tick_start) * ns_per_tick ns
 * of CLOCK_MONOTONIC (the trace's rank-R.json "clock" maps the same ticks alike). */
#define PW_IO_SEGMENTS_HEADER_FIELDS(X, A)                                                 \
    X(int64_t, "<i8", magic)           /* PW_IO_SEGMENTS_MAGIC_NUMBER */                    \
    X(int32_t, "<i4", version)         /* PW_IO_SEGMENTS_VERSION */                         \
    X(int32_t, "<i4", record_size)     /* bytes of an io_segment */                         \
    X(int64_t, "<i8", pid)                                                                  \
    X(int64_t, "<i8", capacity)        /* io_segment slots (--io-trace-max) */              \
    X(int64_t, "<i8", next)            /* slots taken; past capacity: dropped */            \
    X(int64_t, "<i8", dropped)         /* calls not written: past capacity, no disk space */ \
    X(int64_t, "<i8", forks_dropped)   /* children that could not make a file of their own */ \
    X(int64_t, "<i8", tick_start)      /* pw_ticks() at ns_start */                         \
    X(int64_t, "<i8", ns_start)        /* CLOCK_MONOTONIC ns: the process's start */        \
    X(double, "<f8", ns_per_tick)      /* kept current with the store's header */
PW_RECORD_STRUCT(PW_IO_SEGMENTS_HEADER_FIELDS, pw_io_segments_header_rec)

/* One call: its interval, file, layer, operation, thread, bytes and offset. */
#define PW_IO_SEGMENT_FIELDS(X, A)                                                         \
    X(int64_t, "<i8", t0)              /* ticks: the call began */                          \
    X(int64_t, "<i8", t1)              /* ticks: it ended; written last; 0 uncommitted */   \
    X(int64_t, "<i8", bytes)           /* moved (reads, writes), else 0 */                  \
    X(int64_t, "<i8", offset)          /* in the file; -1 unknown or none */                \
    X(int32_t, "<i4", file)            /* index of the store's io_file */                   \
    X(int16_t, "<i2", thread)          /* the store's thread block */                       \
    X(uint8_t, "u1", layer)            /* PW_IO_LAYERS */                                   \
    X(uint8_t, "u1", op)               /* PW_IO_OPS */
PW_RECORD_STRUCT(PW_IO_SEGMENT_FIELDS, pw_io_segment_rec)

#define PW_FORMAT_io(FILE, RECORD, NAMES, CODES, CONST, JSON)                                    \
    FILE(io, "io", PW_IO_MAGIC, PW_IO_VERSION)                                              \
    RECORD(io_header, PW_IO_HEADER_FIELDS, pw_io_header_rec)                                \
    RECORD(io_file, PW_IO_FILE_FIELDS, pw_io_file_rec)                                      \
    RECORD(io_object, PW_IO_OBJECT_FIELDS, pw_io_object_rec)                                \
    RECORD(io_rec, PW_IO_REC_FIELDS, pw_io_rec)                                             \
    RECORD(io_site, PW_IO_SITE_FIELDS, pw_io_site_rec)                                      \
    FILE(io_segments, "io", PW_IO_SEGMENTS_MAGIC, PW_IO_SEGMENTS_VERSION)                   \
    RECORD(io_segments_header, PW_IO_SEGMENTS_HEADER_FIELDS, pw_io_segments_header_rec)     \
    RECORD(io_segment, PW_IO_SEGMENT_FIELDS, pw_io_segment_rec)                             \
    NAMES(io_layers, PW_IO_LAYERS)                                                          \
    NAMES(io_ops, PW_IO_OPS)                                                                \
    NAMES(io_forms, PW_IO_FORMS)                                                            \
    CODES(io_fs_types, PW_IO_FS_TYPES)                                                      \
    CONST(io_hist_bins, PW_IO_HIST_BINS)                                                    \
    CONST(io_magic_number, PW_IO_MAGIC_NUMBER)                                              \
    CONST(io_segments_magic_number, PW_IO_SEGMENTS_MAGIC_NUMBER)
/* clang-format on */

#define PW_IO_ENUM(name, value, str) PW_IO_##name = value,
enum pw_io_layer { PW_IO_LAYERS(PW_IO_ENUM) };
enum pw_io_op { PW_IO_OPS(PW_IO_ENUM) };
enum pw_io_form { PW_IO_FORMS(PW_IO_ENUM) };
#undef PW_IO_ENUM

#endif
