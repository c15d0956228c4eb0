/*
 * The MPI module's part of the experiment format (runtime/modules/mpi.c; the vocabulary:
 * include/perfweave/format.h): the compact profile, profile.pwcompact.
 *
 * The full profile's (profile.pwprof, rank files) array of the module: "comms", the
 * communication matrix.
 *
 * The full profile (profile.pwprof) holds one record per (rank, call site): rank 0 needs
 * O(ranks) memory to write it. The compact profile holds, per call-tree node (a function
 * at a call site, with its caller frames) and metric, the statistics over the ranks that
 * called it (count of ranks, min, max, sum, mean, sum of squared deviations, argmin,
 * argmax) and a mergeable log-bucket sketch of its values per rank, and the per-rank
 * times of the top nodes only. Every part merges exactly (sums, min/max with the lowest
 * rank on ties, Chan's parallel formula for mean and deviations, sketch counts added), so
 * the ranks reduce it up a binomial tree (docs/format.md "Compact profile").
 *
 * Layout: one line of JSON (padded with spaces to a multiple of 64 bytes, newline
 * included), stored_bytes bytes (the arrays, data_bytes bytes back to back, through the
 * header's codec: "zlib" or "none"), then the end marker PWEND\n\n\n.
 */
#ifndef PERFWEAVE_FORMAT_MPI_H
#define PERFWEAVE_FORMAT_MPI_H

#include "perfweave/format.h"

/* 3: the communication matrix's summary (arrays pairs, rank_comm); 2: a sketch per (node,
 * metric), in cstat; 1 had the time's only, in cnode */
#define PW_COMPACT_VERSION 3
#define PW_COMPACT_MAGIC "perfweave-compact-profile"

/* The sketch's bucket of a value x >= 0 (an integer, ns): x itself below 2^SUB_BITS, else
 * (e - SUB_BITS + 1) << SUB_BITS | the SUB_BITS bits after x's leading one, e =
 * floor(log2 x). A bucket spans [lo, lo + 2^(e - SUB_BITS)) with lo >= 2^e, so its
 * midpoint is within 2^-(SUB_BITS + 1) (1/32 with 4) of every value in it, relatively. */
#define PW_COMPACT_SUB_BITS 4
/* Nodes whose per-rank times are kept (the top by total time): 8 x 12 288 ranks cost
 * about 390 KB compressed (docs/performance.md "Compact profiles at scale"). */
#define PW_COMPACT_TOP_NODES 8
/* The communication matrix's point-to-point pairs kept (the top by bytes): a pair is
 * recorded by its sender alone, so the top of the ranks' own tops merged up the tree is
 * exactly the top of the whole matrix. */
#define PW_COMPACT_TOP_PAIRS 64

/* clang-format off */
/* The statistics' metrics: node metrics first (per call site), then rank metrics (a row
 * with node -1: one value per rank). */
#define PW_COMPACT_METRICS(X)                                                              \
    X(CALLS, 0, "calls")                                                                   \
    X(TIME, 1, "time_ns")                                                                  \
    X(SENT, 2, "bytes_sent")                                                               \
    X(RECV, 3, "bytes_recv")                                                               \
    X(APP, 4, "app_ns")       /* rank: MPI_Init left .. MPI_Finalize entered */            \
    X(MPI, 5, "mpi_ns")       /* rank: time in MPI calls, Init and Finalize excluded */
#define PW_COMPACT_NODE_METRICS 4
#define PW_COMPACT_METRIC_ENUM(name, value, str) PW_COMPACT_##name = value,
enum pw_compact_metric { PW_COMPACT_METRICS(PW_COMPACT_METRIC_ENUM) };
#undef PW_COMPACT_METRIC_ENUM

/* One per call-tree node, sorted by (fn, object, offset, frames' (object, offset) outward,
 * fewer frames first): objects index the header's "objects" (sorted by path, build-id). */
#define PW_CNODE_FIELDS(X, A)                                                              \
    X(int32_t, "<i4", fn)          /* index into header "functions" */                     \
    X(int32_t, "<i4", object)      /* the call site's object, -1 unknown */                \
    X(int32_t, "<i4", nframes)     /* caller frames in the frames array */                 \
    X(int32_t, "<i4", pad)                                                                 \
    X(int64_t, "<i8", offset)      /* return address - object load base */                 \
    X(int64_t, "<i8", first_frame) /* index of its first frame, -1 without */

/* One per (node, node metric) and per rank metric (node -1), node-major. Over the n ranks
 * that called the node (every rank for rank metrics): min, max, sum exact; mean and m2
 * (sum of squared deviations from the mean: variance m2 / n) by Chan's formula up the
 * tree; argmin, argmax the lowest rank holding the min, the max; the sketch of the values
 * (node metrics only; a rank metric's sketch_len is 0). */
#define PW_CSTAT_FIELDS(X, A)                                                              \
    X(int32_t, "<i4", node)                                                                \
    X(int32_t, "<i4", metric)  /* PW_COMPACT_METRICS */                                    \
    X(int32_t, "<i4", n)                                                                   \
    X(int32_t, "<i4", argmin)                                                              \
    X(int32_t, "<i4", argmax)                                                              \
    X(int32_t, "<i4", sketch_len)  /* buckets of its sketch in sketch_counts */            \
    X(int32_t, "<i4", sketch_key0) /* bucket of its first count */                         \
    X(int32_t, "<i4", pad)                                                                 \
    X(int64_t, "<i8", sketch_first) /* index of its first count in sketch_counts */        \
    X(int64_t, "<i8", min)                                                                 \
    X(int64_t, "<i8", max)                                                                 \
    X(int64_t, "<i8", sum)                                                                 \
    X(double, "<f8", mean)                                                                 \
    X(double, "<f8", m2)
/* The communication matrix (runtime/modules/mpi.c; docs/mpi-profile.md "Communication
 * matrix"), an array of the profile files of its own (PW_PROFILE_ARRAYS_mpi below):
 * one row per (rank, communicator, peer, function, direction) with calls.
 * comm_hash identifies a communicator's group alike on every member (a hash of its members'
 * MPI_COMM_WORLD ranks in its rank order; communicators of one group share it; the remote
 * group's for an intercommunicator), comm_size its size, comm_first the world rank of its
 * rank 0. Point-to-point rows (dir SEND, RECV) name the peer by its MPI_COMM_WORLD rank;
 * a receive from MPI_ANY_SOURCE by its status' source, or peer -2 where the call gives
 * none (a nonblocking receive's source is known only at its completion); a receive's
 * bytes are its status' count where the call has a status, else its posted count.
 * Collective rows (dir COLL, peer -1) hold the bytes this rank sent and received by the
 * collective's size formula, the one of sites' bytes_sent and bytes_recv. Overflow row (past
 * PW_COMM_MAX_ROWS per thread): comm_hash 0, peer -2. */
#define PW_COMM_DIRS(X) X(SEND, 0, "send") X(RECV, 1, "recv") X(COLL, 2, "coll")
#define PW_COMM_DIR_ENUM(name, value, str) PW_COMM_##name = value,
enum pw_comm_dir { PW_COMM_DIRS(PW_COMM_DIR_ENUM) };
#undef PW_COMM_DIR_ENUM
#define PW_COMM_MAX_ROWS 16384
#define PW_COMM_FIELDS(X, A)                                                               \
    X(int32_t, "<i4", rank)                                                                \
    X(int32_t, "<i4", peer)            /* MPI_COMM_WORLD rank; -1 collective, -2 unknown */\
    X(int32_t, "<i4", fn)              /* index into header "functions" */                 \
    X(int32_t, "<i4", dir)             /* PW_COMM_DIRS */                                  \
    X(int32_t, "<i4", comm_size)                                                           \
    X(int32_t, "<i4", comm_first)                                                          \
    X(int64_t, "<i8", comm_hash)                                                           \
    X(int64_t, "<i8", messages)        /* calls (a Sendrecv: one each way) */              \
    X(int64_t, "<i8", bytes_sent)      /* SEND and COLL rows */                            \
    X(int64_t, "<i8", bytes_recv)      /* RECV and COLL rows */                            \
    X(int64_t, "<i8", total_ns)        /* the calls' time (a Sendrecv's: its SEND row) */

/* The compact profile's summary of the matrix: one per point-to-point pair (sender,
 * receiver, communicator group) among the top PW_COMPACT_TOP_PAIRS by bytes, ordered by
 * bytes, messages (both descending), sender, receiver, comm_hash: the sum of the sender's
 * SEND rows (comms, above) of that receiver and group. */
#define PW_CPAIR_FIELDS(X, A)                                                              \
    X(int32_t, "<i4", sender)      /* MPI_COMM_WORLD ranks */                              \
    X(int32_t, "<i4", receiver)                                                            \
    X(int32_t, "<i4", comm_size)                                                           \
    X(int32_t, "<i4", comm_first)                                                          \
    X(int64_t, "<i8", comm_hash)                                                           \
    X(int64_t, "<i8", messages)                                                            \
    X(int64_t, "<i8", bytes)
/* Per rank, exactly, of its point-to-point rows (comms, dir SEND and RECV, any peer):
 * array rank_comm, value m of rank r at m * world_size + r (stored as top_values). */
#define PW_COMPACT_RANK_COMM(X)                                                            \
    X(SENT_BYTES, 0, "sent_bytes")                                                         \
    X(SENT_MSGS, 1, "sent_messages")                                                       \
    X(RECV_BYTES, 2, "recv_bytes")                                                         \
    X(RECV_MSGS, 3, "recv_messages")
#define PW_COMPACT_RANK_COMM_N 4
#define PW_COMPACT_RANK_COMM_ENUM(name, value, str) PW_COMPACT_##name = value,
enum pw_compact_rank_comm { PW_COMPACT_RANK_COMM(PW_COMPACT_RANK_COMM_ENUM) };
#undef PW_COMPACT_RANK_COMM_ENUM

/* The profile's arrays of the module, after the core's (format.h PW_PROFILE_ARRAYS_core):
 * X(array, record, FIELDS, type). */
#define PW_PROFILE_ARRAYS_mpi(X) X(comms, comm, PW_COMM_FIELDS, pw_comm_rec)
/* clang-format on */

PW_RECORD_STRUCT(PW_COMM_FIELDS, pw_comm_rec)
PW_RECORD_STRUCT(PW_CNODE_FIELDS, pw_cnode_rec)
PW_RECORD_STRUCT(PW_CSTAT_FIELDS, pw_cstat_rec)
PW_RECORD_STRUCT(PW_CPAIR_FIELDS, pw_cpair_rec)

#define PW_FORMAT_mpi(FILE, RECORD, NAMES, CODES, CONST, JSON)                                     \
    FILE(compact, ".", PW_COMPACT_MAGIC, PW_COMPACT_VERSION)                                       \
    RECORD(comm, PW_COMM_FIELDS, pw_comm_rec)                                                      \
    RECORD(cnode, PW_CNODE_FIELDS, pw_cnode_rec)                                                   \
    RECORD(cstat, PW_CSTAT_FIELDS, pw_cstat_rec)                                                   \
    RECORD(cpair, PW_CPAIR_FIELDS, pw_cpair_rec)                                                   \
    NAMES(comm_dirs, PW_COMM_DIRS)                                                                 \
    NAMES(compact_metrics, PW_COMPACT_METRICS)                                                     \
    NAMES(compact_rank_comm, PW_COMPACT_RANK_COMM)                                                 \
    CONST(compact_node_metrics, PW_COMPACT_NODE_METRICS)                                           \
    CONST(compact_sub_bits, PW_COMPACT_SUB_BITS)                                                   \
    CONST(compact_top_nodes, PW_COMPACT_TOP_NODES)                                                 \
    CONST(compact_top_pairs, PW_COMPACT_TOP_PAIRS)

#endif
