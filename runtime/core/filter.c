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
#include <string.h>

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
