#!/bin/sh
# drop_preload.sh RANK PROGRAM ARGS...: run PROGRAM as this task's rank would, but
# without LD_PRELOAD when the rank (Open MPI's or MPICH's variable) is RANK: a task
# the preload did not reach, as with a per-task environment policy.
rank=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}
if [ "$rank" = "$1" ]; then
    unset LD_PRELOAD
fi
shift
exec "$@"
