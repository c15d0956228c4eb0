/*
 * The program's own frame of a call that a library made on its behalf (runtime/core/
 * user_frame.c): a write() made by the C library for an fprintf, by libgfortran for a
 * Fortran WRITE, by libstdc++ for an ofstream or by the MPI library for an MPI-IO
 * aggregator is the program's call site that called into them. A module that records
 * call sites of calls it wraps in the C library asks here which site a call is of.
 */
#ifndef PW_CORE_USER_FRAME_H
#define PW_CORE_USER_FRAME_H

#include <stdint.h>

#include "pw.h"

/* The object of the last user frame found by this thread: a return address inside it is
 * the program's without a look-up. */
extern PW_TLS uintptr_t pw_user_lo, pw_user_hi;

/* ra itself when its object is the program's; else the first frame of the stack outside
 * the libraries; ra when none is. Not async-signal-safe (backtrace). */
uintptr_t pw_user_frame_find(uintptr_t ra);

static inline uintptr_t pw_user_frame(uintptr_t ra)
{
    if (PW_LIKELY(ra >= pw_user_lo && ra < pw_user_hi))
        return ra;
    return pw_user_frame_find(ra);
}

#endif
