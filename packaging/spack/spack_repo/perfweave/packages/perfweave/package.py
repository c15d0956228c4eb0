# The Spack package of perfweave (Spack 1.x, package API v2). docs/install.md says how to
# use it; tests/python/test_spack_package.py checks it against CMakeLists.txt and pyproject.

from spack_repo.builtin.build_systems.python import PythonPackage

from spack.package import *

# MPI_Get_library_version's family, which picks libperfweave-mpi-<flavour>.so in each process
# (runtime/modules/mpi_loader.c): an Open MPI derivative, or the MPICH ABI. Any other provider
# gets a build of its own name, chosen with `perfweave run --mpi NAME`.
MPI_FAMILY = {
    "openmpi": "openmpi",
    "hpcx-mpi": "openmpi",
    "fujitsu-mpi": "openmpi",
    "spectrum-mpi": "openmpi",
    "mpich": "mpich",
    "mvapich": "mpich",
    "mvapich2": "mpich",
    "cray-mpich": "mpich",
    "intel-oneapi-mpi": "mpich",
    "intel-mpi": "mpich",
}


class Perfweave(PythonPackage):
    """Performance analysis for parallel HPC programs: a runtime preloaded into every
    process of an unmodified MPI program (profiles by call site, sampled call stacks,
    I/O and math-library profiles, PAPI counters, event traces) and the analysis of its
    experiments (wait states, root causes, POP efficiencies, reports)."""

    # Released versions: the version in python/perfweave/__init__.py. No download yet:
    # build from a checkout with `spack develop` (docs/install.md).
    version("0.1.0")

    variant("mpi", default=True, description="MPI call-site profiles and traces (the MPI module)")
    variant("papi", default=True, description="hardware counters through PAPI (--counters)")
    variant("pcp", default=False, description="PCP metrics (--pcp); PCP's headers from the system")
    variant("libunwind", default=True, description="sampled stacks through frameless code")
    variant("parallel", default=False, description="analyze --parallel under MPI (mpi4py)")
    variant("otf2", default=False, description="OTF2 import and export (OTF2's Python bindings)")

    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("py-scikit-build-core@0.10:+pyproject", type="build")
    depends_on("python@3.9:", type=("build", "run"))
    depends_on("py-numpy@1.22:", type=("build", "run"))
    depends_on("py-pandas@1.5:", type=("build", "run"))
    depends_on("py-tqdm@4.60:", type=("build", "run"))

    depends_on("mpi", when="+mpi")
    # opened by name at run time (by the runtime and by perfweave/papi.py), from the
    # directories config_settings gives as PERFWEAVE_RUNTIME_LIBDIRS
    depends_on("papi", type=("link", "run"), when="+papi")
    depends_on("libunwind", type=("build", "link", "run"), when="+libunwind")
    depends_on("py-mpi4py@3.1:", type=("build", "run"), when="+parallel")
    depends_on("otf2@3:", type=("build", "run"), when="+otf2")

    conflicts("+parallel", when="~mpi", msg="analyze --parallel runs under MPI")

    # perfweave's other modules import optional packages (otf2, mpi4py) when used
    import_modules = ["perfweave", "perfweave.cli"]

    def config_settings(self, spec, prefix):
        """CMakeLists.txt's cache variables, as pip passes them to scikit-build-core."""
        mpicc = ""
        if spec.satisfies("+mpi"):
            mpi = spec["mpi"]
            mpicc = f"{MPI_FAMILY.get(mpi.name, mpi.name)}={mpi.mpicc}"
        libdirs = []
        for name in ("papi", "libunwind"):
            if spec.satisfies(f"+{name}"):
                libdirs.extend(spec[name].libs.directories)
        return {
            "cmake.define.PERFWEAVE_MPICC": mpicc,
            "cmake.define.PERFWEAVE_PCP": "ON" if spec.satisfies("+pcp") else "OFF",
            "cmake.define.PERFWEAVE_LIBUNWIND": "ON" if spec.satisfies("+libunwind") else "OFF",
            "cmake.define.PERFWEAVE_RUNTIME_LIBDIRS": ";".join(libdirs),
        }

    def test_version(self):
        """perfweave --version names the installed version"""
        perfweave = which(self.prefix.bin.perfweave, required=True)
        out = perfweave("--version", output=str.split, error=str.split)
        assert f"perfweave {self.spec.version}" in out
