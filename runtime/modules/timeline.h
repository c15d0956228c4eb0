/*
 * The timeline module (timeline.c, --node-interval, --pcp): one thread per node samples the
 * node's sources into timeline/HOST.values and HOST.json (docs/format.md "Node
 * timeline").
 *
 * What it gives the core and other modules, only through pw.h: the process's
 * activity page (pw_act, timeline/HOST.PID.act), which it creates in its start and
 * its node thread reads; the module that records calls adds to it (pw_act_add) and
 * the core sets its rank (pw_rank_set).
 */
#ifndef PW_MODULES_TIMELINE_H
#define PW_MODULES_TIMELINE_H

#include "pw.h"

extern const pw_module pw_module_timeline;

#endif
