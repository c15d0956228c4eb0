/*
 * The counters module (counters.c, --counters): PAPI events per thread (and the kernel's
 * software events PAPI does not know, counted with perf_event_open), charged to the call
 * sites of measured calls ("inside" and "before" each call).
 *
 * What it gives the core and other modules, only through pw.h:
 *   pw_nevents, pw_event_names   the events kept (set in its start, before any table)
 *   pw_hooks.call_enter/leave    read the events around a measured call, charge its site
 *   pw_hooks.app_begin           the "before" counts start when the program's part does
 *   pw_hooks.read_events         a sampler's handler reads the thread's counts
 * It writes no file: the counts are the profile's count records.
 */
#ifndef PW_MODULES_COUNTERS_H
#define PW_MODULES_COUNTERS_H

#include "pw.h"

extern const pw_module pw_module_counters;

#endif
