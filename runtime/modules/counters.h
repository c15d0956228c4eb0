/*
 * The counters module (counters.c, --counters): PAPI events per thread (and the kernel's
 * software events PAPI does not know, counted with perf_event_open), charged to the call
 * sites of measured calls ("inside" and "before" each call).
 *
 * What it gives the core: pw_nevents, pw_event_names, the events kept (set in its
 * start, before any table). What it gives other modules: the hooks below, offered in
 * its start when it counts events (pw.h "hooks"). It writes no file: the counts are the
 * profile's count records.
 */
#ifndef PW_MODULES_COUNTERS_H
#define PW_MODULES_COUNTERS_H

#include "pw.h"

extern const pw_module pw_module_counters;

/* ---- hooks it offers (PW_HOOK_FIND(NAME) gives a NAME_fn *, NULL without counters) ---- */
/* A measured call begins in this thread, before its clock starts: the counts now. */
typedef void pw_counters_call_enter_fn(void);
/* ... it ended and was recorded in site s of the thread's table t: the counts inside and
 * before it are charged to s. */
typedef void pw_counters_call_leave_fn(pw_sitetab *t, pw_site *s);
/* The program's measured part begins in this thread (the job's start-up call, e.g.
 * MPI_Init, returned): the "before" counts start from now. */
typedef void pw_counters_app_begin_fn(void);
/* From a signal handler (a sampler's): the thread's pw_event_names counts now,
 * cumulative, into out[0..max-1]; 0 when they cannot be read safely. */
typedef int pw_counters_read_events_fn(int64_t *out, int max);

#endif
