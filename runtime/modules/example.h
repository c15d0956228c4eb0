/*
 * The example module (example.c, --example): the template of a runtime module. A
 * module's header declares its pw_module for the list (modules.def) and says what it
 * uses of the core and of other modules: here pw_opt.example, wrap.h, the registry of
 * measured functions and the call-site tables, pw_rank, the experiment directory; no
 * hook (a module that offers one declares its type here: counters.h, io.h).
 */
#ifndef PW_MODULES_EXAMPLE_H
#define PW_MODULES_EXAMPLE_H

#include "pw.h"

extern const pw_module pw_module_example;

#endif
