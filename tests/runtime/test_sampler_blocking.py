"""Blocking calls that the kernel never restarts after a signal handler (signal(7): poll,
select, epoll, pause, sigsuspend, sigwaitinfo, sleeps on every kind of clock, System V
IPC, sockets with a timeout, io_getevents; and sem_timedwait, whose futex wait has a
timeout), under 1 ms sampling: the sampler's signal lands in them hundreds of times, yet
the program sees what it sees without perfweave (results, EINTR only from its own
signals, timeouts of the right length), and the time blocked is sampled in state "wait".
sem_wait and pthread_cond_timedwait, which no handler ends, are checked as well."""

import re

import pytest

from harness import activity_pct, bare, inclusive_pct
from perfweave.readers.samples import read_samples

FAST = ["--sample", "--sample-interval-ms", "1"]
MODES = [
    "poll",
    "ppoll",
    "select",
    "pselect",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "pause",
    "sigsuspend",
    "sigtimedwait",
    "sigwaitinfo",
    "sigwaitall",
    "nanosleep",
    "usleep",
    "clock_nanosleep",
    "clock_nanosleep_abs",
    "clock_nanosleep_realtime",
    "clock_nanosleep_realtime_abs",
    "clock_nanosleep_boottime",
    "clock_nanosleep_boottime_abs",
    "clock_nanosleep_cputime",
    "clock_nanosleep_realtime_alarm",
    "clock_nanosleep_boottime_alarm",
    "sem_wait",
    "sem_timedwait",
    "sem_clockwait",
    "pthread_cond_timedwait",
    "semop",
    "semtimedop",
    "msgrcv",
    "msgsnd",
    "accept",
    "recv",
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "connect",
    "send",
    "sendto",
    "sendmsg",
    "io_getevents",
]
# no handler ends these (restarted after SA_RESTART, or never EINTR by POSIX): no "own"
NOT_ENDED = ("sem_wait", "pthread_cond_timedwait")


def cases(stdout):
    """{case: (rc, errno, result, elapsed s)} from the program's lines."""
    out = {}
    for line in stdout.splitlines():
        mode, case, rc, err, result, elapsed = line.split()
        out[case] = ((rc, err, result), float(elapsed))
    return out


def refused(ref, r):
    """A mode the kernel refuses here (the alarm clocks need a real-time clock device and
    CAP_WAKE_ALARM): refused the same way under perfweave, and then skipped, as nothing
    can be measured."""
    if " unsupported " not in ref.stdout:
        return
    assert r.proc.stdout == ref.stdout, (r.proc.stdout, ref.stdout)
    pytest.skip(f"the kernel refuses it here: {ref.stdout.strip()}")


@pytest.mark.parametrize("mode", MODES)
def test_blocking_call_sees_no_sampler_signal(mode, build, run_pw):
    prog = build(None, "blocking.c", ("-pthread",))
    ref = bare([prog, mode])
    r = run_pw([prog, mode], FAST, check=False)
    assert r.proc.returncode == ref.returncode == 0, r.proc.stderr
    refused(ref, r)
    want, got = cases(ref.stdout), cases(r.proc.stdout)
    assert set(got) == set(want) and want
    for case, (result, elapsed) in got.items():
        # same return value, errno and result (revents, fd set, event data, signal):
        # EINTR only in case "own", from the program's SIGALRM
        assert result == want[case][0], (case, result, want[case][0])
        # each call ends at 300 ms by construction (its timeout, a thread's event or
        # the program's SIGALRM); without the wrappers the first sample (0.5-1.5 ms)
        # would end it with EINTR (socket timeouts run on the kernel's tick: 300-330 ms)
        assert 0.29 <= elapsed < 0.6, (case, elapsed)
    if mode == "sigwaitall":
        # every signal blocked and waited for: the program gets its SIGALRM (14), never
        # the sampler's signal (which stays pending: that thread is not sampled)
        assert got["own"][0][:2] == ("14", "0")
        return
    if mode in NOT_ENDED:
        assert "own" not in got
    else:
        assert got["own"][0][1] == "EINTR"
    # a call with a timeout of its own: that timeout ended case "timeout", with the
    # result it gives without perfweave (checked above), after at least 300 ms
    [p] = read_samples(r.exp)
    main = p.records[p.records["thread"] == 0]
    # ~1 sample/ms over >= 0.3 s blocked: hundreds of interruptions were resumed
    assert len(main) > 150


# one of each way a wrapper resumes a call: a timeout in ms, a timespec, the mask set
# atomically, no timeout, a socket's timeout, connect, waiting for signals, a sleep
MASKED_MODES = [
    "poll",
    "select",
    "epoll_pwait",
    "pause",
    "sigtimedwait",
    "semtimedop",
    "msgrcv",
    "sendmsg",
    "connect",
    "io_getevents",
    "nanosleep",
]


@pytest.mark.parametrize("mode", MASKED_MODES)
def test_program_handler_blocking_every_signal_still_ends_the_call(mode, build, run_pw):
    """The program's SIGALRM handler blocks every signal while it runs (sigfillset, a
    common sa_mask) and takes 3 ms: the sampler's signal, held until it returns, lands
    on the call that the program's signal ended, with the registers it would see had it
    ended the call itself. The call still ends with EINTR at 300 ms, as without perfweave
    (it used to be resumed: up to its 5 s timeout, or for ever in pause; the same, rarely,
    when the sampler's signal came just as any handler of the program returned)."""
    prog = build(None, "blocking.c", ("-pthread",))
    ref = bare([prog, mode, "masked"])
    r = run_pw([prog, mode, "masked"], FAST, check=False, timeout=30)
    assert r.proc.returncode == ref.returncode == 0, r.proc.stderr
    want, got = cases(ref.stdout), cases(r.proc.stdout)
    assert set(got) == set(want) == {"own"}
    assert got["own"][0] == want["own"][0] and got["own"][0][1] == "EINTR", (got, want)
    assert 0.29 <= got["own"][1] < 0.6, got


def test_blocking_calls_left_without_returning(build, run_pw):
    """A wrapper left without returning: its thread cancelled in the call (a cancellation
    point), or the program's handler jumping out of it (siglongjmp), after the sampler's
    signal had made it call again. The thread's record of the call stays behind; the
    cleanup handler, and the program after the jump, write over the stack where the
    wrapper was and make blocking calls under 1 ms sampling (records kept in the
    wrappers' frames, a first design, crashed the program: SIGSEGV in 3 of 3 runs), and
    the program's signal still ends a later call with EINTR (programs/blocking_left.c)."""
    prog = build(None, "blocking_left.c", ("-pthread",))
    ref = bare([prog])
    r = run_pw([prog], FAST, check=False)
    assert r.proc.returncode == ref.returncode == 0, r.proc.stderr
    assert r.proc.stdout == ref.stdout == "cancelled 20\njumped 20 20\n", (
        r.proc.stdout,
        ref.stdout,
    )
    [p] = read_samples(r.exp)
    assert len(p.records) > 300  # ~1.2 s of blocking calls sampled


def test_time_blocked_is_sampled_as_wait(build, run_pw):
    prog = build(None, "blocking.c", ("-pthread",))
    r = run_pw([prog, "poll"], FAST)
    [p] = read_samples(r.exp)
    activities = p.meta["activities"]
    assert activities[:8] == [
        "compute",
        "mpi_p2p",
        "mpi_coll",
        "mpi_rma",
        "mpi_sync",
        "mpi_file",
        "mpi_other",
        "sleep",
    ]  # older indexes kept (mpi_file was mpi_io before samples version 4); wait appended
    main = p.records[p.records["thread"] == 0]
    share = (main["activity"] == activities.index("wait")).mean()
    # 0.9 s blocked in poll of ~0.9 s sampled (start-up and output are a few ms)
    assert share > 0.85, share
    assert activity_pct(r.open())["wait"] > 60  # the writer thread sleeps (state sleep)


def test_threads_beyond_the_table_are_counted_as_dropped(build, run_pw):
    """300 threads one after the other + main: 301 ask for the 256 slots, 45 are not
    sampled; the samples' JSON and the report say so (the run's dropped samples are a
    figure of the report's sampling section alone)."""
    prog = build(None, "many_threads.c", ("-pthread",))
    r = run_pw([prog, 300], FAST)
    assert r.proc.stdout == "300 threads\n"
    [p] = read_samples(r.exp)
    assert p.meta["dropped"] == {"threads": 45, "timers": 0, "memory": 0}
    assert len(p.meta["threads"]) == 256
    sm = r.report()["samples"]
    assert sm["dropped"] == {"threads": 45, "timers": 0, "memory": 0}
    assert "threads not sampled: 45" in r.text_report()


def test_libunwind_walks_code_without_frame_pointers(build, run_pw):
    """-O2 -fomit-frame-pointer, main -> outer -> middle -> inner -> hot burning ~1 s:
    libunwind (DWARF CFI) finds the whole chain in every sample; the frame-pointer walk
    (--no-sample-libunwind) cannot get past hot."""
    prog = build(None, "nofp_chain.c", ("-O2", "-fomit-frame-pointer"))
    r = run_pw([prog, 1], ["--sample-interval-ms", "2"])
    [p] = read_samples(r.exp)
    assert p.meta["unwinder"] == "libunwind"
    inc = inclusive_pct(r.open())
    # ~1 s of ~1.0x s sampled is in hot; each caller holds it on its stack
    for fn in ("hot", "inner", "middle", "outer", "main"):
        assert inc.get(fn, 0) > 85, (fn, inc)
    # fallbacks (a sample in the loader, or libunwind failing): a few at most
    assert p.meta["unwind_fallbacks"] < 0.05 * len(p.records)

    fp = run_pw([prog, 1], ["--sample-interval-ms", "2", "--no-sample-libunwind"])
    [q] = read_samples(fp.exp)
    assert q.meta["unwinder"] == "frame pointers"
    inc = inclusive_pct(fp.open())
    assert inc.get("hot", 0) > 85 and inc.get("middle", 0) < 50, inc


# every interface that a program's handler ends
RACE_MODES = [m for m in MODES if m not in NOT_ENDED and m != "sigwaitall"]
# calls per interface; see the test
RACE_CALLS = 3000
RACE_COUNTS = ("n", "ended", "early", "late", "before", "lost", "bad", "outcome")
# The calls under perfweave that their own run delay excuses (see race()) prove nothing,
# and a loaded machine excuses more of them. A race of rate p per call escapes k checked
# calls with probability (1 - p)^k: each sweep keeps enough calls to catch the rate it is
# there for at least as surely as 2,700 of RACE_CALLS (10 % excused) catch the issue's
# 0.1 %, missing it 6.7 % of the time: the race sweep at most 300 of 3,000 excused, the
# slow one (10 to 19 % before 8d56f25, its docstring) at most 74 of 100 (12 of 100 seen
# for epoll_wait beside two busy loops, load 11)
MISS = (1 - 0.001) ** 2700
RACE_RATE, SLOW_RACE_RATE = 0.001, 0.10


def race_counts(stdout):
    """{mode: {count: value} or the kernel's refusal} from `blocking race`'s lines."""
    out = {}
    for line in stdout.splitlines():
        mode, *rest = line.split()
        out[mode] = (
            " ".join(rest) if rest[0] == "unsupported" else dict(zip(RACE_COUNTS, map(int, rest)))
        )
    return out


def race(build, run_pw, verb, bare_calls, calls, modes, rate):
    """`blocking VERB` (race, race-slow) over MODES, bare (BARE_CALLS each) and under
    1 ms sampling (CALLS each): no call lost or with another result in either, enough
    of the calls under perfweave not excused to catch a race of RATE (MISS), the
    outcomes the same. Returns the run and the modes measured (not refused by the
    kernel)."""
    prog = build(None, "blocking.c", ("-pthread",))
    ref = bare([prog, verb, bare_calls, *modes])
    assert ref.returncode == 0, ref.stderr
    options = [*FAST, "--sample-capacity", "100000"]
    r = run_pw([prog, verb, calls, *modes], options, timeout=600)
    want, got = race_counts(ref.stdout), race_counts(r.proc.stdout)
    assert list(got) == list(want) == modes, (got, want)
    measured = 0
    for mode in modes:
        if isinstance(want[mode], str):  # refused: see refused()
            assert got[mode] == want[mode], (mode, got[mode])
            continue
        measured += 1
        for counts, stderr in ((want[mode], ref.stderr), (got[mode], r.proc.stderr)):
            # lost: the race; bad: what the program saw differs (stderr says which)
            told = [ln for ln in stderr.splitlines() if ln.startswith(("LOST ", "BAD "))]
            assert counts["lost"] == counts["bad"] == 0, "\n".join([f"{mode} {counts}", *told])
        # The run under perfweave proves what its ended calls prove: the excused ones
        # (each the kernel's own outcome, told by the thread's run delay and context
        # switches) must leave most of them. Not the bare reference's: it only shows the
        # program right and the outcome, and a loaded machine excuses more of its calls
        # (9 of 200 beside two busy loops and two test suites, 6 of 50 in race-slow).
        excused = got[mode]["early"] + got[mode]["late"] + got[mode]["before"]
        assert (1 - rate) ** (got[mode]["n"] - excused) <= MISS, (mode, got[mode], want[mode])
        assert got[mode]["outcome"] == want[mode]["outcome"], (mode, got[mode], want[mode])
    return r, measured


def test_program_signal_swept_over_the_sampling_period_ends_the_call(build, run_pw):
    """The race of the wrappers that make a call again after the sampler's signal ended
    it: a program's signal handled after the wrapper decided to call again, before the
    new system call began, did not end that call, which went on to its timeout. Every
    interface a program's handler ends is called RACE_CALLS times, each call ended by the
    program's SIGALRM 50 to 300 us after it began (programs/blocking.c, race()), under
    1 ms sampling all along (a capacity that never thins the samples); the sampler's
    timer is re-armed at random, so its phase at the program's signal is uniform.

    Ground truth from the program itself: a handler that ran while the program was in the
    call must end it with EINTR, with the result the kernel gives then (revents, fd sets
    and epoll events untouched, the siginfo buffer untouched, the time left in select's
    timeval and a relative sleep's rem right), as it does without perfweave (checked on
    200 calls of each). Excused, and rare: a handler that ran before the thread first
    slept in the call, or after the call's timeout had passed while the thread waited for
    a CPU from the signal to that timeout (its run delay, /proc/thread-self/schedstat):
    the kernel lets such a call go on, or end by its timeout, as well. The former sleep
    test excused only a preempted call, and failed on loaded machines, with or without
    perfweave: a sleep woken by the signal but first run after its deadline returns 0.

    Before the change (main at 70a8916), two runs of this sweep (the first with the
    signal at up to 0.55 ms): 21 and 26 of the 27,000 socket calls (accept, recv*, send*,
    connect), 1 of 3,000 io_getevents in the first and 1 of 3,000 msgsnd in the second
    went on to their timeout; sigtimedwait and sigwaitinfo wrote the program's SIGALRM
    into the siginfo buffer in 1,601 and 893 of the 6,000 calls that it ended; and one
    SIGALRM was handled by perfweave's node-timeline thread before that thread had
    blocked signals. This test on main fails at sigtimedwait (384 such calls). After:
    none in three runs, one beside two busy loops. A race of rate p per call escapes
    RACE_CALLS calls of one interface with probability (1 - p)^3000: 5 % at the issue's
    0.1 %, 10 % at the sockets' 0.08 %; all 36 interfaces together, at 0.1 %, e^-108. The
    run takes about 35 s."""
    r, measured = race(build, run_pw, "race", 200, RACE_CALLS, RACE_MODES, RACE_RATE)
    assert measured >= len(RACE_MODES) - 2  # only the alarm clocks may be refused
    [p] = read_samples(r.exp)
    # ~1 sample/ms over ~100,000 calls of 0.05-0.3 ms (25 s or more): the sampler's
    # signal ended thousands of them, and thinning never slowed it
    assert p.meta["threads"][0]["interval_ns"] == 1_000_000
    assert len(p.records) > 10000
    assert not re.search(r"^(LOST|BAD) ", r.proc.stderr, re.M)


# Interfaces whose outcome, when a program's signal comes before their timeout, is the
# kernel's to decide at that moment, whatever the handler does after: not the sockets
# (their timeouts count in scheduler ticks, and the bare program loses a few percent),
# nor a CPU-time sleep (its clock counts the sampler's own CPU time, so it ends sooner in
# wall time under perfweave), nor the calls without a timeout; the alarm clocks as
# RACE_MODES
SLOW_RACE_KINDS = ("poll", "ppoll", "select", "pselect", "epoll", "sigtimedwait", "nanosleep")
SLOW_RACE_KINDS += ("usleep", "clock_nanosleep", "sem_", "semtimedop", "io_getevents")
SLOW_RACE_MODES = [
    m for m in RACE_MODES if m.startswith(SLOW_RACE_KINDS) and m != "clock_nanosleep_cputime"
]
SLOW_RACE_CALLS = 100


def test_a_handler_that_outlasts_the_timeout_still_ends_the_call(build, run_pw):
    """`blocking race-slow`: as above, with a 10 ms timeout and a program's handler that
    runs for 12 ms. The kernel decides a call's outcome when the signal ends it: EINTR,
    and the time left counted then (a relative sleep's rem, select's timeval), however
    long the handler then runs. A wrapper that made the call again after the sampler's
    signal decided later, after the handler: before 8d56f25 a relative sleep whose time
    had passed while the handler ran returned 0 (nanosleep, usleep, clock_nanosleep on
    CLOCK_MONOTONIC and CLOCK_REALTIME: 10 to 19 of 100 calls each went on as if the
    signal had never come; 114 to 131 of 1000 with a 1 ms timeout and a 2 ms handler);
    and a call made again whose timeout passed in the program's handler, run just
    before the new system call began, returned its timeout (too rare to show here: the
    wrapper now makes both EINTR, from the time the handler began, program_ended in
    runtime/modules/samples_blocking.c). The timeout is 10 ms, not 1: beside busy loops a
    thread woken by its signal often waits a millisecond for a CPU, and the kernel then
    ends a 1 ms sleep by its timeout (excused as late, but too often for the test to
    prove anything). About 30 s."""
    _, measured = race(
        build, run_pw, "race-slow", 50, SLOW_RACE_CALLS, SLOW_RACE_MODES, SLOW_RACE_RATE
    )
    assert measured >= len(SLOW_RACE_MODES) - 2  # only the alarm clocks may be refused
