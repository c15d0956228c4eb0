/*
 * The heap module's unwinder of a new call path (heap_unwind.h). libgcc's backtrace()
 * looks each frame's FDE up (dl_iterate_phdr, a binary search) and runs its call-frame
 * instructions on every unwind: microseconds per path. Here the outcome of that work for
 * one return address, its frame's rule at the call (the CFA is rsp or rbp plus an offset,
 * the return address lies at CFA - 8, the caller's rbp at CFA + n or unchanged), is
 * computed once from .eh_frame (the System V x86-64 ABI's and DWARF 5's section 6.4 rules)
 * and kept in a table keyed by the return address; a walk through return addresses seen
 * before costs a lookup and two or three loads per frame. A rule it does not follow (a
 * CFA by expression: signal frames, PLT entries; the return address or rbp in another
 * register) or code without an FDE makes it answer 0, and the module unwinds with
 * backtrace() as before. x86-64 only; elsewhere it always answers 0.
 */
#define _GNU_SOURCE
#include <link.h>
#include <string.h>
#include <sys/mman.h>

#include "heap_unwind.h"
#include "pw.h"

#if defined(__x86_64__)

enum { REG_BP = 6, REG_SP = 7, REG_RA = 16 }; /* DWARF's x86-64 register numbers */
enum { STEP_RULE = 1, STEP_OUTERMOST, STEP_NONE };

/* One return address's rule, published by its pc (written last). */
typedef struct step {
    uintptr_t pc;    /* 0: free */
    int32_t cfa_off; /* CFA = (cfa_bp ? rbp : rsp) + cfa_off */
    int16_t bp_off;  /* the caller's rbp at CFA + bp_off; 0: rbp unchanged */
    int8_t cfa_bp;
    int8_t state; /* STEP_*: a rule, the outermost frame (return address undefined), none */
} step;
#define STEP_SLOTS 16384
#define STEP_PROBE 64
#define MAX_FRAME (16 << 20) /* a CFA further above the previous one: not believed */
static step *steps;
static int step_lock;

int pw_heap_unwind_init(void)
{
    void *m = mmap(NULL, sizeof *steps * STEP_SLOTS, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    steps = m == MAP_FAILED ? NULL : m;
#ifdef MADV_POPULATE_WRITE
    if (steps) /* its pages now (384 KiB): not a page fault at a return address's first rule */
        madvise(steps, sizeof *steps * STEP_SLOTS, MADV_POPULATE_WRITE);
#endif
    return steps ? 0 : -1;
}

static uint64_t uleb(const uint8_t **p)
{
    uint64_t v = 0;
    int shift = 0;
    uint8_t b;
    do {
        b = *(*p)++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    return v;
}

static int64_t sleb(const uint8_t **p)
{
    int64_t v = 0;
    int shift = 0;
    uint8_t b;
    do {
        b = *(*p)++;
        if (shift < 64)
            v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
    return v;
}

/* A pointer encoded as DW_EH_PE enc at *p (absolute, pc-relative or relative to datarel;
 * never dereferenced) into *out, *p past it; -1: an encoding not handled. */
static int read_enc(const uint8_t **p, uint8_t enc, uintptr_t datarel, uintptr_t *out)
{
    const uint8_t *q = *p;
    uint64_t v;
    union {
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        int16_t s16;
        int32_t s32;
    } x;
    switch (enc & 0x0f) {
    case 0x00: /* absptr */
    case 0x04: /* udata8 */
    case 0x0c: /* sdata8 */
        memcpy(&x.u64, q, 8), q += 8, v = x.u64;
        break;
    case 0x01:
        v = uleb(&q);
        break;
    case 0x02:
        memcpy(&x.u16, q, 2), q += 2, v = x.u16;
        break;
    case 0x03:
        memcpy(&x.u32, q, 4), q += 4, v = x.u32;
        break;
    case 0x09:
        v = (uint64_t)sleb(&q);
        break;
    case 0x0a:
        memcpy(&x.s16, q, 2), q += 2, v = (uint64_t)(int64_t)x.s16;
        break;
    case 0x0b:
        memcpy(&x.s32, q, 4), q += 4, v = (uint64_t)(int64_t)x.s32;
        break;
    default:
        return -1;
    }
    switch (enc & 0x70) {
    case 0x00:
        break;
    case 0x10: /* pcrel: from the field's own address */
        v += (uintptr_t)*p;
        break;
    case 0x30: /* datarel: from .eh_frame_hdr */
        v += datarel;
        break;
    default:
        return -1;
    }
    *p = q;
    *out = (uintptr_t)v;
    return 0;
}

/* The .eh_frame_hdr of the object holding pc (dl_iterate_phdr's callback). */
typedef struct find_hdr {
    uintptr_t pc, hdr;
} find_hdr;

static int find_hdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    find_hdr *f = arg;
    uintptr_t eh = 0;
    int in = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && f->pc >= lo && f->pc < lo + ph->p_memsz)
            in = 1;
        else if (ph->p_type == PT_GNU_EH_FRAME)
            eh = lo;
    }
    if (!in)
        return 0;
    f->hdr = eh;
    return 1;
}

/* The rule state of DWARF's call-frame instructions, for the registers a walk needs. */
typedef struct cfa_state {
    int64_t cfa_off, bp_off, ra_off;
    int cfa_reg;
    int bp_how, ra_how; /* 0 unchanged (same value), 1 saved at CFA + off, 2 undefined */
} cfa_state;

typedef struct cie_info {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc;
    int has_z;
    const uint8_t *ins, *end; /* the initial instructions */
} cie_info;

/* A register's rule set: only rbp's and the return address's are kept. */
static void set_rule(cfa_state *s, uint64_t reg, int how, int64_t off)
{
    if (reg == REG_BP)
        s->bp_how = how, s->bp_off = off;
    else if (reg == REG_RA)
        s->ra_how = how, s->ra_off = off;
}

static void restore_rule(cfa_state *s, const cfa_state *init, uint64_t reg)
{
    if (reg == REG_BP)
        s->bp_how = init->bp_how, s->bp_off = init->bp_off;
    else if (reg == REG_RA)
        s->ra_how = init->ra_how, s->ra_off = init->ra_off;
}

/* Runs the instructions [p, end) from location loc while it is <= target; -1: an
 * instruction this unwinder does not follow for the registers it needs. */
static int run_cfa(const uint8_t *p, const uint8_t *end, uintptr_t loc, uintptr_t target,
                   const cie_info *c, cfa_state *s, const cfa_state *init)
{
    cfa_state saved[8];
    int nsaved = 0;
    while (p < end) {
        uint8_t op = *p++, low = op & 0x3f;
        uint64_t reg, delta = 0;
        int64_t off;
        switch (op >> 6) {
        case 1: /* advance_loc */
            delta = low;
            break;
        case 2: /* offset */
            set_rule(s, low, 1, (int64_t)uleb(&p) * c->data_align);
            continue;
        case 3: /* restore */
            restore_rule(s, init, low);
            continue;
        }
        if (op >> 6 == 0) {
            uintptr_t a;
            uint16_t d2;
            uint32_t d4;
            switch (op) {
            case 0x00: /* nop */
                continue;
            case 0x01: /* set_loc */
                if (read_enc(&p, c->fde_enc, 0, &a) != 0)
                    return -1;
                if (a > target)
                    return 0;
                loc = a;
                continue;
            case 0x02:
                delta = *p++;
                break;
            case 0x03:
                memcpy(&d2, p, 2), p += 2, delta = d2;
                break;
            case 0x04:
                memcpy(&d4, p, 4), p += 4, delta = d4;
                break;
            case 0x05: /* offset_extended */
                reg = uleb(&p);
                set_rule(s, reg, 1, (int64_t)uleb(&p) * c->data_align);
                continue;
            case 0x06: /* restore_extended */
                restore_rule(s, init, uleb(&p));
                continue;
            case 0x07: /* undefined */
                set_rule(s, uleb(&p), 2, 0);
                continue;
            case 0x08: /* same_value */
                set_rule(s, uleb(&p), 0, 0);
                continue;
            case 0x09: /* register: in another register */
                reg = uleb(&p);
                uleb(&p);
                if (reg == REG_BP || reg == REG_RA)
                    return -1;
                continue;
            case 0x0a: /* remember_state */
                if (nsaved == 8)
                    return -1;
                saved[nsaved++] = *s;
                continue;
            case 0x0b: /* restore_state: the CFA's rule too (compilers' epilogues rely on it) */
                if (nsaved == 0)
                    return -1;
                *s = saved[--nsaved];
                continue;
            case 0x0c: /* def_cfa */
                s->cfa_reg = (int)uleb(&p);
                s->cfa_off = (int64_t)uleb(&p);
                continue;
            case 0x0d: /* def_cfa_register */
                s->cfa_reg = (int)uleb(&p);
                continue;
            case 0x0e: /* def_cfa_offset */
                s->cfa_off = (int64_t)uleb(&p);
                continue;
            case 0x10: /* expression */
            case 0x16: /* val_expression */
                reg = uleb(&p);
                off = (int64_t)uleb(&p);
                p += off;
                if (reg == REG_BP || reg == REG_RA)
                    return -1;
                continue;
            case 0x11: /* offset_extended_sf */
                reg = uleb(&p);
                set_rule(s, reg, 1, sleb(&p) * c->data_align);
                continue;
            case 0x12: /* def_cfa_sf */
                s->cfa_reg = (int)uleb(&p);
                s->cfa_off = sleb(&p) * c->data_align;
                continue;
            case 0x13: /* def_cfa_offset_sf */
                s->cfa_off = sleb(&p) * c->data_align;
                continue;
            case 0x14: /* val_offset */
            case 0x15: /* val_offset_sf */
                reg = uleb(&p);
                if (op == 0x14)
                    uleb(&p);
                else
                    sleb(&p);
                if (reg == REG_BP || reg == REG_RA)
                    return -1;
                continue;
            case 0x2e: /* GNU_args_size */
                uleb(&p);
                continue;
            case 0x2f: /* GNU_negative_offset_extended */
                reg = uleb(&p);
                set_rule(s, reg, 1, -(int64_t)uleb(&p) * c->data_align);
                continue;
            default: /* def_cfa_expression (0x0f) and anything else */
                return -1;
            }
        }
        loc += delta * c->code_align;
        if (loc > target)
            return 0;
    }
    return 0;
}

/* The CIE at cie parsed into *c; -1: a form not handled. */
static int parse_cie(const uint8_t *cie, cie_info *c)
{
    uint32_t len, id;
    memcpy(&len, cie, 4);
    memcpy(&id, cie + 4, 4);
    if (len == 0 || len == 0xffffffffu || id != 0)
        return -1;
    const uint8_t *p = cie + 8, *end = cie + 4 + len;
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    p += strlen(aug) + 1;
    if (strstr(aug, "eh"))
        return -1;
    c->code_align = uleb(&p);
    c->data_align = sleb(&p);
    uint64_t ra = version == 1 ? *p++ : uleb(&p);
    if (ra != REG_RA)
        return -1;
    c->fde_enc = 0;
    c->has_z = aug[0] == 'z';
    if (c->has_z) {
        uint64_t n = uleb(&p);
        const uint8_t *a = p;
        p += n;
        for (const char *k = aug + 1; *k; k++) {
            uintptr_t ignored;
            if (*k == 'R')
                c->fde_enc = *a++;
            else if (*k == 'L')
                a++;
            else if (*k == 'P') {
                uint8_t enc = *a++;
                if (read_enc(&a, enc & 0x7f, 0, &ignored) != 0)
                    return -1;
            } else /* 'S' (a signal frame) and what is not known */
                return -1;
        }
    }
    c->ins = p;
    c->end = end;
    return 0;
}

/* pc's rule (a return address: its call is at pc - 1) from its object's .eh_frame. */
static void compute_step(uintptr_t pc, step *out)
{
    *out = (step){.state = STEP_NONE};
    find_hdr f = {pc - 1, 0};
    if (!dl_iterate_phdr(find_hdr_cb, &f) || !f.hdr)
        return;
    const uint8_t *h = (const uint8_t *)f.hdr, *p = h + 4;
    uintptr_t eh_frame, count;
    if (h[0] != 1 || h[3] != 0x3b || read_enc(&p, h[1], f.hdr, &eh_frame) != 0 ||
        read_enc(&p, h[2], f.hdr, &count) != 0 || count == 0)
        return;
    const int32_t *table = (const int32_t *)p; /* (initial location, FDE) pairs, sorted */
    uintptr_t target = pc - 1;
    size_t lo = 0, hi = count;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (f.hdr + (intptr_t)table[2 * mid] <= target)
            lo = mid;
        else
            hi = mid;
    }
    if (f.hdr + (intptr_t)table[2 * lo] > target)
        return;
    const uint8_t *fde = (const uint8_t *)(f.hdr + (intptr_t)table[2 * lo + 1]);
    uint32_t len, cie_off;
    memcpy(&len, fde, 4);
    memcpy(&cie_off, fde + 4, 4);
    if (len == 0xffffffffu || cie_off == 0)
        return;
    cie_info c;
    if (parse_cie(fde + 4 - cie_off, &c) != 0)
        return;
    const uint8_t *q = fde + 8, *end = fde + 4 + len;
    uintptr_t begin, range;
    if (read_enc(&q, c.fde_enc, 0, &begin) != 0 || read_enc(&q, c.fde_enc & 0x0f, 0, &range) != 0)
        return;
    if (target < begin || target >= begin + range)
        return;
    if (c.has_z) {
        uint64_t n = uleb(&q); /* its augmentation data: skipped */
        q += n;
    }
    cfa_state init = {.cfa_reg = -1}, s;
    if (run_cfa(c.ins, c.end, begin, UINTPTR_MAX, &c, &init, &init) != 0)
        return;
    s = init;
    if (run_cfa(q, end, begin, target, &c, &s, &init) != 0)
        return;
    if (s.ra_how == 2) {
        out->state = STEP_OUTERMOST;
        return;
    }
    if ((s.cfa_reg != REG_SP && s.cfa_reg != REG_BP) || s.ra_how != 1 || s.ra_off != -8 ||
        s.cfa_off <= 0 || s.cfa_off > MAX_FRAME || s.bp_how == 2 ||
        (s.bp_how == 1 && (s.bp_off >= 0 || s.bp_off < -32768)))
        return;
    out->cfa_off = (int32_t)s.cfa_off;
    out->cfa_bp = s.cfa_reg == REG_BP;
    out->bp_off = s.bp_how == 1 ? (int16_t)s.bp_off : 0;
    out->state = STEP_RULE;
}

static inline size_t step_slot(uintptr_t pc)
{
    uint64_t h = (uint64_t)pc * 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 40) & (STEP_SLOTS - 1);
}

/* pc's rule into *out: from the table, else computed and kept there. */
static void step_of(uintptr_t pc, step *out)
{
    size_t i = step_slot(pc);
    for (int n = 0; n < STEP_PROBE; n++, i = (i + 1) & (STEP_SLOTS - 1)) {
        uintptr_t k = __atomic_load_n(&steps[i].pc, __ATOMIC_ACQUIRE);
        if (k == pc) {
            *out = steps[i];
            return;
        }
        if (k == 0)
            break;
    }
    compute_step(pc, out);
    while (__atomic_exchange_n(&step_lock, 1, __ATOMIC_ACQUIRE))
        ;
    i = step_slot(pc);
    for (int n = 0; n < STEP_PROBE; n++, i = (i + 1) & (STEP_SLOTS - 1)) {
        uintptr_t k = __atomic_load_n(&steps[i].pc, __ATOMIC_RELAXED);
        if (k == pc)
            break;
        if (k == 0) { /* the rule first: readers take a slot by its pc */
            steps[i].cfa_off = out->cfa_off;
            steps[i].bp_off = out->bp_off;
            steps[i].cfa_bp = out->cfa_bp;
            steps[i].state = out->state;
            __atomic_store_n(&steps[i].pc, pc, __ATOMIC_RELEASE);
            break;
        }
    }
    __atomic_store_n(&step_lock, 0, __ATOMIC_RELEASE);
}

int pw_heap_unwind(uintptr_t ra, uintptr_t fp, uintptr_t *frames, int max)
{
    if (!steps || max < 1)
        return 0;
    /* the wrapper's frame: its caller's rbp at fp, ra at fp + 8, its CFA (the caller's
     * stack pointer after the call returns) at fp + 16 */
    uintptr_t pc = ra, sp = fp + 16, bp = *(const uintptr_t *)fp;
    int n = 0;
    frames[n++] = ra;
    while (n < max) {
        step s;
        step_of(pc, &s);
        if (s.state == STEP_OUTERMOST)
            break;
        if (s.state != STEP_RULE)
            return 0;
        uintptr_t cfa = (s.cfa_bp ? bp : sp) + (uintptr_t)(intptr_t)s.cfa_off;
        if (cfa <= sp || cfa - sp > MAX_FRAME || (cfa & 7))
            return 0;
        uintptr_t next = ((const uintptr_t *)cfa)[-1];
        if (s.bp_off)
            bp = *(const uintptr_t *)(cfa + (uintptr_t)(intptr_t)s.bp_off);
        sp = cfa;
        if (next == 0)
            break;
        frames[n++] = next;
        pc = next;
    }
    return n;
}

#else /* not x86-64: backtrace() every time */

int pw_heap_unwind_init(void) { return 0; }
int pw_heap_unwind(uintptr_t ra, uintptr_t fp, uintptr_t *frames, int max)
{
    (void)ra, (void)fp, (void)frames, (void)max;
    return 0;
}

#endif
