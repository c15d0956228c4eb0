/*
 * A fake libnvidia-ml.so.1 for tests/runtime/test_gpu_nvml.py: two GPUs whose readings are
 * known by construction. GPU i (i = 0, 1):
 *   instantaneous power (field NVML_FI_DEV_POWER_INSTANT, 186)  150 + 100 i W
 *   nvmlDeviceGetPowerUsage (the driver's 1 s average)           999 W (never the one shown
 *                                                                 where the field exists)
 *   total energy                 (150 + 100 i) W x the time since nvmlInit, in mJ
 *   utilisation gpu / memory     40 + i % / 20 + i %
 *   memory used                  (1 + i) GiB
 *   SM / memory clock            1410 + i / 1593 + i MHz
 * FAKE_NVML_NO_INSTANT=1: the field is not supported (NVML_ERROR_NOT_SUPPORTED), and
 * nvmlDeviceGetPowerUsage returns 120 + 100 i W. The C ABI is NVML's (docs/gpu.md).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    unsigned int gpu, memory;
} util_t;
typedef struct {
    unsigned long long total, free, used;
} mem_t;
typedef struct {
    unsigned int field_id, scope_id;
    long long timestamp, latency_us;
    int value_type, rc;
    union {
        double d;
        unsigned int ui;
        unsigned long long ull;
    } value;
} field_t;

static struct timespec t0;
static long dev_id[2] = {0, 1};

static int no_instant(void)
{
    const char *e = getenv("FAKE_NVML_NO_INSTANT");
    return e && *e == '1';
}
static int idx(void *dev) { return (int)(*(long *)dev); }
static double watts(int i) { return 150.0 + 100.0 * i; }

int nvmlInit_v2(void)
{
    clock_gettime(CLOCK_MONOTONIC, &t0);
    return 0;
}
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = 2;
    return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **dev)
{
    if (i >= 2)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *dev = &dev_id[i];
    return 0;
}
int nvmlDeviceGetFieldValues(void *dev, int n, field_t *values)
{
    for (int k = 0; k < n; k++) {
        field_t *f = &values[k];
        if (f->field_id != 186 || no_instant()) {
            f->rc = 3; /* NVML_ERROR_NOT_SUPPORTED */
            continue;
        }
        f->rc = 0;
        f->value_type = 1; /* unsigned int */
        f->value.ui = (unsigned int)(watts(idx(dev)) * 1000);
    }
    return 0;
}
int nvmlDeviceGetPowerUsage(void *dev, unsigned int *mw)
{
    *mw = no_instant() ? (unsigned int)((watts(idx(dev)) - 30) * 1000) : 999000u;
    return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *mj)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double s = (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
    *mj = (unsigned long long)(watts(idx(dev)) * s * 1000);
    return 0;
}
int nvmlDeviceGetUtilizationRates(void *dev, util_t *u)
{
    u->gpu = 40u + (unsigned)idx(dev);
    u->memory = 20u + (unsigned)idx(dev);
    return 0;
}
int nvmlDeviceGetMemoryInfo(void *dev, mem_t *m)
{
    m->total = 80ULL << 30;
    m->used = (unsigned long long)(1 + idx(dev)) << 30;
    m->free = m->total - m->used;
    return 0;
}
int nvmlDeviceGetClockInfo(void *dev, int type, unsigned int *mhz)
{
    if (type == 1) /* NVML_CLOCK_SM */
        *mhz = 1410u + (unsigned)idx(dev);
    else if (type == 2) /* NVML_CLOCK_MEM */
        *mhz = 1593u + (unsigned)idx(dev);
    else
        return 2;
    return 0;
}
