/*
 * The gpu module (gpu.c, --gpu): CUDA kernels, copies, memsets, synchronisation and API
 * calls per rank, device and stream from CUPTI's activity records, in a process that
 * loaded the CUDA runtime or driver. It offers no hook; it uses pw_opt.gpu*, pw_rank,
 * the experiment directory and the core's JSON writer.
 */
#ifndef PW_MODULES_GPU_H
#define PW_MODULES_GPU_H

#include "pw.h"

extern const pw_module pw_module_gpu;

#endif
