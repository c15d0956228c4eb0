"""Reader of the example module's files (example/ in an experiment; docs/format.md
"Example module"): the model of model/example.py. A file that cannot be read (a process
killed while writing it, a damaged disk) is left out with a note; the others stand. The
template of a module's reader: its kind is registered in readers/kinds.py."""

from perfweave._format import FILES
from perfweave.errors import FormatError
from perfweave.model.example import Example, ExampleProcess, process_key
from perfweave.readers.files import PROCESS_HEAD, check, read_json

FORMAT, JOB_FORMAT = FILES["example"].magic, FILES["example_job"].magic
VERSION = FILES["example"].version

_PROCESS = {
    **PROCESS_HEAD,
    "state": str,
    "function": str,
    "threads": int,
    "calls": int,
    "total_ns": int,
    "max_ns": int,
}
_JOB = {
    "format": str,
    "version": int,
    "ranks": int,
    "reported": int,
    "function": str,
    "threads": int,
    "calls": int,
    "total_ns": int,
    "max_ns": int,
}


def read_example(path):
    """The Example of experiment path (an empty one without example/)."""
    d = path / "example"
    out = Example()
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.json")):
        try:
            doc = read_json(f, "example module file")
            job = f.name == "job.json"
            check(doc, _JOB if job else _PROCESS, f, "example module file")
            want = JOB_FORMAT if job else FORMAT
            if doc.get("format") != want:
                raise FormatError(f"{f}: not a {want} file")
            if doc.get("version") != VERSION:
                raise FormatError(
                    f"{f}: version {doc.get('version')} of {want} (this "
                    f"perfweave reads version {VERSION})"
                )
            missing = [k for k in (_JOB if job else _PROCESS) if k not in doc]
            if missing:
                raise FormatError(f"{f}: no {missing[0]!r}")
        except (FormatError, OSError) as e:
            out.notes.append(f"example module: {e}; left out")
            continue
        out.function = doc["function"]
        if job:
            out.job = {k: doc[k] for k in _JOB if k not in ("format", "version")}
        else:
            out.processes.append(
                ExampleProcess(
                    **{k: doc[k] for k in _PROCESS if k not in ("format", "version", "function")}
                )
            )
    out.processes.sort(key=process_key)
    return out
