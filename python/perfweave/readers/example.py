"""Reader of the example module's files (example/ in an experiment; docs/format.md
"Example module"): the model of model/example.py. A file that cannot be read (a process
killed while writing it, a damaged disk) is left out with a note; the others stand. The
template of a module's reader: it declares the module's dataset (DATASET, at the end),
which readers/datasets.py finds by the module's name."""

from perfweave._format import JSON
from perfweave.errors import FormatError
from perfweave.model.example import Example, ExampleProcess, process_key
from perfweave.readers.dataset import Dataset
from perfweave.readers.files import read_document


def read_example(path):
    """The Example of experiment path (an empty one without example/)."""
    d = path / "example"
    out = Example()
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.json")):
        kind = "example_job" if f.name == "job.json" else "example"
        try:
            doc = read_document(f, kind, "example module file")
        except (FormatError, OSError) as e:
            out.notes.append(f"example module: {e}; left out")
            continue
        out.function = doc["function"]
        if kind == "example_job":
            out.job = {k: doc[k] for k in JSON[kind] if k not in ("format", "version")}
        else:
            out.processes.append(
                ExampleProcess(
                    **{k: doc[k] for k in JSON[kind] if k not in ("format", "version", "function")}
                )
            )
    out.processes.sort(key=process_key)
    return out


# the module's dataset (readers/datasets.py finds it by the module's name)
DATASET = Dataset(
    "example",
    "example",
    read_example,
    "the example module's calls per process (perfweave run --example)",
)
