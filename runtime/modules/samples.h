/*
 * The samples module (samples.c, --sample): wall-clock samples of the call stacks of
 * the program's threads, with what each thread was doing, into samples/ (docs/format.md).
 *
 * What it uses of the core (pw.h) and of other modules (their hooks):
 *   pw_thread_activity            a sample's activity (kept by the MPI wrappers; its own
 *                                 blocking-call wrappers set sleep and wait)
 *   pw_call_anchor, pw_call_here  where a measured call's wrapper is, for the frame-pointer
 *                                 walk; it sets pw_want_anchor so that wrappers keep them
 *   pw_counters_read_events       the thread's event counts at each sample, if counted (the
 *                                 counters module's hook, counters.h)
 *   pw_thread_begin               it sees threads start (pthread_create) and calls it
 *   pw_rank                       names its file
 * Its wrappers of blocking calls (wrap.h) resume a call that its signal interrupted.
 */
#ifndef PW_MODULES_SAMPLER_H
#define PW_MODULES_SAMPLER_H

#include "pw.h"

extern const pw_module pw_module_samples;

#endif
