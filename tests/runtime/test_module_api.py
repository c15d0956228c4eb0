"""The module contract's two declarations (docs/architecture.md "Adding a module").

The core's interface to module libraries is one table, runtime/core/module_api.def:
libperfweave.so exports exactly its pw_* names, and each MPI flavour library
(libperfweave-mpi-FLAVOR.so, built apart) takes every pw_* symbol it uses from there and
defines none of them, so it holds no second copy of core code or state (the keyed call-site
tables of the communication matrix were once compiled into it).

A module's array of the profile files is declared in its own format header (the mpi
module's "comms", format/mpi.h PW_PROFILE_ARRAYS_mpi) and written by the core's generic
writer: the profile keeps the layout it had when the array was the core's
(golden/profile_layout.json: the header's keys, the arrays in file order with their
records, taken from a profile written by the build before the move), back to back, and
the matrix's rows are the program's messages, known by construction
(programs/comm_matrix.c)."""

import json
import re
import subprocess
from pathlib import Path

import numpy as np

import perfweave
from perfweave.readers.profile import read_profile

ROOT = Path(__file__).resolve().parents[2]
LIB = Path(perfweave.__file__).parent / "lib"
CORE = LIB / "libperfweave.so"
GOLDEN = Path(__file__).parent / "golden" / "profile_layout.json"


def api_names():
    text = (ROOT / "runtime/core/module_api.def").read_text()
    names = re.findall(r"^PW_API\((\w+)\)$", text, re.M)
    assert len(names) == len(set(names)) > 0
    return set(names)


def symbols(lib, dynamic=True):
    """{name: nm's type letter} of lib's symbols (its dynamic table, or the whole one)."""
    out = subprocess.run(
        ["nm", *(["-D"] if dynamic else []), str(lib)], capture_output=True, text=True, check=True
    ).stdout
    return {f[-1]: f[-2] for f in (ln.split() for ln in out.splitlines()) if len(f) >= 2}


def mpi_libraries():
    libs = sorted(LIB.glob("libperfweave-mpi-*.so"))
    assert libs, f"no MPI flavour library in {LIB}"
    return libs


def test_the_core_exports_exactly_the_table():
    exported = {n for n, t in symbols(CORE).items() if t != "U" and n.startswith("pw_")}
    api = api_names()
    assert exported == api, exported ^ api
    assert {"pw_keyed_merge", "pw_keyed_create", "pw_profile_array_set"} <= exported


def test_mpi_libraries_use_the_cores_table_and_copy_none_of_it():
    api = api_names()
    for lib in mpi_libraries():
        dyn = symbols(lib)
        used = {n for n, t in dyn.items() if t == "U" and n.startswith("pw_")}
        assert used <= api, (lib.name, used - api)
        # the matrix's keyed tables are the core's
        assert {"pw_keyed_create", "pw_keyed_merge", "pw_profile_array_set"} <= used, lib.name
        defined = {n for n, t in dyn.items() if t != "U" and n.startswith("pw_")}
        assert defined == {"pw_mpi_wrapper_table"}, (lib.name, defined)
        # nor a hidden copy: its whole symbol table (the library is not stripped)
        every = symbols(lib, dynamic=False)
        assert "pw_mpi_wrapper_table" in every, f"{lib.name} has no symbol table"
        copies = {n for n, t in every.items() if t not in "Uw" and (n in api or "keyed" in n)}
        assert not copies, (lib.name, copies)


def expected_world(n):
    """(sender, receiver) -> [messages, bytes] on MPI_COMM_WORLD: comm_matrix.c's ring,
    Isend and ANY_SOURCE messages (its header comment's constants)."""
    want = {}
    for r in range(n):
        for d, msgs, nbytes in (
            ((r + 1) % n, 3, 3 * 100 * (r + 1)),
            ((r + 2) % n, 2, 2 * 64 * (r + 1)),
            (0, 1 if r else 0, 8 * (r + 1) if r else 0),
        ):
            w = want.setdefault((r, d), [0, 0])
            w[0] += msgs
            w[1] += nbytes
    return {k: v for k, v in want.items() if v[0]}


def test_profile_layout_unchanged_and_matrix_from_the_modules_array(mpi, build, run_pw):
    n = 3
    r = run_pw(mpi.launch(n) + [build(mpi, "comm_matrix.c")])
    pf = read_profile(r.exp / "profile.pwprof")
    golden = json.loads(GOLDEN.read_text())
    assert list(pf.header) == golden["header_keys"]
    arrays = pf.header["arrays"]
    assert [[k, a["itemsize"], a["dtype"]] for k, a in arrays.items()] == golden["arrays"]
    offsets = np.cumsum([0] + [a["count"] * a["itemsize"] for a in arrays.values()])
    assert [a["offset"] for a in arrays.values()] == offsets[:-1].tolist()
    assert pf.header["data_bytes"] == offsets[-1]
    # the rows the mpi module set (pw_profile_array_set), through the API
    df = r.open().comm_matrix()
    world = df[df["comm_name"] == "MPI_COMM_WORLD"]
    got = {
        (s, d): [m, b]
        for s, d, m, b in world[["sender", "receiver", "messages", "bytes"]].itertuples(index=False)
    }
    assert got == expected_world(n)
    assert len(pf.arrays["comms"]) and set(pf.arrays["comms"]["rank"]) == set(range(n))
