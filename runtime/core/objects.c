/*
 * Snapshot of the process's loaded objects (executable, shared libraries), so
 * that a code address becomes (object, offset from the object's load base).
 * Offsets are what addr2line and DWARF expect for the file, and are the same on
 * every rank whatever address-space randomisation did.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pw.h"

#define PW_MAX_OBJECTS 1024
#define PW_PATHS_BYTES (256 * 1024)

typedef struct object {
    uintptr_t start, end, base;
    int path, buildid; /* offsets into the string pool */
} object;

typedef struct snapshot {
    object obj[PW_MAX_OBJECTS];
    int n;
    size_t used;
    char pool[PW_PATHS_BYTES];
} snapshot;

/* Two snapshots: a refresh fills the spare one, then publishes it. */
static snapshot *snaps[2];
static snapshot *volatile current;

static int pool_add(snapshot *s, const char *str)
{
    size_t len = strlen(str) + 1;
    if (s->used + len > sizeof s->pool)
        return 0; /* offset 0 is always "" */
    memcpy(s->pool + s->used, str, len);
    s->used += len;
    return (int)(s->used - len);
}

static void hex(char *out, const unsigned char *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = 0;
}

static void find_buildid(struct dl_phdr_info *info, char *out, size_t outsz)
{
    out[0] = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
        const char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const char *name = p + sizeof *nh;
            const unsigned char *desc = (const unsigned char *)(name + ((nh->n_namesz + 3) & ~3u));
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                2 * nh->n_descsz + 1 <= outsz) {
                hex(out, desc, nh->n_descsz);
                return;
            }
            p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
}

static int add_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    snapshot *s = data;
    if (s->n >= PW_MAX_OBJECTS)
        return 1;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (hi <= lo)
        return 0;
    char path[4096];
    const char *name = info->dlpi_name;
    if (!name || !*name) { /* the main executable */
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        path[n > 0 ? n : 0] = 0;
        name = path;
    }
    char bid[128];
    find_buildid(info, bid, sizeof bid);
    object *o = &s->obj[s->n++];
    o->start = lo;
    o->end = hi;
    o->base = info->dlpi_addr;
    o->path = pool_add(s, name);
    o->buildid = pool_add(s, bid);
    return 0;
}

static int by_start(const void *a, const void *b)
{
    const object *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

void pw_objects_refresh(void)
{
    snapshot *s = snaps[0] == current ? snaps[1] : snaps[0];
    if (!s) {
        s = pw_alloc(sizeof *s);
        if (!s)
            return;
        if (!snaps[0])
            snaps[0] = s;
        else
            snaps[1] = s;
    }
    s->n = 0;
    s->used = 1;
    s->pool[0] = 0;
    dl_iterate_phdr(add_object, s);
    qsort(s->obj, (size_t)s->n, sizeof *s->obj, by_start);
    __atomic_store_n(&current, s, __ATOMIC_RELEASE);
    pw_tables_describe(); /* the tables file's description lists them */
}

int pw_object_of(uintptr_t addr, uint64_t *offset)
{
    snapshot *s = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
    if (!s)
        return -1;
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const object *o = &s->obj[mid];
        if (addr < o->start)
            hi = mid - 1;
        else if (addr >= o->end)
            lo = mid + 1;
        else {
            *offset = addr - o->base;
            return mid;
        }
    }
    return -1;
}

int pw_objects_count(void)
{
    snapshot *s = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
    return s ? s->n : 0;
}

const char *pw_object_path(int i)
{
    snapshot *s = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
    return s && i >= 0 && i < s->n ? s->pool + s->obj[i].path : "";
}

const char *pw_object_buildid(int i)
{
    snapshot *s = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
    return s && i >= 0 && i < s->n ? s->pool + s->obj[i].buildid : "";
}

void pw_object_range(int i, uintptr_t *start, uintptr_t *end, uintptr_t *base)
{
    snapshot *s = __atomic_load_n(&current, __ATOMIC_ACQUIRE);
    *start = *end = *base = 0;
    if (s && i >= 0 && i < s->n) {
        *start = s->obj[i].start;
        *end = s->obj[i].end;
        *base = s->obj[i].base;
    }
}

void pw_objects_json(pw_json *j, const char *key)
{
    pw_json_open(j, key, '[');
    for (int i = 0; i < pw_objects_count(); i++) {
        pw_json_open(j, NULL, '[');
        pw_json_str(j, NULL, pw_object_path(i));
        pw_json_str(j, NULL, pw_object_buildid(i));
        pw_json_close(j);
    }
    pw_json_close(j);
}

void pw_objects_ranges_json(pw_json *j, const char *key)
{
    pw_json_open(j, key, '[');
    for (int i = 0; i < pw_objects_count(); i++) {
        uintptr_t s, e, base;
        pw_object_range(i, &s, &e, &base);
        pw_json_open(j, NULL, '{');
        pw_json_str(j, "path", pw_object_path(i));
        pw_json_str(j, "buildid", pw_object_buildid(i));
        pw_json_int(j, "start", (int64_t)s);
        pw_json_int(j, "end", (int64_t)e);
        pw_json_int(j, "base", (int64_t)base);
        pw_json_close(j);
    }
    pw_json_close(j);
}
