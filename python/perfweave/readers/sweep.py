"""Reader of a placement sweep's directory (`perfweave placement sweep -o DIR`;
docs/format.md "Placement sweep"): its sweep.json document, as analysis/sweep.py
SweepResult.to_json() wrote it. The runs' experiments beside it are ordinary experiment
directories (readers/experiment.py)."""

import json
import os

from perfweave.errors import FormatError

NAME = "sweep.json"


def is_sweep(path):
    """Whether path is a sweep directory (it holds sweep.json)."""
    return os.path.isfile(os.path.join(path, NAME))


def read_sweep(path):
    """The sweep.json document of the sweep directory path (a dict); FormatError when it
    cannot be read or is not JSON."""
    f = os.path.join(path, NAME)
    try:
        with open(f, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as e:
        raise FormatError(f"{f}: {e.strerror}") from None
    except ValueError as e:
        raise FormatError(f"{f}: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise FormatError(f"{f}: not a placement sweep's document")
    return doc
