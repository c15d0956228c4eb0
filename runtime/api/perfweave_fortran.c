/*
 * The Fortran API's entry points (libperfweave-api.a, linked by `pkg-config --libs
 * perfweave`; the interfaces: runtime/api/perfweave.f90, `use perfweave`). gfortran
 * passes a character argument's length after the arguments (size_t); each entry
 * calls the runtime's perfweave_api_v1 when it is loaded (a weak reference), so a
 * program linked with this archive runs unchanged without perfweave.
 */
#include "perfweave/perfweave.h"

#define PW_F_ENTRY(fname, op)                                                                      \
    void fname(const char *name, size_t len);                                                      \
    void fname(const char *name, size_t len)                                                       \
    {                                                                                              \
        if (perfweave_api_v1)                                                                      \
            perfweave_api_v1(op, name, len);                                                       \
    }

PW_F_ENTRY(perfweave_region_begin_, PERFWEAVE_OP_REGION_BEGIN)
PW_F_ENTRY(perfweave_region_end_, PERFWEAVE_OP_REGION_END)
PW_F_ENTRY(perfweave_phase_begin_, PERFWEAVE_OP_PHASE_BEGIN)
PW_F_ENTRY(perfweave_phase_end_, PERFWEAVE_OP_PHASE_END)

void perfweave_measure_off_(void);
void perfweave_measure_off_(void)
{
    if (perfweave_api_v1)
        perfweave_api_v1(PERFWEAVE_OP_MEASURE_OFF, "", 0);
}

void perfweave_measure_on_(void);
void perfweave_measure_on_(void)
{
    if (perfweave_api_v1)
        perfweave_api_v1(PERFWEAVE_OP_MEASURE_ON, "", 0);
}
