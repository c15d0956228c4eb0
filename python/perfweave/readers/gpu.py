"""Reader of the gpu module's files (gpu/ in an experiment; docs/format.md "GPU
activity"): the model of model/gpu.py. A file that cannot be read is left out with a
note; the others stand."""

from perfweave._format import JSON
from perfweave.errors import FormatError
from perfweave.model.gpu import TABLES, Gpu, GpuProcess, process_key, rows_table
from perfweave.readers.dataset import Dataset
from perfweave.readers.files import read_document


def read_gpu(path):
    """The Gpu of experiment path (an empty one without gpu/)."""
    d = path / "gpu"
    out = Gpu()
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.json")):
        try:
            doc = read_document(f, "gpu", "GPU activity file")
            fields = {k: doc[k] for k in JSON["gpu"] if k not in ("format", "version")}
            for name, cols in TABLES.items():
                rows = fields[name]
                if any(not isinstance(r, list) or len(r) != len(cols) for r in rows):
                    raise FormatError(f"{f}: a row of {name} has not {len(cols)} columns")
                fields[name] = rows_table(cols, rows)
        except (FormatError, OSError, ValueError, TypeError) as e:
            out.notes.append(f"GPU activity: {e}; left out")
            continue
        out.processes.append(GpuProcess(**fields))
    out.processes.sort(key=process_key)
    return out


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "gpu",
    "gpu",
    read_gpu,
    "CUDA kernels, copies and synchronisation per rank, device and stream (CUPTI)",
)
