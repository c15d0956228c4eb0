"""Print the include folders of the CUDA Python wheels installed beside this interpreter
(nvidia-cuda-cupti-cu12, nvidia-cuda-runtime-cu12, nvidia-cuda-nvcc-cu12: cupti.h, cuda.h
and the crt/ headers they include), ';'-separated, for CMake's PERFWEAVE_CUDA_INCLUDE;
nothing when one is missing. The gpu module and the tests' fake CUPTI compile against them,
so that the records' layouts are CUPTI's own (docs/gpu.md)."""

import importlib.util
import pathlib
import sys

PACKAGES = ("nvidia.cuda_cupti", "nvidia.cuda_runtime", "nvidia.cuda_nvcc")


def include_dirs():
    """The packages' include folders, or [] when one is not installed."""
    out = []
    for name in PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            return []
        if spec is None or not spec.submodule_search_locations:
            return []
        d = pathlib.Path(next(iter(spec.submodule_search_locations))) / "include"
        if not d.is_dir():
            return []
        out.append(str(d))
    return out


if __name__ == "__main__":
    sys.stdout.write(";".join(include_dirs()))
