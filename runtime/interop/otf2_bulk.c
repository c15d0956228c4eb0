/* The per-event loop of perfweave's OTF2 export (python/perfweave/interop/otf2/calls.py).
 *
 * Python builds each location's events as columns (kind, time, six arguments, attribute
 * list) and calls pw_otf2_write once per block of them; this loop calls the OTF2 event
 * writer functions of the library that the otf2 Python package loaded, through the
 * addresses Python hands over. So this file needs neither OTF2's headers nor its library
 * at build time, and the export uses whichever libotf2 the package found. The
 * prototypes below are those of OTF2's public C API (OTF2_EvtWriter.h, OTF2 2.x/3.x):
 * every reference is a uint32_t, OTF2_CollectiveOp, OTF2_LockType, OTF2_RmaAtomicType
 * and OTF2_RmaSyncType are uint8_t, OTF2_RmaSyncLevel is uint32_t, OTF2_ErrorCode int. */
#include <stddef.h>
#include <stdint.h>

#include "pw_otf2_events.h"

#define PW_EXPORT __attribute__((visibility("default")))

/* Event kinds: numbered by mpi.spec's section otf2, as otf2/calls.py's K, which checks
 * pw_otf2_kinds(). */
#define PW_KIND(event) K_##event,
enum { PW_OTF2_EVENTS(PW_KIND) K_COUNT };
#undef PW_KIND

typedef void W;     /* OTF2_EvtWriter */
typedef void AL;    /* OTF2_AttributeList */
typedef uint64_t T; /* OTF2_TimeStamp */

typedef int (*f_ref)(W *, AL *, T, uint32_t); /* Enter, Leave, RmaWin* */
typedef int (*f_u64)(W *, AL *, T, uint64_t); /* requests */
typedef int (*f_none)(W *, AL *, T);          /* *CollectiveBegin */
typedef int (*f_p2p)(W *, AL *, T, uint32_t, uint32_t, uint32_t, uint64_t);
typedef int (*f_p2p_req)(W *, AL *, T, uint32_t, uint32_t, uint32_t, uint64_t, uint64_t);
typedef int (*f_coll_end)(W *, AL *, T, uint8_t, uint32_t, uint32_t, uint64_t, uint64_t);
typedef int (*f_nbc_done)(W *, AL *, T, uint8_t, uint32_t, uint32_t, uint64_t, uint64_t, uint64_t);
typedef int (*f_rma)(W *, AL *, T, uint32_t, uint32_t, uint64_t, uint64_t);
typedef int (*f_atomic)(W *, AL *, T, uint32_t, uint32_t, uint8_t, uint64_t, uint64_t, uint64_t);
typedef int (*f_rma_coll_end)(W *, AL *, T, uint8_t, uint32_t, uint32_t, uint32_t, uint64_t,
                              uint64_t);
typedef int (*f_group_sync)(W *, AL *, T, uint32_t, uint32_t, uint32_t);
typedef int (*f_acquire)(W *, AL *, T, uint32_t, uint32_t, uint64_t, uint8_t);
typedef int (*f_release)(W *, AL *, T, uint32_t, uint32_t, uint64_t);
typedef int (*f_sync)(W *, AL *, T, uint32_t, uint32_t, uint8_t);
typedef int (*f_end)(W *, AL *, T, int64_t);

PW_EXPORT int pw_otf2_kinds(void) { return K_COUNT; }

/* Writes events [0, n) in order. fns[kind] is the OTF2 function of that kind, or NULL for
 * a kind the caller writes itself (ProgramBegin, whose strings stay in Python). Returns
 * the index of the first event not written: n when all were, else one of a kind without
 * a function (*err = 0) or one the library refused (*err = its error code). */
PW_EXPORT size_t pw_otf2_write(W *w, void *const *fns, size_t n, const uint8_t *kind,
                               const uint64_t *time, const uint64_t *a1, const uint64_t *a2,
                               const uint64_t *a3, const uint64_t *a4, const uint64_t *a5,
                               const uint64_t *a6, void *const *attrs, int *err)
{
    *err = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned k = kind[i];
        void *fn = k < K_COUNT ? fns[k] : NULL;
        if (!fn)
            return i;
        AL *al = attrs ? attrs[i] : NULL;
        T t = time[i];
        int rc;
        switch (k) {
        case K_ENTER:
        case K_LEAVE:
        case K_WIN_CREATE:
        case K_WIN_DESTROY:
            rc = ((f_ref)fn)(w, al, t, (uint32_t)a1[i]);
            break;
        case K_IRECV_REQ:
        case K_ISEND_DONE:
        case K_NBC_REQUEST:
            rc = ((f_u64)fn)(w, al, t, a1[i]);
            break;
        case K_COLL_BEGIN:
        case K_RMA_COLL_BEGIN:
            rc = ((f_none)fn)(w, al, t);
            break;
        case K_SEND:
        case K_RECV:
            rc = ((f_p2p)fn)(w, al, t, (uint32_t)a1[i], (uint32_t)a2[i], (uint32_t)a3[i], a4[i]);
            break;
        case K_ISEND:
        case K_IRECV:
            rc = ((f_p2p_req)fn)(w, al, t, (uint32_t)a1[i], (uint32_t)a2[i], (uint32_t)a3[i], a4[i],
                                 a5[i]);
            break;
        case K_COLL_END:
            rc = ((f_coll_end)fn)(w, al, t, (uint8_t)a1[i], (uint32_t)a2[i], (uint32_t)a3[i], a4[i],
                                  a5[i]);
            break;
        case K_NBC_COMPLETE:
            rc = ((f_nbc_done)fn)(w, al, t, (uint8_t)a1[i], (uint32_t)a2[i], (uint32_t)a3[i], a4[i],
                                  a5[i], a6[i]);
            break;
        case K_PUT:
        case K_GET:
            rc = ((f_rma)fn)(w, al, t, (uint32_t)a1[i], (uint32_t)a2[i], a3[i], a4[i]);
            break;
        case K_ATOMIC:
            rc = ((f_atomic)fn)(w, al, t, (uint32_t)a1[i], (uint32_t)a2[i], (uint8_t)a3[i], a4[i],
                                a5[i], a6[i]);
            break;
        case K_RMA_COLL_END:
            rc = ((f_rma_coll_end)fn)(w, al, t, (uint8_t)a1[i], (uint32_t)a2[i], (uint32_t)a3[i],
                                      (uint32_t)a4[i], a5[i], a6[i]);
            break;
        case K_GROUP_SYNC:
            rc = ((f_group_sync)fn)(w, al, t, (uint32_t)a1[i], (uint32_t)a2[i], (uint32_t)a3[i]);
            break;
        case K_ACQUIRE:
            rc = ((f_acquire)fn)(w, al, t, (uint32_t)a1[i], (uint32_t)a2[i], a3[i], (uint8_t)a4[i]);
            break;
        case K_RELEASE:
            rc = ((f_release)fn)(w, al, t, (uint32_t)a1[i], (uint32_t)a2[i], a3[i]);
            break;
        case K_RMA_SYNC:
            rc = ((f_sync)fn)(w, al, t, (uint32_t)a1[i], (uint32_t)a2[i], (uint8_t)a3[i]);
            break;
        case K_PROGRAM_END:
            rc = ((f_end)fn)(w, al, t, (int64_t)a1[i]);
            break;
        default:
            return i;
        }
        if (rc) {
            *err = rc;
            return i;
        }
    }
    return n;
}
