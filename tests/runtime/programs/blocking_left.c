/* Wrapped blocking calls left without returning, under sampling. 20 times each:
 *   cancel:  a thread blocks in poll() without a timeout and is cancelled 20 ms later
 *            (poll is a cancellation point); its cleanup handler writes over the stack
 *            below its frame, where poll's was, and makes blocking calls (poll with a
 *            timeout, usleep) for 20 ms;
 *   longjmp: the program's SIGALRM handler jumps (siglongjmp) out of a poll() blocked
 *            20 ms, then the program does the same as the cleanup handler, and a poll
 *            without a timeout that its SIGALRM ends (EINTR) after 5 ms.
 * Prints "cancelled N" and "jumped N EINTR" with the counts that went as expected: the
 * same with and without perfweave. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "spin.h"

#define TIMES 20

/* the stack below the caller overwritten */
__attribute__((noinline)) static void scribble(int n)
{
    volatile char buf[512];
    memset((char *)buf, 0x5a, sizeof buf);
    if (n)
        scribble(n - 1);
    sink += buf[7];
}

/* blocking calls for 20 ms over a scribbled stack */
static void more_calls(void)
{
    for (double t = now(); now() - t < 0.02;) {
        scribble(20);
        poll(NULL, 0, 1);
        usleep(500);
    }
}

static void cleanup(void *arg)
{
    (void)arg;
    more_calls();
}

static void *blocked(void *arg)
{
    (void)arg;
    pthread_cleanup_push(cleanup, NULL);
    poll(NULL, 0, -1);
    pthread_cleanup_pop(0);
    return NULL;
}

static sigjmp_buf out;
static volatile sig_atomic_t jump;

static void on_alarm(int s)
{
    (void)s;
    if (jump)
        siglongjmp(out, 1);
}

static void alarm_in(int ms)
{
    struct itimerval it = {{0, 0}, {0, ms * 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

int main(void)
{
    int cancelled = 0, jumped = 0, eintr = 0;
    for (int i = 0; i < TIMES; i++) {
        pthread_t t;
        void *r;
        pthread_create(&t, NULL, blocked, NULL);
        usleep(20000);
        pthread_cancel(t);
        pthread_join(t, &r);
        cancelled += r == PTHREAD_CANCELED;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    for (int i = 0; i < TIMES; i++) {
        jump = 1;
        if (sigsetjmp(out, 1) == 0) {
            alarm_in(20);
            poll(NULL, 0, -1);
        } else {
            jumped++;
        }
        jump = 0;
        more_calls();
        alarm_in(5);
        eintr += poll(NULL, 0, -1) == -1 && errno == EINTR;
    }
    printf("cancelled %d\njumped %d %d\n", cancelled, jumped, eintr);
    return 0;
}
