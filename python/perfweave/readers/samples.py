"""Call-stack samples of an experiment (perfweave run --sample): samples/NAME.samples
(fixed 400-byte records, SAMPLE_REC below) + samples/NAME.json (rank, threads, modules,
states), one pair per process (NAME: rank-R, or HOST.PID without MPI). Written by
runtime/modules/sampler.c; docs/format.md "Samples"."""
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfweave.errors import FormatError

FRAMES = 32
SAMPLE_COUNTERS = 4
SAMPLE_REC_V1 = np.dtype([("t", "<i8"), ("thread", "<i4"), ("state", "<i2"), ("depth", "<i2"),
                          ("module", "<i4", (FRAMES,)), ("offset", "<i8", (FRAMES,))])
# version 2: + the first --counters events at each sample (-1: not read)
SAMPLE_REC = np.dtype(SAMPLE_REC_V1.descr + [("counters", "<i8", (SAMPLE_COUNTERS,))])
assert SAMPLE_REC_V1.itemsize == 400 and SAMPLE_REC.itemsize == 432


@dataclass
class ProcessSamples:
    name: str
    meta: dict
    records: np.ndarray           # SAMPLE_REC
    modules: list                 # paths; records' module indexes them (-1: unknown)

    @property
    def rank(self):
        return int(self.meta.get("rank", -1))


def read_samples(exp):
    d = Path(exp) / "samples"
    out = []
    for meta_path in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError) as e:
            raise FormatError(f"{meta_path}: unreadable samples ({e})") from None
        if meta.get("format") != "perfweave-samples" or meta.get("version") not in (1, 2) \
                or meta.get("frames") != FRAMES:
            raise FormatError(f"{meta_path}: not perfweave samples version 1 or 2")
        dt = SAMPLE_REC if meta["version"] == 2 else SAMPLE_REC_V1
        raw = np.fromfile(meta_path.with_suffix(".samples"), np.uint8)
        n = len(raw) // dt.itemsize
        rec = raw[:n * dt.itemsize].view(dt)
        rec = rec[(rec["depth"] >= 0) & (rec["depth"] <= FRAMES)]
        out.append(ProcessSamples(meta_path.stem, meta, rec,
                                  [m[0] for m in meta.get("modules", [])]))
    return out
