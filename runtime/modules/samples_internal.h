/*
 * What the samples module's files share, and nothing else uses (samples.h is the module's
 * declaration for the core):
 *
 *   samples.c           the sampler and its dump: per-thread timers, the signal's handler
 *                       on_sample, buffers and thinning, threads adopted or started
 *                       (pthread_create), the samples file, the module's start
 *   samples_unwind.c    a sample's stack: libunwind, else frame pointers, within the
 *                       thread's stack
 *   samples_handlers.c  the program's signal handlers, run through program_handler, which
 *                       counts them (sigaction, signal)
 *   samples_blocking.c  the blocking calls our signal interrupts, resumed so that the
 *                       program sees what it would see without perfweave
 *
 * Everything here runs in the signal handlers too: no locks, no allocation.
 */
#ifndef PW_MODULES_SAMPLES_INTERNAL_H
#define PW_MODULES_SAMPLES_INTERNAL_H

#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <ucontext.h>

#include "pw.h"

/* Only these files use these (pw.h pushes default visibility for the core's interface):
 * the compiler addresses them directly, as when they were one file's statics. */
#pragma GCC visibility push(hidden)

typedef struct sample sample; /* samples.c */

/* A sampled thread's slot */
typedef struct thr {
    timer_t timer;
    int ok, tid;
    int adopted; /* an existing thread's slot, set up by another: its handler takes it */
    pid_t pid;   /* the process it runs in (process_vm_readv), read once at its start */
    uintptr_t stack_lo, stack_hi; /* [lo, hi): its stack; from sp up to hi all mapped */
    int64_t interval_ns;
    uint64_t rng; /* xorshift state: jitter of each interval */
    int n, cap, thinned;
    int64_t taken;
    int64_t unwound, fallbacks; /* samples by libunwind; by frame pointers instead */
    int64_t cpu_ns;             /* its CPU time when its function returned; -1 before */
    sample *buf;
} thr;

extern PW_TLS thr *pw_samples_self; /* the calling thread's slot; NULL: not sampled */
extern int pw_samples_sig;          /* our signal */
extern int pw_samples_started;      /* the sampler runs: the wrappers act */

/* A context's program counter, frame pointer and stack pointer (0 where unknown). */
static inline void context_regs(const ucontext_t *uc, uintptr_t *pc, uintptr_t *fp, uintptr_t *sp)
{
#if defined(__x86_64__)
    *pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    *fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
    *sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    *pc = (uintptr_t)uc->uc_mcontext.pc;
    *fp = (uintptr_t)uc->uc_mcontext.regs[29];
    *sp = (uintptr_t)uc->uc_mcontext.sp;
#else
    (void)uc;
    *pc = *fp = *sp = 0;
#endif
}

/* samples_unwind.c */
void pw_samples_unwinder_load(void);       /* at start: libunwind, if here */
void pw_samples_warm_unwind(const thr *t); /* a thread's first unwind, no handler */
int pw_samples_stack(thr *t, void *ucv, uintptr_t *frames); /* in the handler: depth */
const char *pw_samples_unwinder(void);                      /* "libunwind" or "frame pointers" */

/* samples_handlers.c */
extern PW_TLS volatile unsigned pw_samples_handled;
void pw_samples_handlers_resolve(void); /* at start: the real functions a handler calls */

/* samples_blocking.c: what the handlers note of the wrapped call in progress */
void pw_samples_note_interruption(void *ucv); /* ours: did our signal alone end it */
int pw_samples_nudge(thr *t, void *ucv);      /* ours: 1 when it set t's timer */
void pw_samples_note_woken(void *uc);         /* the program's, as it begins */
void pw_samples_nudge_resumed(void *uc);      /* the program's, once it has run */

#pragma GCC visibility pop

#endif
