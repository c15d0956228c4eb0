/*
 * The registry of measured functions: every module that records calls into the
 * call-site tables registers its list once, and its functions get the ids
 * base..base+n-1 (pw.h, "measured functions"). The ids are the sites' and histograms'
 * fn; the profile writer lists the sets as the header's "modules" and their names as
 * "functions" (docs/format.md). Registration may come from any thread (a module's
 * library loaded late, at the program's first call into it) while others record:
 * a set is published, complete, by the release store of the count.
 */
#include "pw.h"

static pw_functions *sets[PW_MAX_FUNCTION_SETS];
static int nsets, nfunctions;

int pw_functions_register(pw_functions *f)
{
    static int lock;
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
        pw_cpu_relax();
    int rc = -1;
    if (nsets < PW_MAX_FUNCTION_SETS && f->n >= 0 && nfunctions + f->n <= PW_MAX_FUNCTIONS) {
        f->base = nfunctions;
        f->index = nsets;
        nfunctions += f->n;
        sets[nsets] = f;
        __atomic_store_n(&nsets, nsets + 1, __ATOMIC_RELEASE);
        rc = 0;
    }
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
    if (rc != 0)
        pw_log("module %s: too many measured functions (%d at most); its calls are not recorded",
               f->module, PW_MAX_FUNCTIONS);
    else
        pw_tables_describe(); /* the tables file's description names them */
    return rc;
}

pw_functions *const *pw_functions_list(int *n)
{
    *n = __atomic_load_n(&nsets, __ATOMIC_ACQUIRE);
    return sets;
}
