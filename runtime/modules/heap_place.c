/*
 * Heap placement without code change (--place, docs/placement.md; heap_place.h): what
 * AutoHBW did with AUTO_HBW_SIZE (../shared/papers/memkind-autohbw-vasp.txt), plus rules
 * by call path, calloc judged by its total size, a byte cap with counted fallback, and a
 * read-back of where the memory went.
 *
 * Rules (pw_opt.place, ';' between them, the first that matches places):
 *   size=LO:HI   an allocation of LO..HI bytes in all (K, M, G, T: powers of 1024)
 *   site=NAME    one whose call path (PW_HEAP_DEPTH frames) passes through function NAME
 *                (a Fortran NAME_ or module procedure __M_MOD_NAME too)
 *   site=FILE:LINE,at=OBJECT@LO-HI+LO-HI...   one whose path has a return address on that
 *                line: the CLI reads the line's addresses (offsets in OBJECT) from the
 *                program's DWARF line table and appends at=
 *   each with ,tier=fast (the only tier) and ,policy=bind|preferred (default bind);
 *   cap=N        bytes all rules may hold placed at once; an allocation past it goes to
 *                the default allocator, counted as fallback.
 * The tier: pw_opt.tier_nodes ("fast=LIST": the CLI fills it from --tier-nodes,
 * MEMKIND_HBW_NODES or the machine's high-bandwidth nodes) and/or pw_opt.tier_emulate
 * ("hugepage": the arenas are backed by huge pages).
 *
 * Each rule has an arena of its own: a range of one PROT_NONE reservation mapped
 * read-write (guard gaps between arenas, so that each is a mapping of its own in
 * numa_maps and smaps), bound with mbind before any page is touched, advised
 * MADV_HUGEPAGE (or MAP_HUGETLB when enough huge pages are reserved) when emulating. A
 * block has a 64-byte head before it (magic, size class, rule, size, the process
 * generation that made it); sizes are rounded to four classes per power of two; freed
 * blocks go to a free list per class, a new one is cut from the arena's end (an aligned
 * allocation's at the next address its alignment allows: posix_memalign and friends, up
 * to PW_HEAP_MAX_ALIGN; docs/placement.md "Aligned allocations"); one spin
 * lock per arena (placed allocations are large and few). A pointer is an arena's by its
 * address: one range compare in free, realloc and malloc_usable_size.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elfsym.h"
#include "heap_place.h"
#include "pw.h"

#define HEAD 64
#define CLASSES 264
#define BLOCK_MAGIC 0x706c61636564ULL
#define FREE_MAGIC 0x66726565646dULL
#define GUARD ((size_t)PW_HEAP_ARENA_PAGE)
#define DEFAULT_ARENA (64UL << 30)
#define MAX_RANGES 8
#define FREE_SCAN 64 /* free blocks an aligned request looks through */
#define NAME_LEN 64
#define MPOL_F_NODE_ (1 << 0)
#define MPOL_F_ADDR_ (1 << 1)
#define MASK_WORDS 16 /* get_mempolicy's mask: 1024 nodes */

enum { KIND_SIZE, KIND_FUNCTION, KIND_LINE };
enum { POLICY_DEFAULT = 0, POLICY_PREFERRED = 1, POLICY_BIND = 2 };

typedef struct block {
    uint64_t magic; /* BLOCK_MAGIC ^ address, FREE_MAGIC ^ address when free */
    uint32_t cls;
    int32_t rule;
    uint64_t size;  /* asked; when free: the next free block */
    uint64_t csize; /* the class's bytes, head included */
    uint64_t gen;   /* the process generation that made it (fork: the parent's are not the
                       child's to count) */
    uint64_t unused[3];
} block;

typedef struct range {
    uint64_t lo, hi; /* offsets in the object, [lo, hi) */
} range;

typedef struct rule {
    int kind, policy, nranges;
    int64_t lo, hi;
    char name[NAME_LEN]; /* function, or the object's file name of a line rule */
    char text[PW_HEAP_RULE_TEXT];
    char object[MAX_RANGES][NAME_LEN]; /* the file name of each range's object */
    range ranges[MAX_RANGES];
} rule;

typedef struct arena {
    char *base;
    size_t len, used;
    int lock, hugetlb;
    uint64_t heads[CLASSES];
} arena;

int pw_heap_placing;
uintptr_t pw_heap_arena_lo, pw_heap_arena_hi;

static rule rules[PW_HEAP_MAX_RULES];
static arena arenas[PW_HEAP_MAX_RULES];
static int nrules, site_rules, emulate;
static int64_t cap;
static uint64_t tier_mask, gen = 1;
static pw_heap_header_rec *hdr;
static pw_heap_rule_rec *recs;
static pw_heap_placed_rec *placed;
static const pw_heap_site_rec *sites;
static const pw_heap_object_rec *objects;
static int max_sites;
/* Per site: bit r set when site rule r matches its call path; bit 15: worked out. */
static uint16_t *site_match;

static size_t page_up(size_t n, size_t page) { return (n + page - 1) / page * page; }

/* ---- parsing (at the start) ---- */

/* A size with an optional K/M/G/T (powers of 1024) and B; -1 if malformed. */
static int64_t parse_size(const char *s, const char *end)
{
    int64_t v = 0;
    const char *p = s;
    for (; p < end && *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (*p - '0');
    if (p == s)
        return -1;
    int shift = 0;
    if (p < end) {
        switch (*p | 0x20) {
        case 'k':
            shift = 10;
            break;
        case 'm':
            shift = 20;
            break;
        case 'g':
            shift = 30;
            break;
        case 't':
            shift = 40;
            break;
        default:
            return -1;
        }
        p++;
        if (p < end && (*p | 0x20) == 'i')
            p++;
        if (p < end && (*p | 0x20) == 'b')
            p++;
    }
    return p == end ? v << shift : -1;
}

static void copy_text(char *out, size_t cap_, const char *s, size_t n)
{
    if (n >= cap_)
        n = cap_ - 1;
    memcpy(out, s, n);
    out[n] = 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* at=OBJECT@LO-HI+LO-HI... (hex offsets) into r's ranges. */
static int parse_at(rule *r, const char *s, const char *end)
{
    const char *at = memchr(s, '@', (size_t)(end - s));
    if (!at)
        return -1;
    char object[NAME_LEN];
    copy_text(object, sizeof object, s, (size_t)(at - s));
    const char *p = at + 1;
    while (p < end && r->nranges < MAX_RANGES) {
        uint64_t v[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            const char *q = p;
            for (; p < end; p++) {
                int c = *p | 0x20, d = c >= '0' && c <= '9'   ? c - '0'
                                       : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                              : -1;
                if (d < 0)
                    break;
                v[k] = v[k] * 16 + (uint64_t)d;
            }
            if (p == q || (k == 0 && (p == end || *p++ != '-')))
                return -1;
        }
        memcpy(r->object[r->nranges], base_name(object), strlen(base_name(object)) + 1);
        r->ranges[r->nranges++] = (range){v[0], v[1]};
        if (p < end && *p++ != '+')
            return -1;
    }
    return 0;
}

/* One rule, s..end ("KEY=VALUE,KEY=VALUE"); 1 a rule, 0 a cap, -1 malformed. */
static int parse_rule(const char *s, const char *end, rule *r)
{
    memset(r, 0, sizeof *r);
    r->kind = -1;
    r->policy = POLICY_BIND;
    int is_cap = 0;
    while (s < end) {
        const char *comma = memchr(s, ',', (size_t)(end - s)), *stop = comma ? comma : end;
        const char *eq = memchr(s, '=', (size_t)(stop - s));
        if (!eq)
            return -1;
        size_t klen = (size_t)(eq - s);
        const char *v = eq + 1;
        if (klen == 4 && !memcmp(s, "size", 4)) {
            const char *colon = memchr(v, ':', (size_t)(stop - v));
            r->kind = KIND_SIZE;
            r->lo = colon ? parse_size(v, colon) : -1;
            r->hi = colon ? parse_size(colon + 1, stop) : -1;
            if (r->lo < 0 || r->hi < r->lo)
                return -1;
            copy_text(r->text, sizeof r->text, v, (size_t)(stop - v));
        } else if (klen == 4 && !memcmp(s, "site", 4)) {
            const char *colon = memchr(v, ':', (size_t)(stop - v));
            r->kind = colon ? KIND_LINE : KIND_FUNCTION;
            copy_text(r->text, sizeof r->text, v, (size_t)(stop - v));
            copy_text(r->name, sizeof r->name, v, (size_t)(stop - v));
        } else if (klen == 2 && !memcmp(s, "at", 2)) {
            if (parse_at(r, v, end) != 0)
                return -1;
            stop = end; /* at= is the rule's last part */
        } else if (klen == 4 && !memcmp(s, "tier", 4)) {
            if (stop - v != 4 || memcmp(v, "fast", 4))
                return -1;
        } else if (klen == 6 && !memcmp(s, "policy", 6)) {
            if (stop - v == 4 && !memcmp(v, "bind", 4))
                r->policy = POLICY_BIND;
            else if (stop - v == 9 && !memcmp(v, "preferred", 9))
                r->policy = POLICY_PREFERRED;
            else
                return -1;
        } else if (klen == 3 && !memcmp(s, "cap", 3)) {
            int64_t c = parse_size(v, stop);
            if (c < 0)
                return -1;
            cap = cap && cap < c ? cap : c;
            is_cap = 1;
        } else
            return -1;
        s = stop < end ? stop + 1 : end;
    }
    if (r->kind < 0)
        return is_cap ? 0 : -1;
    return 1;
}

/* "fast=0,2-3" into a node mask; -1 if malformed or a node past 63. */
static int parse_nodes(const char *s, uint64_t *mask)
{
    *mask = 0;
    if (!s || !*s)
        return 0;
    if (strncmp(s, "fast=", 5))
        return -1;
    s += 5;
    while (*s) {
        int a = 0, b, digits = 0;
        for (; *s >= '0' && *s <= '9'; s++, digits++)
            a = a * 10 + (*s - '0');
        b = a;
        if (*s == '-') {
            s++;
            b = 0;
            for (; *s >= '0' && *s <= '9'; s++)
                b = b * 10 + (*s - '0');
        }
        if (!digits || a > b || b > 63)
            return -1;
        for (int n = a; n <= b; n++)
            *mask |= 1ULL << n;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return 0;
}

/* Function rules: each function of that name (NAME, Fortran's NAME_ and __M_MOD_NAME)
 * in a loaded object, as (object file name, offsets). */
static int name_matches(const char *fn, const char *want)
{
    size_t n = strlen(want), m = strlen(fn);
    if (!strcmp(fn, want))
        return 1;
    if (m == n + 1 && fn[n] == '_' && !strncmp(fn, want, n))
        return 1;
    return m > n + 5 && !strcmp(fn + m - n, want) && !strncmp(fn + m - n - 5, "_MOD_", 5);
}

static void add_function(const char *name, uintptr_t addr, size_t size, void *arg)
{
    (void)arg;
    for (int i = 0; i < nrules; i++) {
        rule *r = &rules[i];
        uint64_t off;
        int o;
        if (r->kind != KIND_FUNCTION || r->nranges >= MAX_RANGES || !name_matches(name, r->name) ||
            (o = pw_object_of(addr, &off)) < 0)
            continue;
        const char *file = base_name(pw_object_path(o));
        copy_text(r->object[r->nranges], NAME_LEN, file, strlen(file));
        r->ranges[r->nranges++] = (range){off, off + (size ? size : 1)};
    }
}

/* Reserved huge pages free, bytes (/proc/meminfo). */
static size_t hugetlb_free(void)
{
    char buf[4096];
    int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *f = strstr(buf, "HugePages_Free:"), *z = strstr(buf, "Hugepagesize:");
    if (!f || !z)
        return 0;
    size_t pages = 0, kb = 0;
    for (f += 15; *f == ' '; f++)
        ;
    for (; *f >= '0' && *f <= '9'; f++)
        pages = pages * 10 + (size_t)(*f - '0');
    for (z += 13; *z == ' '; z++)
        ;
    for (; *z >= '0' && *z <= '9'; z++)
        kb = kb * 10 + (size_t)(*z - '0');
    return kb == 2048 ? pages * kb * 1024 : 0; /* arenas are aligned to 2 MiB only */
}

static int map_arenas(void)
{
    size_t len =
        cap ? page_up((size_t)cap + (size_t)cap / PW_HEAP_ARENA_SHARE + (size_t)PW_HEAP_ARENA_SLACK,
                      GUARD)
            : DEFAULT_ARENA;
    size_t total = 0;
    char *res = MAP_FAILED;
    for (; len >= GUARD * 16 && res == MAP_FAILED; len /= 2) { /* a smaller one if refused */
        total = (size_t)nrules * (len + GUARD) + GUARD;
        res = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (res != MAP_FAILED)
            break;
    }
    if (res == MAP_FAILED)
        return -1;
    char *base = (char *)page_up((uintptr_t)res, GUARD);
    size_t huge_left = emulate ? hugetlb_free() : 0;
    for (int i = 0; i < nrules; i++) {
        arena *a = &arenas[i];
        a->base = base + (size_t)i * (len + GUARD);
        a->len = len;
        int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, huge = huge_left >= len;
        void *m = mmap(a->base, len, PROT_READ | PROT_WRITE,
                       flags | (huge ? MAP_HUGETLB : MAP_NORESERVE), -1, 0);
        if (m == MAP_FAILED && huge) {
            huge = 0;
            m = mmap(a->base, len, PROT_READ | PROT_WRITE, flags | MAP_NORESERVE, -1, 0);
        }
        if (m == MAP_FAILED)
            return -1;
        a->hugetlb = huge;
        huge_left -= huge ? len : 0;
        if (emulate && !huge)
            madvise(a->base, len, MADV_HUGEPAGE);
        if (tier_mask) {
            unsigned long mask[MASK_WORDS] = {tier_mask};
            if (syscall(SYS_mbind, a->base, len, rules[i].policy, mask, MASK_WORDS * 64 + 1, 0) !=
                0) {
                pw_log("heap: --place: mbind to the fast tier's nodes failed: nothing placed");
                return -1;
            }
        }
    }
    pw_heap_arena_lo = (uintptr_t)arenas[0].base;
    pw_heap_arena_hi = (uintptr_t)arenas[nrules - 1].base + len;
    return 0;
}

static int start_rules(void)
{
    const char *s = pw_opt.place;
    if (!s || !*s)
        return 0;
    while (*s) {
        const char *semi = strchr(s, ';'), *end = semi ? semi : s + strlen(s);
        if (end > s) {
            if (nrules == PW_HEAP_MAX_RULES) {
                pw_log("heap: --place: more than %d rules", PW_HEAP_MAX_RULES);
                return -1;
            }
            int k = parse_rule(s, end, &rules[nrules]);
            if (k < 0) {
                pw_log("heap: --place: '%.*s': not a rule", (int)(end - s), s);
                return -1;
            }
            nrules += k;
        }
        s = semi ? semi + 1 : end;
    }
    if (parse_nodes(pw_opt.tier_nodes, &tier_mask) != 0) {
        pw_log("heap: --tier-nodes '%s': not fast=LIST of nodes 0-63", pw_opt.tier_nodes);
        return -1;
    }
    emulate = pw_opt.tier_emulate && !strcmp(pw_opt.tier_emulate, "hugepage");
    if (!nrules)
        return 0;
    if (!tier_mask && !emulate) {
        pw_log("heap: --place: no fast tier (no --tier-nodes, none detected, no --tier-emulate)");
        return -1;
    }
    for (int i = 0; i < nrules; i++) {
        site_rules += rules[i].kind != KIND_SIZE;
        if (!tier_mask)
            rules[i].policy = POLICY_DEFAULT;
    }
    if (site_rules)
        for (int i = 0; i < nrules; i++)
            if (rules[i].kind == KIND_FUNCTION) {
                pw_objects_refresh(); /* the core takes its snapshot after the starts */
                pw_elf_functions(add_function, NULL);
                break;
            }
    if (map_arenas() != 0) {
        pw_log("heap: --place: cannot map the placement arenas: nothing placed");
        return -1;
    }
    return 0;
}

int pw_heap_place_start(void)
{
    if (start_rules() == 0)
        return 0;
    nrules = 0;
    return -1;
}

size_t pw_heap_place_len(int nsites)
{
    if (!nrules)
        return 0;
    return page_up(sizeof(pw_heap_rule_rec) * PW_HEAP_MAX_RULES, 4096) +
           page_up(sizeof(pw_heap_placed_rec) * (size_t)nsites, 4096);
}

void pw_heap_place_attach(pw_heap_header_rec *h, char *at, int nsites, const char *from,
                          const pw_heap_site_rec *s, const pw_heap_object_rec *o)
{
    if (!nrules)
        return;
    size_t rules_len = page_up(sizeof(pw_heap_rule_rec) * PW_HEAP_MAX_RULES, 4096);
    pw_heap_rule_rec *r = (pw_heap_rule_rec *)at;
    placed = (pw_heap_placed_rec *)(at + rules_len);
    for (int i = 0; i < nsites; i++)
        placed[i].rule = -1;
    for (int i = 0; i < nrules; i++) {
        if (from) { /* the parent's rules and arenas, not its counts */
            const pw_heap_rule_rec *p = &((const pw_heap_rule_rec *)from)[i];
            memcpy(r[i].text, p->text, sizeof r[i].text);
        } else
            memcpy(r[i].text, rules[i].text, strlen(rules[i].text) + 1);
        r[i].kind = rules[i].kind;
        r[i].policy = rules[i].policy;
        r[i].lo = rules[i].kind == KIND_SIZE ? rules[i].lo : 0;
        r[i].hi = rules[i].kind == KIND_SIZE ? rules[i].hi : 0;
        r[i].arena_len = (int64_t)arenas[i].len;
        r[i].hugetlb = arenas[i].hugetlb;
        r[i].read_policy = -1;
    }
    if (!site_match && site_rules)
        site_match = mmap(NULL, sizeof *site_match * (size_t)nsites, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (site_match == MAP_FAILED)
        site_match = NULL;
    h->nrules = nrules;
    h->place_emulate = emulate;
    h->place_cap = cap;
    h->tier_nodes = tier_mask;
    max_sites = nsites;
    sites = s;
    objects = o;
    recs = r;
    __atomic_store_n(&hdr, h, __ATOMIC_RELEASE);
    __atomic_store_n(&pw_heap_placing, 1, __ATOMIC_RELEASE);
}

void pw_heap_place_child(void)
{
    gen++;
    for (int i = 0; i < nrules; i++)
        arenas[i].lock = 0;
}

/* ---- placing ---- */

static void spin_lock(int *l)
{
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}
static void spin_unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* The class of a block of `total` bytes (head included) and its size: four per power of
 * two, multiples of 64. */
static int class_of(uint64_t total, uint64_t *csize)
{
    if (total <= 64) {
        *csize = 64;
        return 0;
    }
    int k = 63 - __builtin_clzll(total - 1); /* 2^k < total <= 2^(k+1) */
    uint64_t step = k >= 8 ? 1ULL << (k - 2) : 64;
    *csize = (total + step - 1) / step * step;
    return 4 * k + (int)((*csize - (1ULL << k)) / step);
}

/* Site s's call path against rule r (lazily, once per site). */
static int line_or_function(const rule *r, const pw_heap_site_rec *s)
{
    for (int k = 0; k < s->depth && k < PW_HEAP_DEPTH; k++) {
        int o = s->object[k];
        if (o < 0)
            continue;
        const char *file = base_name(objects[o].path);
        uint64_t pc = (uint64_t)s->offset[k] - 1; /* in the call instruction */
        for (int j = 0; j < r->nranges; j++)
            if (pc >= r->ranges[j].lo && pc < r->ranges[j].hi && !strcmp(file, r->object[j]))
                return 1;
    }
    return 0;
}

static int site_matches(int r, int site)
{
    if (site < 0 || site >= max_sites || !sites[site].path_hash)
        return 0;
    uint16_t m = site_match ? __atomic_load_n(&site_match[site], __ATOMIC_RELAXED) : 0;
    if (!(m & 0x8000)) {
        m = 0x8000;
        for (int i = 0; i < nrules && i < 15; i++)
            if (rules[i].kind != KIND_SIZE && line_or_function(&rules[i], &sites[site]))
                m |= (uint16_t)(1u << i);
        if (site_match)
            __atomic_store_n(&site_match[site], m, __ATOMIC_RELAXED);
    }
    return (m >> r) & 1;
}

static int match(size_t n, int site)
{
    for (int i = 0; i < nrules; i++)
        if (rules[i].kind == KIND_SIZE ? (int64_t)n >= rules[i].lo && (int64_t)n <= rules[i].hi
                                       : site_matches(i, site))
            return i;
    return -1;
}

static int cap_take(int64_t n)
{
    int64_t cur = __atomic_load_n(&hdr->place_live, __ATOMIC_RELAXED);
    do
        if (cap && cur + n > cap)
            return 0;
    while (!__atomic_compare_exchange_n(&hdr->place_live, &cur, cur + n, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
    int64_t peak = __atomic_load_n(&hdr->place_peak, __ATOMIC_RELAXED);
    while (cur + n > peak && !__atomic_compare_exchange_n(&hdr->place_peak, &peak, cur + n, 1,
                                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return 1;
}

static void add(int64_t *p, int64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }

/* A block of class cls (csize bytes) from arena a whose data (after its head) is aligned
 * to `align` (a power of two; blocks are 64-byte aligned, so any align <= 64 is every
 * block's): the first such block of the class's free list (among its first FREE_SCAN),
 * else one cut from the arena's end at the next aligned address (the bytes skipped stay
 * unused: address space, never touched); *fresh: never handed out before. */
static block *arena_get(arena *a, int cls, uint64_t csize, uint64_t align, int *fresh)
{
    block *b = NULL;
    spin_lock(&a->lock);
    uint64_t *link = &a->heads[cls];
    for (int k = 0; *link && k < FREE_SCAN; k++) {
        block *f = (block *)(uintptr_t)*link;
        if (!(((uintptr_t)f + HEAD) & (align - 1))) {
            *link = f->size;
            b = f;
            *fresh = 0;
            break;
        }
        link = &f->size;
    }
    uintptr_t end = (uintptr_t)a->base + a->used;
    size_t at =
        (size_t)(((end + HEAD + align - 1) & ~(uintptr_t)(align - 1)) - HEAD - (uintptr_t)a->base);
    if (!b && at <= a->len && csize <= a->len - at) {
        b = (block *)(a->base + at);
        a->used = at + csize;
        *fresh = 1;
    }
    spin_unlock(&a->lock);
    return b;
}

/* A fallback of n bytes counted for rule r and site ps (align: for its alignment). */
static void fell_back(pw_heap_rule_rec *rec, pw_heap_placed_rec *ps, size_t n, int align)
{
    add(&rec->fallback_count, 1);
    add(&rec->fallback_bytes, (int64_t)n);
    if (align) {
        add(&rec->align_fallback_count, 1);
        add(&rec->align_fallback_bytes, (int64_t)n);
    }
    if (ps) {
        add(&ps->fallback_count, 1);
        add(&ps->fallback_bytes, (int64_t)n);
    }
}

/* n bytes asked (what the rules judge and the counts hold) in a block of `size` usable
 * bytes whose data is aligned to `align` (a power of two), from the arena of the rule
 * that matches; NULL when none matches, or counted as a fallback. */
static void *place(size_t n, size_t size, size_t align, int zero, int site)
{
    int r = match(n, site);
    if (r < 0 || !hdr)
        return NULL;
    pw_heap_rule_rec *rec = &recs[r];
    pw_heap_placed_rec *ps = site >= 0 && site < max_sites ? &placed[site] : NULL;
    if (ps)
        __atomic_store_n(&ps->rule, r, __ATOMIC_RELAXED);
    uint64_t csize;
    int cls = size < (1ULL << 46) ? class_of((uint64_t)size + HEAD, &csize) : -1, fresh = 0;
    block *b = NULL;
    if (cls >= 0 && cls < CLASSES && cap_take((int64_t)n)) {
        b = arena_get(&arenas[r], cls, csize, align < HEAD ? HEAD : align, &fresh);
        if (!b)
            add(&hdr->place_live, -(int64_t)n);
    }
    if (!b) {
        fell_back(rec, ps, n, 0);
        return NULL;
    }
    b->magic = BLOCK_MAGIC ^ (uintptr_t)b;
    b->cls = (uint32_t)cls;
    b->rule = r;
    b->size = n;
    b->csize = csize;
    b->gen = gen;
    void *p = (char *)b + HEAD;
    if (zero && !fresh)
        memset(p, 0, n);
    add(&rec->count, 1);
    add(&rec->bytes, (int64_t)n);
    int64_t live = __atomic_add_fetch(&rec->live, (int64_t)n, __ATOMIC_RELAXED);
    int64_t peak = __atomic_load_n(&rec->peak, __ATOMIC_RELAXED);
    while (live > peak && !__atomic_compare_exchange_n(&rec->peak, &peak, live, 1, __ATOMIC_RELAXED,
                                                       __ATOMIC_RELAXED))
        ;
    int64_t used = (int64_t)(((char *)b + csize) - arenas[r].base);
    int64_t was = __atomic_load_n(&rec->arena_used, __ATOMIC_RELAXED);
    while (used > was && !__atomic_compare_exchange_n(&rec->arena_used, &was, used, 1,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    if (ps) {
        add(&ps->count, 1);
        add(&ps->bytes, (int64_t)n);
    }
    return p;
}

void *pw_heap_place_alloc(size_t n, int zero, int site) { return place(n, n, HEAD, zero, site); }

void *pw_heap_place_aligned(size_t n, size_t size, size_t align, int site)
{
    return place(n, size, align, 0, site);
}

int pw_heap_place_takes(size_t align, size_t n, int posix, int pages, size_t *size)
{
    size_t page = (size_t)getpagesize();
    *size = n;
    if (pages && __builtin_add_overflow(n, page - 1, size))
        return 0;
    *size = pages ? *size / page * page : n;
    return align && !(align & (align - 1)) && align <= (size_t)PW_HEAP_MAX_ALIGN &&
           (!posix || align % sizeof(void *) == 0);
}

void pw_heap_place_unaligned(size_t n, int site)
{
    int r = match(n, site);
    if (r < 0 || !hdr)
        return;
    pw_heap_placed_rec *ps = site >= 0 && site < max_sites ? &placed[site] : NULL;
    if (ps)
        __atomic_store_n(&ps->rule, r, __ATOMIC_RELAXED);
    fell_back(&recs[r], ps, n, 1);
}

static block *block_of(const void *p)
{
    block *b = (block *)((char *)p - HEAD);
    return b->magic == (BLOCK_MAGIC ^ (uintptr_t)b) ? b : NULL;
}

size_t pw_heap_place_usable(const void *p)
{
    block *b = block_of(p);
    return b ? b->csize - HEAD : 0;
}

void pw_heap_place_free(void *p)
{
    block *b = block_of(p);
    if (!b || b->rule < 0 || b->rule >= nrules)
        return; /* not a live block (a double free, or overwritten): left alone */
    arena *a = &arenas[b->rule];
    if (b->gen == gen && hdr) {
        pw_heap_rule_rec *rec = &recs[b->rule];
        add(&rec->frees, 1);
        add(&rec->live, -(int64_t)b->size);
        add(&hdr->place_live, -(int64_t)b->size);
    }
    spin_lock(&a->lock);
    b->magic = FREE_MAGIC ^ (uintptr_t)b;
    b->size = a->heads[b->cls];
    a->heads[b->cls] = (uint64_t)(uintptr_t)b;
    spin_unlock(&a->lock);
}

/* ---- the read-back (at the dump; async-signal-safe: system calls, open and read) ---- */

static int in_tier(int node) { return node >= 0 && node < 64 && (tier_mask >> node & 1); }

/* Present pages of arena i and their nodes (move_pages without target nodes: it moves
 * nothing and faults nothing in), the node of one present page in each eighth
 * (get_mempolicy MPOL_F_NODE|MPOL_F_ADDR: the page is present, so it is not touched). */
static void read_pages(int i, pw_heap_rule_rec *rec)
{
    enum { CHUNK = 256 };
    const size_t page = 4096;
    arena *a = &arenas[i];
    size_t npages = (size_t)rec->arena_used / page;
    void *addr[CHUNK];
    int status[CHUNK], sampled = 0;
    for (size_t at = 0; at < npages; at += CHUNK) {
        size_t n = npages - at < CHUNK ? npages - at : CHUNK;
        for (size_t k = 0; k < n; k++)
            addr[k] = a->base + (at + k) * page;
        if (syscall(SYS_move_pages, 0, n, addr, NULL, status, 0) != 0)
            return;
        for (size_t k = 0; k < n; k++) {
            if (status[k] < 0)
                continue;
            rec->resident += (int64_t)page;
            if (!tier_mask || in_tier(status[k]))
                rec->on_tier += (int64_t)page;
            int eighth = (int)((at + k) * 8 / npages);
            if (eighth >= sampled && sampled < 8) {
                int node = -1;
                if (syscall(SYS_get_mempolicy, &node, NULL, 0, addr[k],
                            MPOL_F_NODE_ | MPOL_F_ADDR_) == 0) {
                    rec->sampled++;
                    rec->sampled_on_tier += !tier_mask || in_tier(node);
                }
                sampled = eighth + 1;
            }
        }
    }
}

static uint64_t hex(const char **s)
{
    uint64_t v = 0;
    for (;; (*s)++) {
        int c = **s | 0x20, d = c >= '0' && c <= '9'   ? c - '0'
                                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                       : -1;
        if (d < 0)
            return v;
        v = v * 16 + (uint64_t)d;
    }
}

static int64_t dec(const char *s)
{
    int64_t v = 0;
    for (; *s == ' '; s++)
        ;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (*s - '0');
    return v;
}

/* The arena whose range holds addr; -1 none. */
static int arena_at(uint64_t addr)
{
    for (int i = 0; i < nrules; i++)
        if (addr >= (uint64_t)(uintptr_t)arenas[i].base &&
            addr < (uint64_t)(uintptr_t)arenas[i].base + arenas[i].len)
            return i;
    return -1;
}

/* A numa_maps line: "START POLICY key=value ... N0=PAGES ... kernelpagesize_kB=K". */
static void numa_maps_line(char *line, int *current)
{
    (void)current;
    const char *s = line;
    int i = arena_at(hex(&s));
    if (i < 0 || *s != ' ')
        return;
    pw_heap_rule_rec *rec = &recs[i];
    const char *policy = ++s;
    while (*s && *s != ' ')
        s++;
    if (!rec->numa_maps_lines++)
        copy_text(rec->numa_policy, sizeof rec->numa_policy, policy, (size_t)(s - policy));
    int64_t kb = 4, pages_on = 0;
    const char *k = strstr(s, "kernelpagesize_kB=");
    if (k)
        kb = dec(k + 18);
    for (const char *t = s; (t = strstr(t, " N")) != NULL;) {
        t += 2;
        if (*t < '0' || *t > '9')
            continue;
        int node = (int)dec(t);
        const char *eq = strchr(t, '=');
        if (eq && (!tier_mask || in_tier(node)))
            pages_on += dec(eq + 1);
    }
    rec->numa_maps_bytes += pages_on * kb * 1024;
}

/* A smaps line: a mapping's "START-END ..." head, or "AnonHugePages: N kB". */
static void smaps_line(char *line, int *current)
{
    const char *s = line;
    uint64_t start = hex(&s);
    if (*s == '-' && s != line) {
        *current = arena_at(start);
        return;
    }
    if (*current < 0)
        return;
    if (!strncmp(line, "AnonHugePages:", 14))
        recs[*current].huge_bytes += dec(line + 14) * 1024;
    else if (!strncmp(line, "Private_Hugetlb:", 16))
        recs[*current].huge_bytes += dec(line + 16) * 1024;
}

static char file_buf[65536];

static void each_line(const char *path, void (*fn)(char *, int *))
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), current = -1;
    if (fd < 0)
        return;
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, file_buf + have, sizeof file_buf - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        file_buf[have] = 0;
        char *line = file_buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = 0;
            fn(line, &current);
            line = nl + 1;
        }
        have = (size_t)(file_buf + have - line);
        if (have == sizeof file_buf - 1) /* a line longer than the buffer: dropped */
            have = 0;
        memmove(file_buf, line, have);
    }
    close(fd);
}

void pw_heap_place_verify(void)
{
    if (!nrules || !hdr)
        return;
    for (int i = 0; i < nrules; i++) {
        pw_heap_rule_rec *rec = &recs[i];
        unsigned long mask[MASK_WORDS] = {0};
        int mode = -1;
        rec->resident = rec->on_tier = rec->numa_maps_bytes = rec->huge_bytes = 0;
        rec->sampled = rec->sampled_on_tier = rec->numa_maps_lines = 0;
        if (syscall(SYS_get_mempolicy, &mode, mask, MASK_WORDS * 64, arenas[i].base,
                    MPOL_F_ADDR_) == 0) {
            rec->read_policy = mode;
            rec->read_nodes = mask[0];
        }
        read_pages(i, rec);
    }
    each_line("/proc/self/numa_maps", numa_maps_line);
    each_line("/proc/self/smaps", smaps_line);
    for (int i = 0; i < nrules; i++)
        recs[i].verified = 1;
    hdr = NULL; /* what the program does after this is not the run's */
}
