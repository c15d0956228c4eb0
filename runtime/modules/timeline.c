/*
 * Node-level sources: one sampler thread per node reads, every --node-interval ms,
 * what the node's kernel, devices and daemons count, into timeline/HOST.values
 * (pw_timeline_rec, include/perfweave/format/timeline.h) with the series named in
 * timeline/HOST.json (docs/format.md "Node timeline").
 *
 * Sources: network interfaces (/proc/net/dev), InfiniBand ports
 * (/sys/class/infiniband), RAPL/powercap energy (/sys/class/powercap), GPUs through
 * NVML (libnvidia-ml opened with dlopen), PCP metrics from the local pmcd (libpcp
 * opened with dlopen; --pcp), and each measured process's resident memory, CPU time
 * and I/O (/proc/PID). A source that is not there is named in HOST.json with the
 * reason, never an error.
 *
 * Which process samples: every measured process tries to create
 * timeline/HOST.lock; the one that succeeds (the first on the node) runs the thread.
 * Every measured process appends its pid to timeline/HOST.pids, which the sampler
 * rereads each tick. The thread blocks all signals, allocates only at start and
 * when a series is added, and stops (with one last tick) when its process exits.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "timeline.h"
#include "wrap.h"
#include "perfweave/format/timeline.h" /* its files: kinds, records, versions */

/* PW_NO_PCP: CMake's PERFWEAVE_PCP=OFF (a build that must not pick up a pmapi.h it finds) */
#if defined(__has_include) && !defined(PW_NO_PCP)
#if __has_include(<pcp/pmapi.h>)
#include <pcp/pmapi.h>
#define PW_HAVE_PCP 1
#endif
#endif

#define MAX_SERIES 8192
#define HASH_SLOTS 16384 /* series index + 1 by hash of (source, name); 0 empty */
#define MAX_PIDS 1024    /* measured processes of a node whose activity pages are mapped */
#define NAME_LEN 128

enum { KIND_COUNTER, KIND_GAUGE };

typedef struct series {
    char source[16], name[NAME_LEN], unit[24];
    int kind;
    double wrap;     /* counter: raw values wrap at this (0: 64-bit, never) */
    double last_raw; /* counter: last raw reading */
    double total;    /* counter: cumulative since the first reading */
    int seen;        /* has a reading */
} series;

static struct {
    int leader;
    pid_t pid;
    pthread_t thread;
    pthread_mutex_t lock; /* guards stopping: set by stop(), waited for by the thread */
    pthread_cond_t wake;
    int stopping;
    int fd; /* HOST.values (in the thread's descriptor table) */
    char host[256];
    series *s;
    int n, described;     /* series, and how many HOST.json describes */
    char absent[24][160]; /* "source: reason" */
    int nabsent;
    int64_t ticks, t_first, t_last, cpu_ns;
    pw_timeline_rec *out; /* one tick's records */
    int nout;
    int *hash; /* HASH_SLOTS */
    struct {
        long pid;
        pw_activity *act;
        int ended; /* its process ended and its page was read once after */
    } pages[MAX_PIDS];
    int npages;
} nd;

static uint64_t name_hash(const char *source, const char *name)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const char *p = source; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ '/') * 1099511628211ULL;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

/* ---- series ---- */

static int series_find(const char *source, const char *name, const char *unit, int kind,
                       double wrap)
{
    size_t slot = (size_t)(name_hash(source, name) & (HASH_SLOTS - 1));
    for (; nd.hash[slot]; slot = (slot + 1) & (HASH_SLOTS - 1)) {
        int i = nd.hash[slot] - 1;
        if (strcmp(nd.s[i].name, name) == 0 && strcmp(nd.s[i].source, source) == 0)
            return i;
    }
    if (nd.n >= MAX_SERIES)
        return -1;
    nd.hash[slot] = nd.n + 1;
    series *s = &nd.s[nd.n];
    memset(s, 0, sizeof *s);
    snprintf(s->source, sizeof s->source, "%s", source);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->unit, sizeof s->unit, "%s", unit);
    s->kind = kind;
    s->wrap = wrap;
    return nd.n++;
}

/* Record one reading: counters are unwrapped (a raw value below the last one wrapped
 * at `wrap`, or was reset where wrap is 0) and stored cumulatively. */
static void put(const char *source, const char *name, const char *unit, int kind, double wrap,
                double raw)
{
    int i = series_find(source, name, unit, kind, wrap);
    if (i < 0 || nd.nout >= MAX_SERIES)
        return;
    series *s = &nd.s[i];
    double v = raw;
    if (kind == KIND_COUNTER) {
        if (s->seen) {
            double d = raw - s->last_raw;
            if (d < 0)
                d = s->wrap > 0 ? d + s->wrap : raw; /* wrapped, or reset to 0 */
            s->total += d;
        }
        s->last_raw = raw;
        v = s->total;
    }
    s->seen = 1;
    nd.out[nd.nout].series = i;
    nd.out[nd.nout].pad = 0;
    nd.out[nd.nout].value = v;
    nd.nout++;
}

static void absent(const char *source, const char *why)
{
    if (nd.nabsent < 24)
        snprintf(nd.absent[nd.nabsent++], sizeof nd.absent[0], "%s\t%s", source, why);
}

/* ---- small file helpers (no stdio in the loop: fixed buffers) ---- */

static ssize_t slurp(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = 0, r;
    while ((size_t)n < cap - 1 && (r = read(fd, buf + n, cap - 1 - (size_t)n)) > 0)
        n += r;
    close(fd);
    buf[n < 0 ? 0 : n] = 0;
    return n;
}

static int read_num(const char *path, double *v)
{
    char b[64];
    if (slurp(path, b, sizeof b) <= 0)
        return -1;
    char *end;
    *v = strtod(b, &end);
    return end == b ? -1 : 0;
}

/* ---- network interfaces ---- */

static void sample_net(void)
{
    static char buf[16384];
    if (slurp("/proc/net/dev", buf, sizeof buf) <= 0)
        return;
    char *line = strchr(buf, '\n');
    line = line ? strchr(line + 1, '\n') : NULL; /* two header lines */
    while (line && *++line) {
        char *colon = strchr(line, ':'), *eol = strchr(line, '\n');
        if (!colon || (eol && colon > eol))
            break;
        char ifname[64];
        char *p = line;
        while (*p == ' ')
            p++;
        size_t len =
            (size_t)(colon - p) < sizeof ifname - 1 ? (size_t)(colon - p) : sizeof ifname - 1;
        memcpy(ifname, p, len);
        ifname[len] = 0;
        double f[16];
        char *q = colon + 1;
        int k = 0;
        for (; k < 16; k++) {
            char *end;
            f[k] = strtod(q, &end);
            if (end == q)
                break;
            q = end;
        }
        if (k >= 9) {
            char name[NAME_LEN];
            snprintf(name, sizeof name, "%s.rx_bytes", ifname);
            put("net", name, "bytes", KIND_COUNTER, 0, f[0]);
            snprintf(name, sizeof name, "%s.tx_bytes", ifname);
            put("net", name, "bytes", KIND_COUNTER, 0, f[8]);
        }
        line = eol;
    }
}

/* ---- InfiniBand ports: port_{rcv,xmit}_data count 4-byte words ---- */

static int ib_ports;

static void sample_ib(int probe)
{
    DIR *d = opendir("/sys/class/infiniband");
    if (!d) {
        if (probe)
            absent("infiniband", "no /sys/class/infiniband (no InfiniBand device)");
        return;
    }
    struct dirent *e, *pe;
    int found = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char ports[600];
        snprintf(ports, sizeof ports, "/sys/class/infiniband/%s/ports", e->d_name);
        DIR *pd = opendir(ports);
        if (!pd)
            continue;
        while ((pe = readdir(pd))) {
            if (pe->d_name[0] == '.')
                continue;
            static const char *what[2][2] = {{"port_rcv_data", "rx_bytes"},
                                             {"port_xmit_data", "tx_bytes"}};
            for (int w = 0; w < 2; w++) {
                char path[1200], name[NAME_LEN];
                double v;
                snprintf(path, sizeof path, "%s/%s/counters/%s", ports, pe->d_name, what[w][0]);
                if (read_num(path, &v) != 0)
                    continue;
                snprintf(name, sizeof name, "%.60s.%.40s.%s", e->d_name, pe->d_name,
                         what[w][1]); /* parts bounded: the whole fits NAME_LEN */
                /* the kernel reads the 64-bit extended counters where the port has them;
                 * a value that goes down wrapped at 32 bits */
                put("infiniband", name, "bytes", KIND_COUNTER, 4294967296.0 * 4, v * 4);
                found = 1;
            }
        }
        closedir(pd);
    }
    closedir(d);
    if (probe && !found)
        absent("infiniband", "no readable port counters under /sys/class/infiniband");
    ib_ports = found;
}

/* ---- RAPL / powercap energy (microjoules, wrapping at max_energy_range_uj) ---- */

static int rapl_zones;

static void sample_rapl(int probe)
{
    DIR *d = opendir("/sys/class/powercap");
    if (!d) {
        if (probe)
            absent("rapl", "no /sys/class/powercap");
        return;
    }
    struct dirent *e;
    int found = 0, denied = 0;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "intel-rapl:", 11) != 0 && strncmp(e->d_name, "amd-rapl:", 9) != 0)
            continue;
        char path[600], zone[64] = "";
        double v, range = 0;
        snprintf(path, sizeof path, "/sys/class/powercap/%s/energy_uj", e->d_name);
        if (read_num(path, &v) != 0) {
            denied |= errno == EACCES || errno == EPERM;
            continue;
        }
        snprintf(path, sizeof path, "/sys/class/powercap/%s/max_energy_range_uj", e->d_name);
        read_num(path, &range);
        snprintf(path, sizeof path, "/sys/class/powercap/%s/name", e->d_name);
        if (slurp(path, zone, sizeof zone) > 0)
            zone[strcspn(zone, "\n")] = 0;
        char name[NAME_LEN];
        snprintf(name, sizeof name, "%.60s.%s", e->d_name, zone[0] ? zone : "zone");
        put("rapl", name, "uJ", KIND_COUNTER, range > 0 ? range + 1 : 0, v);
        found = 1;
    }
    closedir(d);
    if (probe && !found)
        absent("rapl", denied ? "energy_uj not readable (permission; root only on recent kernels)"
                              : "no RAPL zone under /sys/class/powercap");
    rapl_zones = found;
}

/* ---- the measured processes of this node ---- */

#define PW_ACT_MAGIC 0x7077616374763100LL /* "pwactv1" */

/* The activity page of pid (timeline/HOST.PID.act), mapped read-only once; NULL when it
 * has none, or when its process ended and the page was read once since (ended: the
 * process has ended, a last read). */
static pw_activity *activity_of(long pid, int ended)
{
    for (int i = 0; i < nd.npages; i++)
        if (nd.pages[i].pid == pid) {
            if (nd.pages[i].ended)
                return NULL;
            nd.pages[i].ended = ended;
            return nd.pages[i].act;
        }
    if (nd.npages >= MAX_PIDS)
        return NULL;
    char path[4400], num[24];
    pw_fmt_int(num, pid);
    pw_experiment_path(path, sizeof path, "timeline/", nd.host, ".", num, ".act");
    pw_activity *a = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        void *m = mmap(NULL, sizeof(pw_activity), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        a = m == MAP_FAILED ? NULL : m;
    }
    nd.pages[nd.npages].pid = pid;
    nd.pages[nd.npages].ended = ended;
    nd.pages[nd.npages++].act = a; /* NULL too: not looked for again */
    return a;
}

/* This process's own page (the core's pw_act), written by its MPI wrappers
 * (pw_act_add). Its block is written (not a sparse ftruncate) before it is mapped: a
 * store into a page the file system cannot back would raise SIGBUS in the program. */
static void activity_create(void)
{
    static const char zero[4096];
    char path[4400], num[24];
    pw_fmt_int(num, getpid());
    pw_experiment_path(path, sizeof path, "timeline/", nd.host, ".", num, ".act");
    pw_file f;
    pw_file_open(&f, path);
    pw_file_write(&f, zero, sizeof zero);
    void *m = f.err ? MAP_FAILED : mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0);
    if (pw_file_close(&f) != 0) {
        if (m != MAP_FAILED)
            munmap(m, 4096);
        return;
    }
    if (m != MAP_FAILED) {
        pw_activity *a = m;
        a->pid = getpid();
        a->rank = PW_ACT_NO_JOB;
        a->version = 1;
        __atomic_store_n(&a->magic, PW_ACT_MAGIC, __ATOMIC_RELEASE);
        pw_act = a;
    }
}

/* A counter that starts at 0 with its process (an activity page's): its first reading is
 * all of it, where a counter first read mid-way (a network interface's bytes since boot)
 * counts from that reading. A process first seen by the last tick, or one tick after its
 * calls, keeps them. */
static void put_from_zero(const char *name, const char *unit, double raw)
{
    int i = series_find("proc", name, unit, KIND_COUNTER, 0);
    if (i >= 0 && !nd.s[i].seen) {
        nd.s[i].seen = 1;
        nd.s[i].last_raw = 0;
    }
    put("proc", name, unit, KIND_COUNTER, 0, raw);
}

/* A process's MPI time by family and its MPI calls, from its activity page (ended: its
 * process has ended, the page's last read). */
static void activity_sample(long pid, int ended)
{
    char name[NAME_LEN];
    pw_activity *act = activity_of(pid, ended);
    if (!act || act->magic != PW_ACT_MAGIC)
        return;
    /* in ticks (exact, monotonic); HOST.json's ns_per_tick converts them */
    for (int k = 0; k < PW_NFAMILIES; k++) {
        snprintf(name, sizeof name, "%ld.mpi_%s_ns", pid, pw_family_name(k));
        put_from_zero(name, "ticks", (double)__atomic_load_n(&act->ticks[k], __ATOMIC_RELAXED));
    }
    snprintf(name, sizeof name, "%ld.mpi_calls", pid);
    put_from_zero(name, "calls", (double)__atomic_load_n(&act->calls, __ATOMIC_RELAXED));
}

static void sample_procs(void)
{
    static char buf[65536];
    char path[4400];
    pw_experiment_path(path, sizeof path, "timeline/", nd.host, ".pids");
    if (slurp(path, buf, sizeof buf) <= 0)
        return;
    long page = sysconf(_SC_PAGESIZE), hz = sysconf(_SC_CLK_TCK);
    for (char *p = buf; *p;) {
        char *end;
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        p = *end ? end + 1 : end;
        char f[64], b[4096], name[NAME_LEN];
        snprintf(f, sizeof f, "/proc/%ld/statm", pid);
        if (slurp(f, b, sizeof b) <= 0) {
            /* ended and reaped: its page (the file stays) still holds what its calls added
             * since the last tick, up to its exit: read once more */
            activity_sample(pid, 1);
            continue;
        }
        double size = 0, rss = 0;
        sscanf(b, "%lf %lf", &size, &rss);
        snprintf(name, sizeof name, "%ld.rss_bytes", pid);
        put("proc", name, "bytes", KIND_GAUGE, 0, rss * (double)page);
        snprintf(f, sizeof f, "/proc/%ld/stat", pid);
        if (slurp(f, b, sizeof b) > 0) {
            char *q = strrchr(b, ')'); /* comm may hold spaces */
            double ut = 0, stime = 0;
            /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt
             * cmajflt utime stime */
            if (q && sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lf %lf", &ut,
                            &stime) == 2) {
                snprintf(name, sizeof name, "%ld.cpu_ns", pid);
                put("proc", name, "ns", KIND_COUNTER, 0, (ut + stime) * 1e9 / (double)hz);
            }
        }
        activity_sample(pid, 0);
        snprintf(f, sizeof f, "/proc/%ld/io", pid);
        if (slurp(f, b, sizeof b) > 0) {
            static const char *keys[4][2] = {{"rchar: ", "read_chars"},
                                             {"wchar: ", "write_chars"},
                                             {"read_bytes: ", "read_bytes"},
                                             {"write_bytes: ", "write_bytes"}};
            for (int k = 0; k < 4; k++) {
                char *at = strstr(b, keys[k][0]);
                if (!at)
                    continue;
                snprintf(name, sizeof name, "%ld.%s", pid, keys[k][1]);
                put("proc", name, "bytes", KIND_COUNTER, 0, strtod(at + strlen(keys[k][0]), NULL));
            }
        }
    }
}

/* ---- GPUs through NVML (dlopen) ---- */

/* NVML's C ABI, declared here (no nvml.h at build time): the structures and constants
 * below are those of NVML's public header, stable since the v2 entry points (driver 450
 * and later; the power fields since driver 525). */
typedef struct {
    unsigned int gpu, memory;
} nvml_util; /* nvmlUtilization_t */
typedef struct {
    unsigned long long total, free, used;
} nvml_mem; /* nvmlMemory_t */
typedef struct {
    unsigned int field_id, scope_id;
    long long timestamp, latency_us;
    int value_type, rc;
    union {
        double d;
        unsigned int ui;
        unsigned long ul;
        unsigned long long ull;
        long long sll;
        int si;
    } value;
} nvml_field; /* nvmlFieldValue_t */
enum {
    NVML_FI_POWER_INSTANT = 186, /* NVML_FI_DEV_POWER_INSTANT: mW, every architecture */
    NVML_CLOCK_SM = 1,           /* nvmlClockType_t */
    NVML_CLOCK_MEM = 2,
    NVML_TYPE_UINT = 1, /* nvmlValueType_t: unsigned int, unsigned long (long) */
    NVML_TYPE_ULONG = 2,
    NVML_TYPE_ULONGLONG = 3,
};
static struct {
    void *lib;
    int n;
    void *dev[16];
    int instant[16]; /* the device answers NVML_FI_DEV_POWER_INSTANT */
    int (*power)(void *, unsigned int *);
    int (*fields)(void *, int, nvml_field *);
    int (*util)(void *, nvml_util *);
    int (*mem)(void *, nvml_mem *);
    int (*energy)(void *, unsigned long long *);
    int (*clock)(void *, int, unsigned int *);
    int (*shutdown)(void);
} nv;

/* Device i's instantaneous power in mW through the field values; -1 if it has none. */
static double nvml_instant_mw(int i)
{
    nvml_field f;
    memset(&f, 0, sizeof f);
    f.field_id = NVML_FI_POWER_INSTANT;
    if (!nv.fields || nv.fields(nv.dev[i], 1, &f) != 0 || f.rc != 0)
        return -1;
    switch (f.value_type) {
    case NVML_TYPE_UINT:
        return f.value.ui;
    case NVML_TYPE_ULONG:
        return (double)f.value.ul;
    case NVML_TYPE_ULONGLONG:
        return (double)f.value.ull;
    default:
        return -1;
    }
}

static void nvml_open(void)
{
    nv.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nv.lib) {
        absent("nvml", "libnvidia-ml.so.1 not found (no NVIDIA driver)");
        return;
    }
    int (*init)(void) = (int (*)(void))dlsym(nv.lib, "nvmlInit_v2");
    int (*count)(unsigned int *) = (int (*)(unsigned int *))dlsym(nv.lib, "nvmlDeviceGetCount_v2");
    int (*handle)(unsigned int, void **) =
        (int (*)(unsigned int, void **))dlsym(nv.lib, "nvmlDeviceGetHandleByIndex_v2");
    nv.power = (int (*)(void *, unsigned int *))dlsym(nv.lib, "nvmlDeviceGetPowerUsage");
    nv.fields = (int (*)(void *, int, nvml_field *))dlsym(nv.lib, "nvmlDeviceGetFieldValues");
    nv.util = (int (*)(void *, nvml_util *))dlsym(nv.lib, "nvmlDeviceGetUtilizationRates");
    nv.mem = (int (*)(void *, nvml_mem *))dlsym(nv.lib, "nvmlDeviceGetMemoryInfo");
    nv.energy =
        (int (*)(void *, unsigned long long *))dlsym(nv.lib, "nvmlDeviceGetTotalEnergyConsumption");
    nv.clock = (int (*)(void *, int, unsigned int *))dlsym(nv.lib, "nvmlDeviceGetClockInfo");
    nv.shutdown = (int (*)(void))dlsym(nv.lib, "nvmlShutdown");
    unsigned int n = 0;
    int rc;
    if (!init || !count || !handle) {
        absent("nvml", "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetCount_v2");
    } else if ((rc = init()) != 0) {
        char why[80];
        snprintf(why, sizeof why, "nvmlInit failed (NVML error %d: no usable GPU or driver)", rc);
        absent("nvml", why);
    } else if (count(&n) != 0 || n == 0) {
        absent("nvml", "NVML sees no GPU");
    } else {
        int averaged = 0;
        for (unsigned int i = 0; i < n && nv.n < 16; i++)
            if (handle(i, &nv.dev[nv.n]) == 0) {
                nv.instant[nv.n] = nvml_instant_mw(nv.n) >= 0;
                averaged |= !nv.instant[nv.n];
                nv.n++;
            }
        /* Power: the instantaneous reading where the driver has it, so that a tick's value
         * is the power at the tick (nvmlDeviceGetPowerUsage is a 1 s average on Ampere and
         * later but GA100, which would smear a phase over the second after it); energy
         * over an interval comes from the energy counter either way (docs/gpu.md). */
        if (averaged)
            absent("nvml:power_instant",
                   "the driver lacks NVML_FI_DEV_POWER_INSTANT: gpuN.power_w is "
                   "nvmlDeviceGetPowerUsage (1 s average on Ampere and later)");
        return;
    }
    nv.n = 0;
}

static void sample_nvml(void)
{
    for (int i = 0; i < nv.n; i++) {
        char name[NAME_LEN];
        unsigned int mw, mhz;
        nvml_util u;
        nvml_mem m;
        unsigned long long mj;
        double inst = nv.instant[i] ? nvml_instant_mw(i) : -1;
        if (inst >= 0 || (nv.power && nv.power(nv.dev[i], &mw) == 0)) {
            snprintf(name, sizeof name, "gpu%d.power_w", i);
            put("nvml", name, "W", KIND_GAUGE, 0, (inst >= 0 ? inst : mw) / 1000.0);
        }
        if (nv.energy && nv.energy(nv.dev[i], &mj) == 0) {
            snprintf(name, sizeof name, "gpu%d.energy_j", i);
            put("nvml", name, "J", KIND_COUNTER, 0, (double)mj / 1000.0);
        }
        if (nv.util && nv.util(nv.dev[i], &u) == 0) {
            snprintf(name, sizeof name, "gpu%d.util_pct", i);
            put("nvml", name, "%", KIND_GAUGE, 0, u.gpu);
            snprintf(name, sizeof name, "gpu%d.mem_util_pct", i);
            put("nvml", name, "%", KIND_GAUGE, 0, u.memory);
        }
        if (nv.mem && nv.mem(nv.dev[i], &m) == 0) {
            snprintf(name, sizeof name, "gpu%d.mem_used_bytes", i);
            put("nvml", name, "bytes", KIND_GAUGE, 0, (double)m.used);
        }
        if (nv.clock && nv.clock(nv.dev[i], NVML_CLOCK_SM, &mhz) == 0) {
            snprintf(name, sizeof name, "gpu%d.sm_clock_mhz", i);
            put("nvml", name, "MHz", KIND_GAUGE, 0, mhz);
        }
        if (nv.clock && nv.clock(nv.dev[i], NVML_CLOCK_MEM, &mhz) == 0) {
            snprintf(name, sizeof name, "gpu%d.mem_clock_mhz", i);
            put("nvml", name, "MHz", KIND_GAUGE, 0, mhz);
        }
    }
}

/* ---- PCP metrics from the local pmcd (dlopen libpcp) ---- */

#ifdef PW_HAVE_PCP
#define PCP_MAX 64
static struct {
    void *lib;
    int n;
    pmID ids[PCP_MAX];
    pmDesc desc[PCP_MAX];
    char names[PCP_MAX][NAME_LEN];
    char units[PCP_MAX][24];
    int (*fetch)(int, pmID *, pmResult **);
    int (*extract)(int, const pmValue *, int, pmAtomValue *, int);
    void (*free_result)(pmResult *);
    int (*name_in_dom)(pmInDom, int, char **);
} pc;

static void pcp_open(void)
{
    if (!pw_opt.pcp || !*pw_opt.pcp)
        return;
    pc.lib = dlopen("libpcp.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!pc.lib) {
        absent("pcp", "libpcp.so.3 not found (install PCP)");
        return;
    }
    int (*new_context)(int, const char *) =
        (int (*)(int, const char *))dlsym(pc.lib, "pmNewContext");
    int (*lookup)(int, const char **, pmID *) =
        (int (*)(int, const char **, pmID *))dlsym(pc.lib, "pmLookupName");
    int (*lookup_desc)(pmID, pmDesc *) = (int (*)(pmID, pmDesc *))dlsym(pc.lib, "pmLookupDesc");
    char *(*err_str)(int) = (char *(*)(int))dlsym(pc.lib, "pmErrStr");
    char *(*units_str)(const pmUnits *) = (char *(*)(const pmUnits *))dlsym(pc.lib, "pmUnitsStr");
    pc.fetch = (int (*)(int, pmID *, pmResult **))dlsym(pc.lib, "pmFetch");
    pc.extract =
        (int (*)(int, const pmValue *, int, pmAtomValue *, int))dlsym(pc.lib, "pmExtractValue");
    pc.free_result = (void (*)(pmResult *))dlsym(pc.lib, "pmFreeResult");
    pc.name_in_dom = (int (*)(pmInDom, int, char **))dlsym(pc.lib, "pmNameInDom");
    if (!new_context || !lookup || !lookup_desc || !pc.fetch || !pc.extract || !pc.free_result) {
        absent("pcp", "libpcp.so.3 lacks the PMAPI functions");
        return;
    }
    int ctx = new_context(PM_CONTEXT_HOST, "local:");
    if (ctx < 0) {
        char why[150];
        snprintf(why, sizeof why, "cannot reach pmcd (%s): start it",
                 err_str ? err_str(ctx) : "error");
        absent("pcp", why);
        return;
    }
    char list[4096];
    snprintf(list, sizeof list, "%s", pw_opt.pcp);
    char *save = NULL;
    for (char *m = strtok_r(list, ",", &save); m && pc.n < PCP_MAX;
         m = strtok_r(NULL, ",", &save)) {
        const char *one[1] = {m};
        pmID id;
        int rc = lookup(1, one, &id);
        if (rc < 0 || lookup_desc(id, &pc.desc[pc.n]) < 0) {
            char src[48];
            snprintf(src, sizeof src, "pcp:%s", m);
            absent(src, rc < 0 && err_str ? err_str(rc) : "no descriptor");
            pw_log("PCP metric %s: %s", m, rc < 0 && err_str ? err_str(rc) : "no descriptor");
            continue;
        }
        pc.ids[pc.n] = id;
        snprintf(pc.names[pc.n], NAME_LEN, "%s", m);
        const char *u = units_str ? units_str(&pc.desc[pc.n].units) : "";
        snprintf(pc.units[pc.n], sizeof pc.units[0], "%s", u && *u ? u : "count");
        pc.n++;
    }
    if (!pc.n)
        absent("pcp", "none of the --pcp metrics is known to pmcd");
}

static void sample_pcp(void)
{
    if (!pc.n)
        return;
    pmResult *r = NULL;
    if (pc.fetch(pc.n, pc.ids, &r) < 0 || !r)
        return;
    for (int i = 0; i < r->numpmid && i < pc.n; i++) {
        pmValueSet *vs = r->vset[i];
        int kind = pc.desc[i].sem == PM_SEM_COUNTER ? KIND_COUNTER : KIND_GAUGE;
        for (int j = 0; j < vs->numval; j++) {
            pmAtomValue a;
            if (pc.extract(vs->valfmt, &vs->vlist[j], pc.desc[i].type, &a, PM_TYPE_DOUBLE) < 0)
                continue;
            char name[NAME_LEN], *inst = NULL;
            if (pc.desc[i].indom != PM_INDOM_NULL && pc.name_in_dom &&
                pc.name_in_dom(pc.desc[i].indom, vs->vlist[j].inst, &inst) >= 0 && inst) {
                snprintf(name, sizeof name, "%s[%s]", pc.names[i], inst);
                free(inst);
            } else {
                snprintf(name, sizeof name, "%s", pc.names[i]);
            }
            /* 32-bit counters wrap at 2^32 (pmcd reports them as they are) */
            double wrap =
                pc.desc[i].type == PM_TYPE_32 || pc.desc[i].type == PM_TYPE_U32 ? 4294967296.0 : 0;
            put("pcp", name, pc.units[i], kind, wrap, a.d);
        }
    }
    pc.free_result(r);
}
#else
static void pcp_open(void)
{
    if (pw_opt.pcp && *pw_opt.pcp)
        absent("pcp", "perfweave was built without PCP's pmapi.h (install libpcp3-dev)");
}
static void sample_pcp(void) {}
#endif

/* ---- the timeline files ---- */

static void write_json(int final)
{
    pw_buf b = {0};
    pw_json j;
    pw_json_begin(&j, &b);
    pw_json_str(&j, "format", PW_TIMELINE_MAGIC);
    pw_json_int(&j, "version", PW_TIMELINE_VERSION);
    pw_json_str(&j, "host", nd.host);
    pw_json_int(&j, "pid", nd.pid);
    pw_json_int(&j, "interval_ms", pw_opt.node_interval);
    pw_json_bool(&j, "complete", final);
    pw_json_int(&j, "ticks", nd.ticks);
    pw_json_int(&j, "t_first", nd.t_first);
    pw_json_int(&j, "t_last", nd.t_last);
    pw_json_int(&j, "sampler_cpu_ns", nd.cpu_ns);
    pw_json_double(&j, "ns_per_tick", pw_ns_per_tick(), 9);
    pw_json_open(&j, "series", '[');
    for (int i = 0; i < nd.n; i++) {
        pw_json_open(&j, NULL, '{');
        pw_json_str(&j, "source", nd.s[i].source);
        pw_json_str(&j, "name", nd.s[i].name);
        pw_json_str(&j, "unit", nd.s[i].unit);
        pw_json_str(&j, "kind", nd.s[i].kind == KIND_COUNTER ? "counter" : "gauge");
        pw_json_close(&j);
    }
    pw_json_close(&j);
    pw_json_open(&j, "absent", '{');
    for (int i = 0; i < nd.nabsent; i++) {
        char src[64];
        const char *tab = strchr(nd.absent[i], '\t');
        size_t len = (size_t)(tab - nd.absent[i]) < sizeof src - 1 ? (size_t)(tab - nd.absent[i])
                                                                   : sizeof src - 1;
        memcpy(src, nd.absent[i], len);
        src[len] = 0;
        pw_json_str(&j, src, tab + 1);
    }
    pw_json_end(&j);
    char path[4400];
    if (pw_experiment_path(path, sizeof path, "timeline/", nd.host, ".json") == 0)
        pw_buf_to_file(&b, path);
    else
        pw_buf_free(&b);
    nd.described = nd.n;
}

static void tick(void)
{
    nd.nout = 0;
    int64_t t = pw_now();
    sample_nvml(); /* first: its energy counters are read closest to the tick's time */
    sample_net();
    if (ib_ports)
        sample_ib(0);
    if (rapl_zones)
        sample_rapl(0);
    sample_pcp();
    sample_procs();
    for (int i = 0; i < nd.nout; i++)
        nd.out[i].t = t;
    int err = nd.nout && nd.fd >= 0 ? pw_write_all(nd.fd, nd.out, nd.nout * sizeof *nd.out) : 0;
    if (err) {
        /* keep whole records only, and append no more: the file stays readable */
        off_t end = lseek(nd.fd, 0, SEEK_CUR);
        if (end > 0 && ftruncate(nd.fd, end - end % (off_t)sizeof *nd.out) != 0)
            err = errno;
        close(nd.fd);
        nd.fd = -1;
        char path[4400];
        pw_experiment_path(path, sizeof path, "timeline/", nd.host, ".values");
        pw_file_failed(path, err);
    }
    if (!nd.ticks)
        nd.t_first = t;
    nd.t_last = t;
    nd.ticks++;
    if (nd.n != nd.described)
        write_json(0);
}

/* The thread's own descriptor table. The files it opens every tick (/proc, /sys), its
 * output and those of PCP and NVML would otherwise take numbers in the program's table
 * while the program runs: a program that closes a descriptor and opens or dup2()s onto
 * its number (a shell redirecting output does) would then get another number, or EBUSY
 * from dup2 while the thread's open is under way. The private copy keeps nothing of the
 * program's (which must close when the program closes them) but stderr, for the
 * thread's start-up messages; 0 and 1 (and 2 after start-up: quiet_stderr) are
 * /dev/null there, so that the thread's own files never get the numbers its messages
 * are written to. Returns whether the thread has a table of its own. */
static int private_files(void)
{
    if (unshare(CLONE_FILES) != 0) {
        pw_debug("node timeline: no descriptor table of its own (%s)", strerror(errno));
        return 0;
    }
    /* Every descriptor of the copied table goes: one the thread kept would hold a pipe's
     * end open for ever (a program reading a pipe until EOF waits for good: seen as
     * Open MPI's singleton MPI_Init hanging on its daemon's pipe). close_range acts on
     * this thread's table; the fallback lists it through /proc/thread-self, never
     * /proc/self, which is the process's (the program's) table, not this copy. Fd 2 is
     * kept (its messages). */
    int all = 0;
#if defined(SYS_close_range)
    all = syscall(SYS_close_range, 3u, ~0u, 0u) == 0;
#endif
    close(0);
    close(1);
    DIR *d = all ? NULL : opendir("/proc/thread-self/fd");
    if (d) {
        int fds[512], n;
        do { /* closing while listing: list again */
            n = 0;
            rewinddir(d);
            struct dirent *e;
            while ((e = readdir(d)) && n < 512) {
                int fd = atoi(e->d_name);
                if (e->d_name[0] != '.' && fd != dirfd(d) && fd != 2)
                    fds[n++] = fd;
            }
            for (int i = 0; i < n; i++)
                close(fds[i]);
        } while (n == 512);
        closedir(d);
    }
    int null = open("/dev/null", O_RDWR); /* 0: the lowest free */
    if (null >= 0 && null != 1)
        dup2(null, 1);
    return 1;
}

/* stderr to /dev/null (0, in the thread's own table) once start-up is logged */
static void quiet_stderr(void) { dup2(0, 2); }

/* The child of a fork: the activity page is the parent's (the child's calls would be
 * added to the parent's time); the child keeps none. */
static void fork_child(void) { pw_act = NULL; }

static void *sampler(void *arg)
{
    (void)arg;
    pw_wrap_depth++; /* the runtime's thread: its reads of /proc are not the program's I/O */
    int own = private_files();
    char path[4400];
    pw_experiment_path(path, sizeof path, "timeline/", nd.host, ".values");
    nd.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (nd.fd < 0) {
        pw_file_failed(path, errno);
        return NULL;
    }
    nvml_open();
    pcp_open();
    sample_ib(1);
    sample_rapl(1);
    tick();
    write_json(0);
    if (own) /* never the program's stderr */
        quiet_stderr();
    struct timespec cpu;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int stopping = 0; !stopping;) {
        /* sleep until the next tick or until asked to stop */
        next.tv_sec += pw_opt.node_interval / 1000;
        next.tv_nsec += (long)(pw_opt.node_interval % 1000) * 1000000L;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_sec++;
            next.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&nd.lock);
        while (!nd.stopping && pthread_cond_timedwait(&nd.wake, &nd.lock, &next) != ETIMEDOUT)
            ;
        stopping = nd.stopping;
        pthread_mutex_unlock(&nd.lock);
        tick();
        struct timespec now; /* behind (a stalled machine): no burst to catch up */
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec))
            next = now;
    }
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
        nd.cpu_ns = (int64_t)cpu.tv_sec * 1000000000LL + cpu.tv_nsec;
    if (nv.lib && nv.shutdown && nv.n)
        nv.shutdown();
    write_json(1);
    return NULL;
}

/* The process ends: the node's sampler thread, if it is this process's, writes its
 * last tick and HOST.json (not from a signal handler: the thread is left to die). */
static int stop(int state, int in_signal)
{
    (void)state;
    if (in_signal || !nd.leader || nd.pid != getpid()) /* a forked child has no sampler */
        return 0;
    nd.leader = 0;
    pthread_mutex_lock(&nd.lock);
    nd.stopping = 1;
    pthread_cond_signal(&nd.wake);
    pthread_mutex_unlock(&nd.lock);
    pthread_join(nd.thread, NULL);
    return 0;
}

/* In the core's constructor (the process is measured): the activity page, and this
 * node's sampler thread if this is the node's first measured process. */
static void start(void)
{
    const char *exp = pw_experiment_dir();
    if (!pw_active || !exp || pw_opt.node_interval <= 0)
        return;
    snprintf(nd.host, sizeof nd.host, "%s", pw_hostname);
    char path[4400], line[32];
    if (pw_experiment_path(path, sizeof path, "timeline") != 0)
        return;
    mkdir(path, 0777);
    activity_create();
    pw_experiment_path(path, sizeof path, "timeline/", nd.host, ".pids");
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) {
        int n = snprintf(line, sizeof line, "%d\n", (int)getpid());
        err = pw_write_all(fd, line, (size_t)n);
        close(fd);
    }
    if (err)
        pw_file_failed(path, err);
    pw_experiment_path(path, sizeof path, "timeline/", nd.host, ".lock");
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno != EEXIST) /* else another process samples this node */
            pw_file_failed(path, errno);
        return;
    }
    close(fd);
    nd.s = calloc(MAX_SERIES, sizeof *nd.s);
    nd.out = calloc(MAX_SERIES, sizeof *nd.out);
    nd.hash = calloc(HASH_SLOTS, sizeof *nd.hash);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (!nd.s || !nd.out || !nd.hash || pthread_mutex_init(&nd.lock, NULL) != 0 ||
        pthread_cond_init(&nd.wake, &ca) != 0) {
        pw_log("node timeline disabled: out of memory");
        return;
    }
    nd.pid = getpid();
    /* the thread starts with every signal blocked: with the creator's mask, a signal the
     * program sends to the process could be handled by it before it blocks them */
    sigset_t all, mask;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &mask);
    int failed = pthread_create(&nd.thread, NULL, sampler, NULL) != 0;
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    if (failed) {
        pw_log("node timeline disabled: cannot start its thread");
        return;
    }
    /* the runtime's threads are named perfweave*: not the program's (the samples module
     * leaves them out of the threads it finds running at its start) */
    pthread_setname_np(nd.thread, "perfweave-node");
    nd.leader = 1;
}

const pw_module pw_module_timeline = {
    .name = "timeline",
    .version = PW_TIMELINE_VERSION,
    .start = start,
    .dump = stop,
    .fork_child = fork_child,
};
