"""The ReFrame site configuration of tests/runtime/test_reframe.py: one system, `local`,
with two partitions: `mpirun` (jobs run here, launched by `mpirun`) and `slurm` (jobs
submitted with sbatch to the suite's one-node Slurm, tests/runtime/slurm.py, polled with
squeue: that cluster keeps no accounting for sacct; launched by srun), and two
environments, `openmpi` and `mpich`. A partition's extras give the options of its
launcher per environment, which the check puts on the launcher. `mpirun` is the
environment's MPI's own through a directory of links first on the job's PATH, which the
test makes: PW_RFM_SITE/bin-FLAVOR/mpirun. What ReFrame writes besides
its --prefix (run reports, perflogs, the processor topology) goes to PW_RFM_OUT, one
directory per session, never to the home directory."""

import os

SITE = os.environ["PW_RFM_SITE"]
OUT = os.environ["PW_RFM_OUT"]
FLAVORS = ("openmpi", "mpich")


site_configuration = {
    "systems": [
        {
            "name": "local",
            "descr": "this machine",
            "hostnames": [".*"],
            "modules_system": "nomod",
            "partitions": [
                {
                    "name": "mpirun",
                    "scheduler": "local",
                    "launcher": "mpirun",
                    "environs": list(FLAVORS),
                    "extras": {"launcher_options": {"openmpi": ["--oversubscribe"], "mpich": []}},
                },
                {
                    "name": "slurm",
                    "scheduler": "squeue",
                    "launcher": "srun",
                    "environs": list(FLAVORS),
                    "extras": {
                        "launcher_options": {"openmpi": ["--mpi=pmix"], "mpich": ["--mpi=pmi2"]}
                    },
                },
            ],
        }
    ],
    "environments": [
        {
            "name": flavor,
            "cc": f"mpicc.{flavor}",
            "cflags": ["-O2", "-g"],
            "env_vars": [["PATH", f"{SITE}/bin-{flavor}:$PATH"]],
        }
        for flavor in FLAVORS
    ],
    "logging": [
        {
            "handlers": [
                {"type": "stream", "name": "stdout", "level": "info", "format": "%(message)s"}
            ],
            "handlers_perflog": [
                {
                    "type": "filelog",
                    "basedir": f"{OUT}/perflogs",
                    "prefix": "%(check_system)s/%(check_partition)s",
                    "level": "info",
                    "format": "%(check_result)s|%(check_display_name)s|%(check_environ)s|"
                    "%(check_perfvalues)s",
                    "format_perfvars": "%(check_perf_var)s=%(check_perf_value)s "
                    "%(check_perf_unit)s %(check_perf_ref)s %(check_perf_lower_thres)s "
                    "%(check_perf_upper_thres)s|",
                }
            ],
        }
    ],
    "general": [
        {
            "report_file": f"{OUT}/report-{{sessionid}}.json",
            "topology_prefix": f"{OUT}/topology",
            "colorize": False,
        }
    ],
}
