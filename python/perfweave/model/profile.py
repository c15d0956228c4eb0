"""The profile of a run, merged from the files of an experiment: every measured
module's calls by call site (the MPI module's, and any other that records calls).

Arrays keep the record layouts of the files (numpy structured arrays); function, object
and host indices are global to the profile. A function's id (sites' and hist's fn)
indexes `functions` and `families`; `modules` say which module owns which ids (docs/
format.md, "modules"). `from_literal` builds one from plain Python lists, for tests.
"""

from dataclasses import dataclass, field

import numpy as np

from perfweave._format import HIST_BUCKETS, STATES  # STATES: how ranks ended, by number
from perfweave._mpi import FUNCTIONS


# MPI calls that bracket the application's time rather than belong to it (mpi.spec's
# actions init and finalize)
BRACKET = tuple(n for n, f in FUNCTIONS.items() if f[1] in ("init", "finalize"))


def state_name(state):
    """A rank's state (its record's number) as the reports name it."""
    return STATES[state] if 0 <= state < len(STATES) else str(state)


@dataclass
class Profile:
    ranks: np.ndarray
    sites: np.ndarray
    frames: np.ndarray
    hist: np.ndarray
    functions: list
    families: list
    objects: list  # paths of the loaded objects that sites and frames name
    buildids: list  # parallel to objects
    hosts: list
    # the measured modules: dicts of name, version, first, count (their functions' ids
    # first..first+count-1) and the module's strings (mpi: library, flavor)
    modules: list = field(default_factory=list)
    world_size: int = 0
    hist_buckets: int = HIST_BUCKETS
    partial: bool = False
    notes: list = field(default_factory=list)
    counts: np.ndarray = None  # --counters: per (site row, event); see format.md
    counters: list = field(default_factory=list)  # their event names
    # the modules' arrays (dtypes.MODULE_ARRAY_DTYPES, each declared in its module's format
    # header: the mpi module's "comms", the communication matrix, format 6), by name, each
    # also an attribute (profile.comms); empty where the files have none: see format.md
    arrays: dict = field(default_factory=dict)

    def __post_init__(self):
        from perfweave.dtypes import COUNT_DTYPE, MODULE_ARRAY_DTYPES

        if self.counts is None:
            self.counts = np.zeros(0, COUNT_DTYPE)
        for name, dtype in MODULE_ARRAY_DTYPES.items():
            if self.arrays.get(name) is None:
                self.arrays[name] = np.zeros(0, dtype)

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays")
        if arrays is not None and name in arrays:
            return arrays[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name, value):
        arrays = self.__dict__.get("arrays")
        if arrays is not None and name in arrays:
            arrays[name] = value
        else:
            object.__setattr__(self, name, value)

    def module(self, name):
        """The entry of module `name` in `modules`, {} when it recorded nothing."""
        return next((m for m in self.modules if m.get("name") == name), {})

    def function_ids(self, name):
        """The ids of module `name`'s functions (an empty range when it has none)."""
        m = self.module(name)
        return np.arange(m.get("first", 0), m.get("first", 0) + m.get("count", 0))

    @property
    def mpi(self):
        """Whether MPI was initialised (ranks have rank numbers)."""
        return bool(len(self.ranks)) and bool((self.ranks["rank"] >= 0).any())

    def missing_ranks(self):
        if not self.mpi or not self.world_size:
            return []
        present = set(int(r) for r in self.ranks["rank"])
        return [r for r in range(self.world_size) if r not in present]

    @classmethod
    def from_literal(
        cls,
        functions,
        families,
        ranks,
        sites=(),
        objects=("app",),
        hist=(),
        hosts=("host",),
        world_size=None,
        **kw,
    ):
        """ranks: list of dicts (rank, app_ns, mpi_ns, ...); sites: dicts with rank, fn
        (name), object (index), offset, count, total_ns, min_ns, max_ns, bytes_sent,
        bytes_recv; hist: dicts with rank, fn (name), bucket, count, bytes, total_ns.
        modules (keyword): the measured modules; default one, "mpi", owning every
        function (with mpi_library and mpi_flavor keywords as its strings)."""
        from perfweave.dtypes import FRAME_DTYPE, HIST_DTYPE, RANK_DTYPE, SITE_DTYPE

        r = np.zeros(len(ranks), RANK_DTYPE)
        for i, d in enumerate(ranks):
            for k, v in d.items():
                r[i][k] = v
        s = np.zeros(len(sites), SITE_DTYPE)
        for i, d in enumerate(sites):
            d = dict(d)
            d["fn"] = functions.index(d["fn"])
            d.setdefault("first_frame", -1)
            d.setdefault("min_ns", d.get("total_ns", 0) // max(d.get("count", 1), 1))
            d.setdefault("max_ns", d.get("total_ns", 0) // max(d.get("count", 1), 1))
            for k, v in d.items():
                s[i][k] = v
        h = np.zeros(len(hist), HIST_DTYPE)
        for i, d in enumerate(hist):
            d = dict(d)
            d["fn"] = functions.index(d["fn"])
            for k, v in d.items():
                h[i][k] = v
        if "modules" not in kw:
            mpi = {"name": "mpi", "version": 3, "first": 0, "count": len(functions)}
            mpi["library"] = kw.pop("mpi_library", "")
            mpi["flavor"] = kw.pop("mpi_flavor", "")
            kw["modules"] = [mpi]
        return cls(
            ranks=r,
            sites=s,
            frames=np.zeros(0, FRAME_DTYPE),
            hist=h,
            functions=list(functions),
            families=list(families),
            objects=list(objects),
            buildids=[""] * len(objects),
            hosts=list(hosts),
            world_size=world_size if world_size is not None else len(ranks),
            **kw,
        )
