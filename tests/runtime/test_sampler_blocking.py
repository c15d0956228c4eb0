"""Blocking calls that the kernel never restarts after a signal handler (signal(7): poll,
select, epoll, pause, sigsuspend, sigwaitinfo, nanosleep, System V IPC, sockets with a
timeout, io_getevents; and sem_timedwait, whose futex wait has a timeout), under 1 ms
sampling: the sampler's signal lands in them hundreds of times, yet the program sees what
it sees without perfweave (results, EINTR only from its own signals, timeouts of the
right length), and the time blocked is sampled in state "wait". sem_wait and
pthread_cond_timedwait, which no handler ends, are checked as well."""

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
    "clock_nanosleep",
    "usleep",
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


@pytest.mark.parametrize("mode", MODES)
def test_blocking_call_sees_no_sampler_signal(mode, build, run_pw):
    prog = build(None, "blocking.c", ("-pthread",))
    ref = bare([prog, mode])
    r = run_pw([prog, mode], FAST, check=False)
    assert r.proc.returncode == ref.returncode == 0, r.proc.stderr
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


def test_program_signal_right_after_the_sampler_ends_the_sleep(build, run_pw):
    """A sleep that the sampler's signal ended used to be resumed in clock_nanosleep, and
    a program's signal that came in between (during the sampler's handler, which takes a
    sample) was handled without ending the sleep: 10-15 of 1,500 sleeps went on to their
    end. 1,500 sleeps (nanosleep, clock_nanosleep relative and absolute on
    CLOCK_MONOTONIC and CLOCK_REALTIME) each with the program's SIGALRM swept over the
    1 ms sampling period: every signal handled during the sleep call ends the sleep with
    EINTR and the right rem, with and without perfweave (programs/sleep_race.c; a sleep
    that went on is excused only where the thread was preempted before its system call,
    which leaves it sleeping without perfweave as well)."""
    prog = build(None, "sleep_race.c")
    n = 1500

    def counts(stdout):
        syscall, held, excused, early, lost, badrem = map(int, stdout.split())
        assert syscall + held + early == n and excused <= held, stdout
        # early: the timer expired before the call, on a loaded machine; at most a few
        assert early < 0.1 * n and (lost, badrem) == (0, 0), stdout
        return syscall, held

    ref = bare([prog, n])
    assert ref.returncode == 0, ref.stderr
    syscall, held = counts(ref.stdout)
    assert syscall > 0.9 * n  # without perfweave: each in its system call
    r = run_pw([prog, n], FAST)
    syscall, held = counts(r.proc.stdout)
    assert held > 0.9 * n  # under perfweave: handed over by the wrapper
    [p] = read_samples(r.exp)
    # ~1 sample/ms over 1,500 sleeps of 0.2-2.2 ms: the sampler's signal ended many
    assert len(p.records) > 600
