/*
 * perfweave experiment format: the names every layer shares, declared once.
 *
 * This header and the modules' format headers (include/perfweave/format/MODULE.h, one
 * per module of runtime/modules/modules.def that writes files) declare, as X-macro
 * lists, every file kind, record layout and list of names of the experiment directory.
 * The runtime's writers use them; at build time runtime/core/gen_format.c expands the
 * same lists into perfweave/_format.py (numpy dtypes, lists, codes, versions), which
 * every Python reader and writer imports (docs/architecture.md "Names declared once").
 * Nothing else holds a copy.
 *
 * A part (this header's PW_FORMAT_core, a module's PW_FORMAT_<module>) is a list of:
 *   FILE(kind, directory, magic, version)  a kind of file: its directory in the
 *                                          experiment ("." for the top), the "format"
 *                                          string in its header and its version
 *   RECORD(name, FIELDS, type)             a fixed-size binary record: FIELDS(X, A) lists
 *                                          X(C type, numpy code, field) and, for arrays,
 *                                          A(C type, numpy code, field, length); type is
 *                                          the C struct the part declares from it
 *   NAMES(name, LIST)                      a list of names: LIST(X) holds
 *                                          X(NAME, index, "string")
 *   CODES(name, LIST)                      named codes: LIST(X) holds X(NAME, value)
 *   CONST(name, value)                     an integer or string constant
 *   JSON(kind, FIELDS)                     the keys of a FILE kind's JSON documents:
 *                                          FIELDS(X, O) lists X(type, key), a key every
 *                                          document has, and O(type, key), one a reader
 *                                          may not find (a key older versions lack, or
 *                                          one readers do not need); type is int (an
 *                                          int64), num, str, bool, strs (a list of
 *                                          strings), list or object. The readers' schema
 *                                          (perfweave._format JSON) comes from it, and
 *                                          a writer may take its field list from it.
 * Bump a file kind's version whenever a record or a meaning of its files changes, and
 * keep a reader of the old version (docs/format.md has the changelog).
 */
#ifndef PERFWEAVE_FORMAT_H
#define PERFWEAVE_FORMAT_H

#include <stdint.h>

/* X-macro tables, aligned by hand: their comments span lines. */
/* clang-format off */

/* Declarations made from the lists below (and from the modules' ones). */
#define PW_FIELD_DECL(ctype, np, name) ctype name;
#define PW_ARRAY_DECL(ctype, np, name, n) ctype name[n];
#define PW_RECORD_STRUCT(FIELDS, type)                                                     \
    typedef struct type { FIELDS(PW_FIELD_DECL, PW_ARRAY_DECL) } type;

/* ---- names shared by the runtime's modules, the files and the analyses ---- */

/* Families of measured calls: the MPI module's function families, in which another module
 * puts each of its calls too. A thread's activity is 0 in computation, 1 + family in a
 * measured call, then sleep and wait (PW_ACTIVITIES). The profile's and traces'
 * "families" name each function's. */
#define PW_FAMILIES(X)                                                                      \
    X(P2P, 0, "p2p")     /* point-to-point */                                              \
    X(COLL, 1, "coll")   /* collectives */                                                 \
    X(RMA, 2, "rma")     /* one-sided communication and windows */                         \
    X(SYNC, 3, "sync")   /* completion (wait, test) and window synchronisation */          \
    X(FILE, 4, "file")   /* MPI-IO, MPI_File_* (older files: "io") */                       \
    X(OTHER, 5, "other") /* start-up, communicators, the rest */
#define PW_FAMILY_ENUM(name, value, str) PW_FAMILY_##name = value,
enum pw_family { PW_FAMILIES(PW_FAMILY_ENUM) PW_NFAMILIES };
#undef PW_FAMILY_ENUM

/* The families whose calls the profile's message-size histograms count (hist), as bits
 * 1 << family. */
#define PW_HIST_FAMILY_MASK                                                                \
    ((1 << PW_FAMILY_P2P) | (1 << PW_FAMILY_COLL) | (1 << PW_FAMILY_RMA))

/* Activities: what a thread is doing, by index (a sample's "activity", docs/format.md
 * "Samples"): X(NAME, index, "string") and, for each family, C(NAME, index, "family"),
 * whose activity is "mpi_" family at index 1 + family. Written as the samples'
 * "activities"; the node timeline's series PID.mpi_FAMILY_ns hold each family's time. */
#define PW_ACTIVITIES(X, C)                                                                \
    X(COMPUTE, 0, "compute") /* outside any measured or blocking call */                   \
    PW_FAMILIES(C)                                                                          \
    X(SLEEP, 1 + PW_NFAMILIES, "sleep") /* in sleep, nanosleep, ... */                      \
    X(WAIT, 2 + PW_NFAMILIES, "wait")   /* blocked in poll, select, epoll, pause, ... */

/* How a rank's data ended (the profile's ranks.state, the other files' "state"). */
#define PW_STATES(X)                                                                       \
    X(COMPLETE, 0, "complete")       /* MPI_Finalize (or normal exit without MPI) */       \
    X(NO_FINALIZE, 1, "no-finalize") /* exit after MPI_Init without MPI_Finalize */        \
    X(ABORT, 2, "abort")             /* MPI_Abort called on this rank */                   \
    X(SIGNAL, 3, "signal")           /* killed by a fatal signal we caught */         \
    X(KILLED, 4, "killed")           /* ended without saving (SIGKILL, _exit): its      \
                                        call-site tables as they were (tables/) */ \
    X(RUNNING, 5, "running")         /* a live snapshot: running on (snapshots/N/) */

#define PW_STATE_ENUM(name, value, str) PW_STATE_##name = value,
enum pw_state { PW_STATES(PW_STATE_ENUM) };
#undef PW_STATE_ENUM

/* ---- profiles: profile.pwprof, partial/rank-R.pwprof, procs/HOST.PID.pwprof ----
 * (docs/format.md "Profile files") */

/* 6: the "comms" array (the communication matrix)
 * 5: ranks' region_intervals, region_ns, region_mpi_ns (the MPI_Pcontrol region)
 * 4: the MPI family "io" (MPI-IO) renamed "file" in "families"
 * 3: the header's "modules" (each measured module: its function ids, strings) and
 *    "objects" (the loaded objects, "modules" before); sites' and frames' "object";
 *    the MPI library strings moved into the mpi module's entry
 * 2: counts' inside_ns, before_ns */
#define PW_PROFILE_VERSION 6
#define PW_PROFILE_MAGIC "perfweave-profile"

/* Header key of the names of the events that count records refer to. */
#define PW_PROFILE_EVENTS_KEY "counters"

/* One row per rank (or per process for programs without MPI). Times are
 * nanoseconds of the rank's CLOCK_MONOTONIC; offset_* convert them to rank 0's
 * clock: t_rank0 = t_local - offset. */
#define PW_RANK_FIELDS(X, A)                                                               \
    X(int32_t, "<i4", rank)            /* MPI_COMM_WORLD rank, -1 without MPI */           \
    X(int32_t, "<i4", host)            /* index into header "hosts" */                     \
    X(int32_t, "<i4", pid)                                                                 \
    X(int32_t, "<i4", state)           /* PW_STATE_* of this rank's data */                \
    X(int32_t, "<i4", nthreads)        /* threads that made a wrapped call */              \
    X(int32_t, "<i4", thread_level)    /* provided MPI thread level, -1 unknown */         \
    X(int64_t, "<i8", t_start)         /* runtime constructor (process start) */           \
    X(int64_t, "<i8", t_init_enter)    /* MPI_Init entered */                              \
    X(int64_t, "<i8", t_init_leave)    /* MPI_Init and perfweave's setup done: app starts */\
    X(int64_t, "<i8", t_fini_enter)    /* MPI_Finalize entered (or dump time) */           \
    X(int64_t, "<i8", t_end)           /* data written */                                  \
    X(int64_t, "<i8", app_ns)          /* t_fini_enter - t_init_leave */                   \
    X(int64_t, "<i8", mpi_ns)          /* time in wrapped calls, Init/Finalize excluded */ \
    X(int64_t, "<i8", mpi_calls)                                                           \
    X(int64_t, "<i8", offset_init_ns)  /* clock offset to rank 0 after MPI_Init */         \
    X(int64_t, "<i8", offset_init_err_ns) /* half round trip of the best exchange */       \
    X(int64_t, "<i8", offset_fini_ns)  /* clock offset to rank 0 at MPI_Finalize */        \
    X(int64_t, "<i8", offset_fini_err_ns)                                                  \
    X(int64_t, "<i8", sites_dropped)   /* calls folded into the overflow site */           \
    X(int64_t, "<i8", table_bytes)     /* address space of the call-site tables */        \
    X(int64_t, "<i8", table_capacity)  /* call-site slots per thread (the bound) */       \
    X(int64_t, "<i8", table_resident)  /* of which resident in memory (mincore) */     \
    X(int64_t, "<i8", region_intervals) /* MPI_Pcontrol(L != 0) .. (0) opened: 0 none */  \
    X(int64_t, "<i8", region_ns)       /* their union's length within app time */       \
    X(int64_t, "<i8", region_mpi_ns)   /* of mpi_ns, the part inside them */

/* One row per (rank, thread, call site, measured function): readers sum a rank's
 * threads. fn is the function's id (header "functions"; its module: header "modules").
 * A call site is the caller's return address stored as (object, offset) so that ranks
 * agree under ASLR;
 * deeper stacks (--callsite-depth > 1) live in the frames array. */
#define PW_SITE_FIELDS(X, A)                                                               \
    X(int32_t, "<i4", rank)                                                                \
    X(int32_t, "<i4", fn)              /* index into header "functions" */                 \
    X(int32_t, "<i4", object)          /* index into header "objects", -1 unknown */       \
    X(int32_t, "<i4", nframes)         /* frames of this site in the frames array */       \
    X(int64_t, "<i8", offset)          /* return address - module load base */             \
    X(int64_t, "<i8", first_frame)     /* index of the first frame, -1 if nframes == 0 */  \
    X(int64_t, "<i8", count)                                                               \
    X(int64_t, "<i8", total_ns)                                                            \
    X(int64_t, "<i8", min_ns)                                                              \
    X(int64_t, "<i8", max_ns)                                                              \
    X(int64_t, "<i8", bytes_sent)      /* I/O: bytes written */                            \
    X(int64_t, "<i8", bytes_recv)      /* I/O: bytes read */

/* Caller frames of deep call sites, outermost last. */
#define PW_FRAME_FIELDS(X, A)                                                              \
    X(int32_t, "<i4", object)                                                              \
    X(int32_t, "<i4", pad)                                                                 \
    X(int64_t, "<i8", offset)

/* Message-size histogram: one row per (rank, function, size bucket) with calls.
 * Bucket b holds sizes s with floor(log2(s)) == b - 1, bucket 0 holds s == 0;
 * the last bucket also holds every larger size. */
#define PW_HIST_FIELDS(X, A)                                                               \
    X(int32_t, "<i4", rank)                                                                \
    X(int32_t, "<i4", fn)                                                                  \
    X(int32_t, "<i4", bucket)                                                              \
    X(int32_t, "<i4", pad)                                                                 \
    X(int64_t, "<i8", count)                                                               \
    X(int64_t, "<i8", bytes)                                                               \
    X(int64_t, "<i8", total_ns)

#define PW_HIST_BUCKETS 34

/* counts: PAPI events (--counters) per call site, one record per (site, event) with
 * counts; the header's "counters" names the events. */
#define PW_COUNT_FIELDS(X, A)                                                              \
    X(int64_t, "<i8", site)   /* index of the site in the "sites" array */                 \
    X(int32_t, "<i4", event)  /* index into the header's "counters" */                     \
    X(int32_t, "<i4", pad)    /* 0 */                                                      \
    X(int64_t, "<i8", inside) /* counted during the site's calls */                        \
    X(int64_t, "<i8", before) /* counted in the calling thread between its previous MPI   \
                                 call (or the start of counting) and the site's calls */  \
    X(int64_t, "<i8", inside_ns) /* wall time "inside" covers (the calls read) */         \
    X(int64_t, "<i8", before_ns) /* wall time "before" covers */

/* The core's arrays of a profile file, in file order: X(array, record, FIELDS, type), the
 * array's name in the file, its record's name in the format (RECORD entries below), its
 * fields and C type. A module's arrays follow them, in modules.def's order: declared in
 * its format header as PW_PROFILE_ARRAYS_<module>(X) (format/mpi.h: the matrix's
 * "comms"), found there by the build (runtime/core/pw.h PW_PROFILE_ARRAYS). */
#define PW_PROFILE_ARRAYS_core(X)                                                          \
    X(ranks, rank, PW_RANK_FIELDS, pw_rank_rec)                                            \
    X(sites, site, PW_SITE_FIELDS, pw_site_rec)                                            \
    X(frames, frame, PW_FRAME_FIELDS, pw_frame_rec)                                        \
    X(hist, hist, PW_HIST_FIELDS, pw_hist_rec)                                             \
    X(counts, count, PW_COUNT_FIELDS, pw_count_rec)

/* ---- call-site tables: tables/NAME.pwtab + tables/NAME.json (NAME: HOST.PID) ----
 * (docs/format.md "Call-site tables")
 *
 * A measured process's call-site tables (runtime/core/sites.c) live in the pages of its
 * tables/NAME.pwtab, mapped MAP_SHARED from its first recorded call, so that a process
 * that ends without saving (SIGKILL, _exit) leaves its counts up to that moment; a
 * process that saves its profile removes both files. Layout, every part at a multiple of
 * PW_TABLES_PAGE bytes: one tables_head, then its rank (a rank record, right after it),
 * in the first page; then blocks, one after the other up to tables_head.bytes: each a
 * page holding one table_block, then table_block.bytes of data:
 *   kind SITES: nslots slots of tables_head.entry_size bytes, a table_site each (used 0:
 *     free), then callsite_depth - 1 caller frames (uint64), then at events_offset
 *     2 * nevents + 2 int64 (the counters' inside, before, inside_ns, before_ns)
 *   kind HIST: [count][PW_HIST_BUCKETS][count, bytes, ticks] int64 of the functions
 *     first .. first + count - 1
 * A block whose kind is 0 was never completed. Pages of a SITES block that were never
 * given disk space read as zeros (free slots). Durations in ticks: ns_per_tick. The JSON
 * (written whole, renamed into place) says the rest: the process, its functions and
 * loaded objects (with their address ranges). */
/* 2: the rank record of profile version 5 */
#define PW_TABLES_VERSION 2
#define PW_TABLES_MAGIC "perfweave-tables"
#define PW_TABLES_MAGIC_NUMBER 0x3162617477700a00LL /* tables_head.magic */
#define PW_TABLES_PAGE 4096

#define PW_TABLES_HEAD_FIELDS(X, A)                                                        \
    X(int64_t, "<i8", magic)          /* PW_TABLES_MAGIC_NUMBER */                         \
    X(int32_t, "<i4", version)                                                             \
    X(int32_t, "<i4", pid)                                                                 \
    X(int32_t, "<i4", state)          /* -1 while the process runs: killed if it stays */  \
    X(int32_t, "<i4", private_pages)  /* slot pages that found no disk space (kept in    \
                                         memory only: their sites are not in the file) */  \
    X(int64_t, "<i8", bytes)          /* of the file, head and complete blocks */          \
    X(int64_t, "<i8", tick_start)     /* ticks at t_start */                               \
    X(int64_t, "<i8", t_start)        /* CLOCK_MONOTONIC ns of the process's start */      \
    X(double, "<f8", ns_per_tick)     /* measured at the JSON's last writing */            \
    X(int64_t, "<i8", nslots)         /* slots of a SITES block */                         \
    X(int32_t, "<i4", entry_size)     /* bytes of a slot */                                \
    X(int32_t, "<i4", events_offset)  /* of a slot's counter values */                     \
    X(int32_t, "<i4", nevents)        /* counters per slot (the JSON's "counters") */      \
    X(int32_t, "<i4", callsite_depth) /* frames of a site: return address + depth - 1 */

#define PW_TABLE_BLOCK_FIELDS(X, A)                                                        \
    X(int32_t, "<i4", kind)           /* PW_TABLE_*, written last; 0: incomplete */        \
    X(int32_t, "<i4", thread)         /* the table's number in the process */              \
    X(int32_t, "<i4", first)          /* HIST: function id of its first row */             \
    X(int32_t, "<i4", count)          /* HIST: functions */                                \
    X(int64_t, "<i8", bytes)          /* data after this block's page */                   \
    X(int64_t, "<i8", dropped)        /* SITES: calls folded into overflow sites */        \
    X(int64_t, "<i8", last_tick)      /* SITES: the end of the thread's latest recorded  \
                                         MPI call (0: none) */

#define PW_TABLE_KINDS(X)                                                                  \
    X(SITES, 1) /* a thread's call-site table */                                           \
    X(HIST, 2)  /* a thread's size histograms of one module's functions */
#define PW_TABLE_ENUM(name, value) PW_TABLE_##name = value,
enum pw_table_kind { PW_TABLE_KINDS(PW_TABLE_ENUM) };
#undef PW_TABLE_ENUM

/* A slot's fixed part (runtime/core/pw.h pw_site): ra 0 is a function's overflow site. */
#define PW_TABLE_SITE_FIELDS(X, A)                                                         \
    X(uint64_t, "<u8", ra)            /* return address into the caller */                 \
    X(uint64_t, "<u8", stack_hash)    /* of the deeper frames; 0 at depth 1 */             \
    X(int32_t, "<i4", fn)             /* function id (the JSON's "functions") */           \
    X(int16_t, "<i2", nframes)        /* caller frames after this part */                  \
    X(int16_t, "<i2", used)           /* the slot holds a site */                          \
    X(int64_t, "<i8", count)                                                               \
    X(int64_t, "<i8", total)          /* ticks */                                          \
    X(int64_t, "<i8", min)                                                                 \
    X(int64_t, "<i8", max)                                                                 \
    X(int64_t, "<i8", bytes_sent)                                                          \
    X(int64_t, "<i8", bytes_recv)

PW_RECORD_STRUCT(PW_TABLES_HEAD_FIELDS, pw_tables_head_rec)
PW_RECORD_STRUCT(PW_TABLE_BLOCK_FIELDS, pw_table_block_rec)
PW_RECORD_STRUCT(PW_TABLE_SITE_FIELDS, pw_table_site_rec)

/* ---- traces (perfweave run --trace): traces/rank-R.events + traces/rank-R.json ----
 *
 * One event record per event (40 bytes, as readers return them; version 5 stores them
 * as 16-byte compact records, below). rank-R.events is a sequence of blocks, each one
 * thread's: a BLOCK record (its count of committed records, updated at every commit)
 * followed by its record slots; the writing thread maps its block of the file, so the
 * committed records survive however the process ends. (Version 1: the records back to
 * back, no BLOCK records; still read, and written by perfweave import.)
 * A wrapped MPI call is one CALL record (enter and leave times; MPI calls do not
 * nest) followed by the records of what the call did, in order: messages sent or
 * received, requests posted or completed, the collective it is, the window it
 * creates, accesses or synchronises. User functions (programs built with
 * -finstrument-functions) are ENTER/LEAVE records. rank-R.json (written at the
 * end) holds the definitions: functions, communicators, windows, groups, clock
 * calibration, loaded objects. */
/* 5: 16-byte compact records (PW_CEVENT_FIELDS): an event is a head record laid out by
 *    its type (PW_EVENT_LAYOUTS) and extension records for what does not fit; times are
 *    deltas from a time base, call sites ids defined once per thread, request keys
 *    dropped where the post number names the post; PCONTROL records (MPI_Pcontrol's level and time)
 * 4: BLOCK's peer is the thread's OS id (the I/O segments' tid)
 * 3: the MPI family "io" (MPI-IO) renamed "file" in "families"
 * 2: per-thread BLOCKs mapped from the file (killed ranks keep what they committed),
 *    COLL_DONE and the request keys of nonblocking COLL */
#define PW_TRACE_VERSION 5
#define PW_TRACE_MAGIC "perfweave-trace"

#define PW_EVENT_FIELDS(X, A)                                                              \
    X(int64_t, "<i8", t0)     /* CALL, FLUSH, ENTER, LEAVE: time (ticks); request events:  \
                                 request key */                                            \
    X(int64_t, "<i8", t1)     /* CALL, FLUSH: end (ticks); COLL, RMA: bytes received;      \
                                 WSYNC: group id; request posts and completions: the post  \
                                 number (1, 2, ... per rank; 0 unknown) */                 \
    X(uint8_t, "u1", type)    /* PW_EV_* */                                                \
    X(uint8_t, "u1", flags)   /* PW_EVF_* */                                               \
    X(uint16_t, "<u2", fn)    /* CALL: function id */                                      \
    X(int32_t, "<i4", peer)   /* world rank of dest / (actual) source / root / target;     \
                                 -1 none */                                                \
    X(int32_t, "<i4", tag)    /* message tag; WIN, RMA, WSYNC: window id; ENTER, LEAVE:    \
                                 stack depth */                                            \
    X(int32_t, "<i4", comm)   /* communicator id of rank-R.json, -1 none; ENTER, LEAVE:    \
                                 region id of rank-R.json "regions" or -1 */               \
    X(int64_t, "<i8", bytes)  /* CALL: caller's return address; ENTER, LEAVE: function    \
                                 address (0 with a region id); others: bytes */

#define PW_EVENT_TYPES(X)                                                                  \
    X(CALL, 1)       /* an MPI call: t0 enter, t1 leave, fn, bytes = return address */     \
    X(SEND, 2)       /* message sent (blocking) or send posted (PW_EVF_NONBLOCKING, t0 =   \
                        request key): peer = destination, tag, comm, bytes */             \
    X(RECV, 3)       /* message received in this call: peer/tag = actual source/tag,      \
                        bytes = actual size; t0 = request key when a Wait/Test completes   \
                        an Irecv (0 for a blocking receive) */                            \
    X(IRECV, 4)      /* receive posted: t0 = request key, peer = requested source (-2 any) \
                        tag = requested tag (-1 any), bytes = buffer size */              \
    X(SEND_DONE, 5)  /* nonblocking send completed in this call: t0 = request key */       \
    X(COLL, 6)       /* this call is a collective on comm: peer = root (world), -1 none;   \
                        bytes = sent, t1 = received; MPI_I...: PW_EVF_NONBLOCKING, t0 =    \
                        request key, tag = post number (0 unknown) */                     \
    X(FLUSH, 7)      /* the runtime switched blocks (v1: wrote a buffer): t0..t1 ticks,  \
                        bytes = bytes of the finished block */                            \
    X(LOST, 8)       /* events that could not be stored: bytes = how many */              \
    X(ENTER, 9)      /* user function entered at t0: bytes = its address, tag = depth */  \
    X(LEAVE, 10)     /* user function left at t0 (same fields as its ENTER) */             \
    X(WIN, 11)       /* window created (flags 0) or freed (PW_EVF_FREE) in this call:     \
                        tag = window id, comm = its communicator */                       \
    X(RMA, 12)       /* one-sided operation: peer = target (world), tag = window id,      \
                        comm = the window's communicator, bytes = sent, t1 = received;     \
                        t0 = request key of an R* operation */                            \
    X(WSYNC, 13)     /* window synchronisation (fence, post, start, complete, wait, test, \
                        lock, unlock, flush, sync): tag = window id, comm = the window's   \
                        communicator, peer = target (world) or -1, t1 = group id of        \
                        post/start or -1 */                                               \
    X(COLL_DONE, 14) /* nonblocking collective completed in this call: t0 = request key,   \
                        t1 = its COLL's post number (tag), comm */                        \
    X(BLOCK, 15)     /* a block of one thread's records (version 2): t0 = records committed \
                        in it, t1 = its record slots (after this record), tag = thread,    \
                        peer = the thread's OS id (version 4; -1 before), bytes = the      \
                        block's number among the thread's blocks */                      \
    X(PCONTROL, 16)  /* MPI_Pcontrol(level) called at t0 (ticks): tag = level (version 5) */

/* Version 5 stores each event (an event record above, as readers return it) as 16-byte
 * records: a head (kind = the event's type, below 128) whose slots s, a, b, c hold the
 * fields its type's layout names, then one extension record (kind PW_CK_EXT + field, w =
 * the field's value) for each field its layout has no slot for and that differs from
 * its default (peer and comm -1, the others 0), or whose value does not fit its slot.
 * A slot holds its field as FIELD_ENC: I16/U16/I32/U32 the value; TIME t0 - the time
 * base in ticks (the last BASE record of the block; a BASE comes first when the delta
 * would be negative or above 32 bits); DUR t1 - t0 in ticks; ADDR an address's id (its
 * SITE record, earlier in the thread). Where a layout names a post number field (KEY_T1,
 * KEY_TAG), the request key t0 is not stored when that number is not 0: readers return
 * the number as t0 (an extension record holds a key whose number is 0). A head and its
 * extension records are committed together. */
#define PW_CEVENT_FIELDS(X, A)                                                             \
    X(uint8_t, "u1", kind)    /* an event type (a head), or PW_CK_* */                     \
    X(uint8_t, "u1", flags)   /* head: the event's flags */                                \
    X(uint16_t, "<u2", s)     /* head: slot s */                                           \
    X(uint32_t, "<u4", a)     /* head: slot a; BLOCK: committed records; THREAD: OS id;    \
                                 SITE: the id */                                           \
    X(uint32_t, "<u4", b)     /* head: slot b; BLOCK: record slots after it */             \
    X(uint32_t, "<u4", c)     /* head: slot c; BLOCK: thread */
/* The same 16 bytes with a 64-bit value (EXT, BASE, SITE, THREAD) */
#define PW_CWIDE_FIELDS(X, A)                                                              \
    X(uint8_t, "u1", kind)                                                                 \
    X(uint8_t, "u1", flags)                                                                \
    X(uint16_t, "<u2", s)                                                                  \
    X(uint32_t, "<u4", a)                                                                  \
    X(int64_t, "<i8", w)

/* Kinds of compact records that are no event head. EXT + k: the value of the event
 * record's field k of t0, t1, fn, peer, tag, comm, bytes (PW_EVENT_EXT_FIELDS). */
#define PW_TRACE_KINDS(X)                                                                  \
    X(EXT, 0x80)     /* + field: w = the field's value, for the head before it */          \
    X(BASE, 0xf0)    /* w = the time base (ticks) of the records after it in the block */  \
    X(SITE, 0xf1)    /* a = id, w = the address it stands for (this thread's ids) */       \
    X(THREAD, 0xf2)  /* a block's first record: a = the thread's OS id, w = the block's   \
                        number among the thread's blocks */
#define PW_CK_ENUM(name, value) PW_CK_##name = value,
enum pw_trace_kind { PW_TRACE_KINDS(PW_CK_ENUM) };
#undef PW_CK_ENUM
/* A head's flag (not an event flag): the head of a post (a nonblocking event of a
 * KEY_T1 layout) whose number is the thread's previous post's + 1, which no record holds */
#define PW_CFLAG_NEXT_POST 0x80
#define PW_EVENT_EXT_FIELDS(X) X(T0, 0) X(T1, 1) X(FN, 2) X(PEER, 3) X(TAG, 4) X(COMM, 5) X(BYTES, 6)

/* What a head slot holds: FIELD_ENC (see above); KEY_*: where the post number is */
#define PW_EVENT_SLOTS(X)                                                                  \
    X(NONE, 0)                                                                             \
    X(FN_U16, 1)                                                                           \
    X(COMM_I16, 2)                                                                         \
    X(PEER_I32, 3)                                                                         \
    X(TAG_I32, 4)                                                                          \
    X(T0_TIME, 5)                                                                          \
    X(T1_DUR, 6)                                                                           \
    X(BYTES_U32, 7)                                                                        \
    X(BYTES_ADDR, 8)                                                                       \
    X(T1_U32, 9)                                                                           \
    X(T1_I32, 10)                                                                          \
    X(KEY_T1, 11)                                                                          \
    X(KEY_TAG, 12)
#define PW_SLOT_ENUM(name, value) PW_SLOT_##name = value,
enum pw_event_slot { PW_EVENT_SLOTS(PW_SLOT_ENUM) };
#undef PW_SLOT_ENUM
/* A layout: the slot codes of s, a, b, c and the key's post number, 4 bits each */
#define PW_LAYOUT(s, a, b, c, key)                                                         \
    (PW_SLOT_##s | PW_SLOT_##a << 4 | PW_SLOT_##b << 8 | PW_SLOT_##c << 12 |             \
     PW_SLOT_##key << 16)
/* The layout of each event type's head; a type not listed (a new one) has DEFAULT's */
#define PW_EVENT_LAYOUTS(X)                                                                \
    X(DEFAULT, PW_LAYOUT(COMM_I16, PEER_I32, TAG_I32, BYTES_U32, NONE))                    \
    X(CALL, PW_LAYOUT(FN_U16, T0_TIME, T1_DUR, BYTES_ADDR, NONE))                          \
    X(SEND, PW_LAYOUT(COMM_I16, PEER_I32, TAG_I32, BYTES_U32, KEY_T1))                     \
    X(RECV, PW_LAYOUT(COMM_I16, PEER_I32, TAG_I32, BYTES_U32, KEY_T1))                     \
    X(IRECV, PW_LAYOUT(COMM_I16, PEER_I32, TAG_I32, BYTES_U32, KEY_T1))                    \
    X(SEND_DONE, PW_LAYOUT(COMM_I16, PEER_I32, TAG_I32, T1_U32, KEY_T1))                   \
    X(COLL, PW_LAYOUT(COMM_I16, PEER_I32, BYTES_U32, T1_U32, KEY_TAG))                     \
    X(FLUSH, PW_LAYOUT(NONE, T0_TIME, T1_DUR, BYTES_U32, NONE))                            \
    X(ENTER, PW_LAYOUT(COMM_I16, T0_TIME, TAG_I32, BYTES_ADDR, NONE))                      \
    X(LEAVE, PW_LAYOUT(COMM_I16, T0_TIME, TAG_I32, BYTES_ADDR, NONE))                      \
    X(WSYNC, PW_LAYOUT(COMM_I16, PEER_I32, TAG_I32, T1_I32, NONE))                         \
    X(COLL_DONE, PW_LAYOUT(COMM_I16, PEER_I32, TAG_I32, T1_U32, KEY_T1))                   \
    X(PCONTROL, PW_LAYOUT(NONE, T0_TIME, TAG_I32, NONE, NONE))

#define PW_EV_ENUM(name, value) PW_EV_##name = value,
enum pw_event_type { PW_EVENT_TYPES(PW_EV_ENUM) };
#undef PW_EV_ENUM

#define PW_EVENT_FLAGS(X)                                                                  \
    X(NONBLOCKING, 1) /* SEND/IRECV/COLL/RMA posted by a nonblocking call */               \
    X(SYNCHRONOUS, 2) /* SEND of MPI_Ssend / MPI_Issend */                                 \
    X(PERSISTENT, 4)  /* SEND/IRECV of MPI_Start(all) */                                   \
    X(FREE, 8)        /* WIN: the window is freed */                                       \
    X(EXCLUSIVE, 16)  /* WSYNC of MPI_Win_lock: exclusive lock */                          \
    X(DONE, 32)       /* WSYNC of MPI_Win_test: the exposure epoch completed */           \
    X(AT_START, 64)   /* ENTER of a region open when the trace began, written at its start */
#define PW_EVF_ENUM(name, value) PW_EVF_##name = value,
enum pw_event_flag { PW_EVENT_FLAGS(PW_EVF_ENUM) };
#undef PW_EVF_ENUM

PW_RECORD_STRUCT(PW_EVENT_FIELDS, pw_event_rec)
PW_RECORD_STRUCT(PW_CEVENT_FIELDS, pw_cevent_rec)
PW_RECORD_STRUCT(PW_CWIDE_FIELDS, pw_cwide_rec)

#define PW_STRUCT(arr, rec, FIELDS, type) PW_RECORD_STRUCT(FIELDS, type)
PW_PROFILE_ARRAYS_core(PW_STRUCT)
#undef PW_STRUCT

/* The head of every module's per-process JSON file (pw_buf_json_head): X(type, key), to
 * begin a JSON entry's FIELDS. */
#define PW_JSON_HEAD(X) X(str, format) X(int, version) X(int, rank) X(int, pid) X(str, host)

/* ---- the core's part (the modules' parts: include/perfweave/format/) ---- */
#define PW_FORMAT_core(FILE, RECORD, NAMES, CODES, CONST, JSON)                                  \
    FILE(profile, ".", PW_PROFILE_MAGIC, PW_PROFILE_VERSION)                               \
    FILE(trace, "traces", PW_TRACE_MAGIC, PW_TRACE_VERSION)                                \
    FILE(tables, "tables", PW_TABLES_MAGIC, PW_TABLES_VERSION)                             \
    RECORD(rank, PW_RANK_FIELDS, pw_rank_rec)                                              \
    RECORD(site, PW_SITE_FIELDS, pw_site_rec)                                              \
    RECORD(frame, PW_FRAME_FIELDS, pw_frame_rec)                                           \
    RECORD(hist, PW_HIST_FIELDS, pw_hist_rec)                                              \
    RECORD(count, PW_COUNT_FIELDS, pw_count_rec)                                           \
    RECORD(event, PW_EVENT_FIELDS, pw_event_rec)                                           \
    RECORD(cevent, PW_CEVENT_FIELDS, pw_cevent_rec)                                        \
    RECORD(cwide, PW_CWIDE_FIELDS, pw_cwide_rec)                                           \
    RECORD(tables_head, PW_TABLES_HEAD_FIELDS, pw_tables_head_rec)                         \
    RECORD(table_block, PW_TABLE_BLOCK_FIELDS, pw_table_block_rec)                         \
    RECORD(table_site, PW_TABLE_SITE_FIELDS, pw_table_site_rec)                            \
    NAMES(families, PW_FAMILIES)                                                             \
    NAMES(states, PW_STATES)                                                               \
    CODES(event_types, PW_EVENT_TYPES)                                                     \
    CODES(event_flags, PW_EVENT_FLAGS)                                                     \
    CODES(trace_kinds, PW_TRACE_KINDS)                                                     \
    CODES(event_ext_fields, PW_EVENT_EXT_FIELDS)                                           \
    CODES(event_slots, PW_EVENT_SLOTS)                                                     \
    CODES(event_layouts, PW_EVENT_LAYOUTS)                                                 \
    CODES(table_kinds, PW_TABLE_KINDS)                                                     \
    CONST(tables_magic_number, PW_TABLES_MAGIC_NUMBER)                                     \
    CONST(trace_next_post, PW_CFLAG_NEXT_POST)                                             \
    CONST(tables_page, PW_TABLES_PAGE)                                                     \
    CONST(hist_buckets, PW_HIST_BUCKETS)                                                   \
    CONST(hist_family_mask, PW_HIST_FAMILY_MASK)                                           \
    CONST(profile_events_key, PW_PROFILE_EVENTS_KEY)                                       \
    JSON(trace, PW_TRACE_JSON_FIELDS)

/* traces/rank-R.json (runtime/modules/mpi_trace.c; perfweave import writes the same,
 * with "regions" and "flushes"): X(type, key), O(type, key) (JSON above) */
#define PW_TRACE_JSON_FIELDS(X, O)                                                         \
    X(str, format)                                                                         \
    X(int, version)                                                                        \
    O(int, rank)                                                                           \
    O(int, world_size)                                                                     \
    O(str, host)                                                                           \
    O(int, pid)                                                                            \
    O(str, state)                        /* running (MPI_Init's), finished, signal, ... */ \
    O(strs, functions)                   /* by the records' fn */                          \
    O(strs, families)                    /* each function's */                             \
    O(object, clock)                     /* ticks to ns, offsets to rank 0 */              \
    O(list, comms)                                                                         \
    O(list, windows)                                                                       \
    O(list, groups)                                                                        \
    O(list, regions)                     /* user regions: the program's or an imported's */ \
    O(list, objects)                     /* the loaded objects with their ranges */        \
    O(list, flushes)                     /* an imported trace's buffer flushes */          \
    O(int, records)                                                                        \
    O(int, lost)                                                                           \
    O(str, filter)                       /* --filter's rules (normalised), "" none */
/* clang-format on */

#endif
