/* Drives heap_live.c (the heap module's live timelines) directly, without the module
 * (tests/runtime/test_heap_live.py): a record of 3 sites, ticks counted from tick_start
 * 1000, buckets of 2^10 ticks at first, and the marks read from stdin, one per line
 * "HOW SITE FROM TO" (ticks from tick_start; HOW "close" marks as a closing interval,
 * "end" as the dump, "ask" only asks). After each line "known SITE 0|1": whether the
 * site's known run (the lock-free read) says FROM..TO is marked; at the end "log2 L" and
 * per site "bits SITE W0 W1 ..." (the bitmap's words in hex). */
#include <stdio.h>
#include <string.h>

#include "heap_live.c" /* runtime/modules/ */

static _Alignas(4096) char mem[4096 + 3 * sizeof(pw_heap_live_rec)];

int main(void)
{
    pw_heap_header_rec *h = (pw_heap_header_rec *)mem;
    h->tick_start = 1000;
    h->nsites = 3;
    pw_heap_live_attach(h, mem + 4096, 3, 1000, 0);
    int s;
    long long from, to;
    char how[8];
    while (scanf("%7s %d %lld %lld", how, &s, &from, &to) == 4) {
        if (!strcmp(how, "end"))
            pw_heap_live_end(s, 1000 + from, 1000 + to, 0);
        else if (!strcmp(how, "close"))
            pw_heap_live_close(s, 1000 + from, 1000 + to);
        printf("known %d %d\n", s, pw_heap_live_marked(s, 1000 + from, 1000 + to));
    }
    printf("log2 %d\n", h->live_log2);
    for (s = 0; s < 3; s++) {
        printf("bits %d", s);
        for (int k = 0; k < PW_HEAP_LIVE_BUCKETS / 64; k++)
            printf(" %llx", (unsigned long long)((pw_heap_live_rec *)(mem + 4096))[s].bits[k]);
        printf("\n");
    }
    return 0;
}
