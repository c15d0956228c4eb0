/*
 * The regions module (regions.c): the program's regions, phases and measurement on/off
 * (include/perfweave/perfweave.h, MPI_Pcontrol; docs/regions.md). It offers hooks to
 * the modules whose recording they concern (docs/architecture.md "Hooks between
 * modules"); each is offered in its start, whenever the process is measured.
 */
#ifndef PW_MODULES_REGIONS_H
#define PW_MODULES_REGIONS_H

#include "pw.h"

extern const pw_module pw_module_regions;

/* An MPI call of `ticks` was recorded in the calling thread (the MPI time inside its
 * open regions). */
typedef void pw_regions_mpi_call_fn(int64_t ticks);
/* MPI_Pcontrol(level) was called: 0 measurement off, 1 on, another level on and a phase
 * "pcontrol LEVEL" until the next MPI_Pcontrol. */
typedef void pw_regions_pcontrol_fn(int level);
/* The MPI module's switch of its recording (on 0 or 1), called by the regions module
 * when the program turns measurement off or on (perfweave_measure_off/on). */
typedef void pw_regions_switch_fn(int on);
/* The MPI module gives its switch when MPI_Init returns; returns whether measurement is
 * on now (it may have been turned off before MPI_Init). */
typedef int pw_regions_attach_mpi_fn(pw_regions_switch_fn *set);
/* From a signal handler: non-zero while measurement is off (samples not taken). */
typedef int pw_regions_off_fn(void);
/* Async-signal-safe: the region names so far as a JSON list under `key` (the trace's
 * rank-R.json "regions": [{"name": ...}], which its ENTER/LEAVE records' comm indexes). */
typedef void pw_regions_json_fn(struct pw_json *j, const char *key);

/* The calling thread is inside a region or phase that --filter's path rules leave out of
 * the trace (exclude-path:NAME). */
typedef int pw_regions_untraced_fn(void);

/* The trace has begun (MPI_Init, in the thread that called it): the ENTER of each phase
 * and region open in that thread now, at the trace's start, flagged PW_EVF_AT_START, so
 * that each LEAVE of the trace has its ENTER. */
typedef void pw_regions_trace_begun_fn(void);

#endif
