/* Looks hooks up in the registry of the perfweave runtime it runs under (pw.h's
 * pw_hook_offer and pw_hook_find), as a module does in its start: after the modules'
 * starts, so every hook they offer is there.
 *
 *   hook_registry NAME...
 *
 * prints "NAME 1" for each NAME found, "NAME 0" for one absent; then offers a hook of its
 * own and prints "own 1" when finding it gives the same function and calling it works;
 * then looks up "late_hook" (absent) and offers it: the runtime says on stderr that a
 * module that looked it up goes without it. "no registry": not run under the runtime. */
#include <dlfcn.h>
#include <stdio.h>

typedef void (*hook_fn)(void);
typedef hook_fn (*find_fn)(const char *);
typedef void (*offer_fn)(const char *, hook_fn);

static int called;
static void own_hook(void) { called++; }

int main(int argc, char **argv)
{
    find_fn find = (find_fn)dlsym(RTLD_DEFAULT, "pw_hook_find");
    offer_fn offer = (offer_fn)dlsym(RTLD_DEFAULT, "pw_hook_offer");
    if (!find || !offer) {
        printf("no registry\n");
        return 1;
    }
    for (int i = 1; i < argc; i++)
        printf("%s %d\n", argv[i], find(argv[i]) != NULL);
    offer("program_own_hook", own_hook);
    hook_fn f = find("program_own_hook");
    if (f == own_hook)
        f();
    printf("own %d\n", called == 1);
    printf("late_hook %d\n", find("late_hook") != NULL);
    offer("late_hook", own_hook);
    fflush(stdout);
    return 0;
}
