/*
 * The samples module's interposition of the program's signal dispositions
 * (samples_internal.h): once the sampler has started, the program's handlers run through
 * program_handler, which counts them in the thread (pw_samples_handled) and tells the
 * wrapped blocking call they interrupt (samples_blocking.c); sigaction and signal show the
 * program what it set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>

#include "samples_internal.h"
#include "wrap.h"

/* Handlers of the program that this thread entered or left (program_handler counts
 * each twice): a wrapped call during which one ran was the program's to end, whatever
 * our handler found (ended_a_call), as the program's handler may have ended it before
 * ours ran. Volatile, as the fields of the wrapped calls' records (samples_blocking.c),
 * because the handlers write them: glibc declares the functions the wrappers call
 * (syscall, ...) as leaf functions, which lets the compiler keep a variable in a register
 * across them. */
PW_TLS volatile unsigned pw_samples_handled;

/* The program's handlers, run through program_handler once the sampler has started, so
 * that a thread counts the handlers it runs (pw_samples_handled): a program's signal that ended a
 * blocking call and was handled before ours landed (ours blocked by the program's
 * sa_mask until its handler returned, or arriving as it returned) leaves the call's
 * registers as ours would (-EINTR), and only the count tells the call was the
 * program's. A call being made again after our signal, whose new system call a handler
 * that runs just before it cannot end, is ended by our timer (nudge). sigaction and
 * signal report the program's own handler and flags; what the
 * kernel holds otherwise (a handler set before the sampler started, or by the C library
 * itself) is reported and left as it is. */
PW_REAL_DECLARE(sigaction);
PW_REAL_DECLARE(signal);
static void *program_fn[NSIG]; /* the program's handler of each signal */
static int program_info[NSIG]; /* it takes (int, siginfo_t *, void *): SA_SIGINFO */

static void program_handler(int s, siginfo_t *si, void *uc)
{
    pw_samples_handled++;
    pw_samples_note_woken(uc);
    void *fn = __atomic_load_n(&program_fn[s], __ATOMIC_ACQUIRE);
    if (!fn) /* never: set before this handler is installed for s */
        ;
    else if (__atomic_load_n(&program_info[s], __ATOMIC_ACQUIRE))
        ((void (*)(int, siginfo_t *, void *))fn)(s, si, uc);
    else
        ((void (*)(int))fn)(s);
    pw_samples_handled++; /* after it too: a wrapper it called counted from inside it */
    pw_samples_nudge_resumed(uc);
}

/* What the kernel holds for s, as the program set it */
static void program_view(int s, struct sigaction *sa, void *fn, int info)
{
    if (sa->sa_sigaction != program_handler)
        return;
    sa->sa_handler = (void (*)(int))fn;
    sa->sa_flags = (sa->sa_flags & ~SA_SIGINFO) | (info ? SA_SIGINFO : 0);
}

PW_EXPORT int sigaction(int s, const struct sigaction *act, struct sigaction *old)
{
    PW_REAL_RESOLVE(sigaction);
    if (!pw_samples_started || s <= 0 || s >= NSIG || s == pw_samples_sig)
        return real_sigaction(s, act, old);
    void *fn = __atomic_load_n(&program_fn[s], __ATOMIC_ACQUIRE);
    int info = program_info[s];
    struct sigaction through, was;
    if (act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN) {
        __atomic_store_n(&program_info[s], !!(act->sa_flags & SA_SIGINFO), __ATOMIC_RELEASE);
        __atomic_store_n(&program_fn[s], (void *)act->sa_handler, __ATOMIC_RELEASE);
        through = *act;
        through.sa_sigaction = program_handler;
        through.sa_flags |= SA_SIGINFO;
        act = &through;
    }
    int rc = real_sigaction(s, act, &was);
    if (rc != 0) {
        __atomic_store_n(&program_fn[s], fn, __ATOMIC_RELEASE);
        __atomic_store_n(&program_info[s], info, __ATOMIC_RELEASE);
        return rc;
    }
    if (old) {
        program_view(s, &was, fn, info);
        *old = was;
    }
    return 0;
}

/* signal: the C library's (its flags and mask for the handler), then our handler in front */
PW_EXPORT sighandler_t signal(int s, sighandler_t h)
{
    PW_REAL_RESOLVE(signal);
    PW_REAL_RESOLVE(sigaction);
    if (!pw_samples_started || s <= 0 || s >= NSIG || s == pw_samples_sig)
        return real_signal(s, h);
    void *fn = __atomic_load_n(&program_fn[s], __ATOMIC_ACQUIRE);
    sighandler_t was = real_signal(s, h);
    if (was == SIG_ERR)
        return was;
    if ((void *)was == (void *)program_handler)
        was = (sighandler_t)fn;
    struct sigaction now;
    if (h != SIG_DFL && h != SIG_IGN && real_sigaction(s, NULL, &now) == 0 && now.sa_handler == h)
        sigaction(s, &now, NULL);
    return was;
}

/* Looked up at start (sigaction's was, by the module's own call of it): a handler may
 * call them, and dlsym is no call for a handler. */
void pw_samples_handlers_resolve(void) { PW_REAL_RESOLVE(signal); }
