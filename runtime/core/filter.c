/*
 * --filter: which functions, regions and call paths the trace records (docs/regions.md
 * "Filtering the trace"). `perfweave run` checks the user's rules (or a Score-P filter
 * file) and hands the runtime a normalised list, one rule per glob:
 *
 *   exclude:MPI_Comm_rank;exclude-region:init*;include:MPI_*;exclude-path:solve
 *
 * Rules apply in order and the last one that matches a name decides (Score-P's rule);
 * a name no rule matches is traced. Targets: functions (MPI, I/O, math-library names),
 * regions (the program's regions and phases), paths (a region or phase open around the
 * event: excluded paths leave out what happens inside). Parsed once, at start.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"
#include "pw.h"

#define MAX_RULES 256
#define RULE_BYTES 128

static struct rule {
    int target; /* PW_FILTER_* */
    int include;
    char glob[RULE_BYTES];
} rules[MAX_RULES];
static int nrules, parsed, has_target[3];

static void parse(void)
{
    parsed = 1;
    const char *s = pw_opt.filter;
    while (s && *s && nrules < MAX_RULES) {
        const char *end = strchr(s, ';');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', n);
        if (colon) {
            size_t kind = (size_t)(colon - s), g = n - kind - 1;
            struct rule *r = &rules[nrules];
            r->include = strncmp(s, "include", 7) == 0;
            r->target = memmem(s, kind, "-region", 7) ? PW_FILTER_REGION
                        : memmem(s, kind, "-path", 5) ? PW_FILTER_PATH
                                                      : PW_FILTER_FUNCTION;
            if (g < RULE_BYTES) {
                memcpy(r->glob, colon + 1, g);
                r->glob[g] = 0;
                has_target[r->target] = 1;
                nrules++;
            }
        }
        s = end ? end + 1 : NULL;
    }
}

int pw_filter_active(int target)
{
    if (!parsed)
        parse();
    return has_target[target];
}

int pw_filter_excluded(int target, const char *name)
{
    if (!pw_filter_active(target))
        return 0;
    int excluded = 0;
    for (int i = 0; i < nrules; i++)
        if (rules[i].target == target && fnmatch(rules[i].glob, name, 0) == 0)
            excluded = !rules[i].include;
    return excluded;
}

/* ---- path rules about ordinary functions ----
 * `exclude-path:solve` also leaves out what is called anywhere below a function named
 * solve. The names are resolved once, when the trace starts (pw_filter_paths_resolve):
 * the address ranges of every function of the loaded objects whose name the path rules
 * exclude, sorted. A call then walks its callers' frame pointers (at most PATH_DEPTH
 * frames, inside the thread's stack) and looks each return address up in the ranges; a
 * thread remembers its last chain of return addresses and the decision for it, so a
 * loop's call costs the walk and one comparison. */
#define MAX_RANGES 4096
#define PATH_DEPTH 32

typedef struct range {
    uintptr_t lo, hi;
} range;
static range *ranges;
static int nranges, resolved, ranges_full;

static void add_function(const char *name, uintptr_t addr, size_t size, void *arg)
{
    (void)arg;
    if (!size || !pw_filter_excluded(PW_FILTER_PATH, name))
        return;
    if (nranges == MAX_RANGES) {
        ranges_full = 1;
        return;
    }
    ranges[nranges++] = (range){addr, addr + size};
}

static int by_lo(const void *a, const void *b)
{
    uintptr_t x = ((const range *)a)->lo, y = ((const range *)b)->lo;
    return (x > y) - (x < y);
}

int pw_filter_paths_resolve(void)
{
    if (resolved || !pw_filter_active(PW_FILTER_PATH))
        return nranges;
    resolved = 1;
    ranges = malloc(MAX_RANGES * sizeof *ranges);
    if (!ranges)
        return 0;
    pw_elf_functions(add_function, NULL);
    if (ranges_full)
        pw_log("--filter: more than %d functions match the path rules; the first kept", MAX_RANGES);
    qsort(ranges, (size_t)nranges, sizeof *ranges, by_lo);
    return nranges;
}

static int in_ranges(uintptr_t pc)
{
    int lo = 0, hi = nranges;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ranges[mid].hi <= pc)
            lo = mid + 1;
        else if (ranges[mid].lo > pc)
            hi = mid;
        else
            return 1;
    }
    return 0;
}

static PW_TLS uintptr_t stack_hi, last_chain;
static PW_TLS int last_excluded;

int pw_filter_path_excluded_here(void)
{
    if (!nranges)
        return 0;
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (!stack_hi) {
        pthread_attr_t at;
        void *addr;
        size_t size;
        stack_hi = here + 1; /* without the thread's bounds: no walk */
        if (pthread_getattr_np(pthread_self(), &at) == 0) {
            if (pthread_attr_getstack(&at, &addr, &size) == 0)
                stack_hi = (uintptr_t)addr + size;
            pthread_attr_destroy(&at);
        }
    }
    uintptr_t ra[PATH_DEPTH], chain = 0, fp = here;
    int n = 0;
    /* frames above this one only (mapped as long as they are), each further up */
    while (n < PATH_DEPTH && fp >= here && fp % sizeof(uintptr_t) == 0 &&
           fp + 2 * sizeof(uintptr_t) <= stack_hi) {
        const uintptr_t *f = (const uintptr_t *)fp;
        if (!f[1])
            break;
        ra[n++] = f[1];
        chain = chain * 1000003u ^ f[1];
        if (f[0] <= fp)
            break;
        fp = f[0];
    }
    if (chain == last_chain && chain)
        return last_excluded;
    int excluded = 0;
    for (int i = 0; i < n && !excluded; i++)
        excluded = in_ranges(ra[i] - 1); /* the call instruction, inside its caller */
    last_chain = chain;
    last_excluded = excluded;
    return excluded;
}
