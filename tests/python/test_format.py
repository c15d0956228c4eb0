"""The experiment format is declared once, in the C format headers, and perfweave/_format.py
is generated from them at build time by runtime/core/gen_format.c: what the generated
module holds, the generator's checks of the C layouts (a record numpy would misread fails
the build), and that the Python sources hold no copy of the format's names."""

import re
import subprocess
import types
from pathlib import Path

import numpy as np
import pytest

from perfweave import _format

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "runtime" / "core" / "gen_format.c"


def test_generated_module_holds_the_declared_format():
    f = _format
    # every file kind of the core and of the modules with files of their own
    assert set(f.FILES) >= {"profile", "trace", "timeline", "samples", "example", "example_job"}
    assert f.FILES["profile"].magic == "perfweave-profile" and f.FILES["profile"].directory == "."
    assert f.FILES["samples"].directory == "samples" and f.FILES["samples"].version >= 2
    # the records, in the sizes the runtime writes
    sizes = {k: v.itemsize for k, v in f.RECORDS.items()}
    assert sizes["event"] == 40 and sizes["timeline"] == 24
    assert sizes["sample"] == 16 + f.SAMPLE_FRAMES * 12 + f.SAMPLE_COUNTERS * 8 == 432
    assert f.RECORDS["sample"]["object"].shape == (f.SAMPLE_FRAMES,)
    # names by index, codes by name
    assert f.STATES == ["complete", "no-finalize", "abort", "signal", "killed"]
    assert f.FAMILIES == ["p2p", "coll", "rma", "sync", "file", "other"]
    assert f.ACTIVITIES == (["compute"] + ["mpi_" + x for x in f.FAMILIES] + ["sleep", "wait"])
    assert f.EVENT_TYPES["CALL"] == 1 and f.EVENT_TYPES["BLOCK"] == 15
    assert len(set(f.EVENT_TYPES.values())) == len(f.EVENT_TYPES)
    assert all(v & (v - 1) == 0 for v in f.EVENT_FLAGS.values())  # one bit each
    # the modules, in modules.def's order
    listed = re.findall(
        r"^PW_MODULE\((\w+)[,)]", (ROOT / "runtime/modules/modules.def").read_text(), re.M
    )
    assert f.MODULES == listed and "example" in listed


def _generate(tmp_path, parts_h):
    """Build gen_format against the format headers with PARTS_H as its pw_format_parts.h
    and run it: (exit status, stderr, the Python it wrote or None)."""
    (tmp_path / "pw_format_parts.h").write_text(parts_h)
    exe = tmp_path / "gen_format"
    subprocess.run(
        [
            "cc",
            "-std=c11",
            "-I",
            str(ROOT / "include"),
            "-I",
            str(ROOT / "runtime" / "modules"),
            "-I",
            str(tmp_path),
            "-o",
            str(exe),
            str(GEN),
        ],
        check=True,
        capture_output=True,
    )
    out = tmp_path / "_format.py"
    r = subprocess.run([str(exe), str(out)], capture_output=True, text=True)
    return r.returncode, r.stderr, out.read_text() if out.exists() else None


PART = """#define BAD_FIELDS(X, A) {fields}
typedef struct bad_rec {{ BAD_FIELDS(PW_FIELD_DECL, PW_ARRAY_DECL) }} bad_rec;
#define PW_FORMAT_bad(FILE, RECORD, NAMES, CODES, CONST, JSON) \\
    FILE(bad, "bad", "perfweave-bad", 3) RECORD(bad, BAD_FIELDS, bad_rec)
#define PW_FORMAT_PARTS(P) P(core) P(bad)
#define PW_PROFILE_ARRAY_PARTS(P) P(core){array_parts}
"""


def test_a_module_part_is_generated(tmp_path):
    fields = 'X(int64_t, "<i8", t) X(int32_t, "<i4", n) A(int16_t, "<i2", v, 2)'
    rc, err, text = _generate(tmp_path, PART.format(fields=fields, array_parts=""))
    assert rc == 0, err
    ns = types.ModuleType("_format")
    exec(compile(text, "_format.py", "exec"), vars(ns))
    # the dtypes are made at their first use: the names and constants need no numpy
    assert "RECORDS" not in vars(ns) and "np" not in vars(ns)
    assert ns.FILES["bad"] == ("bad", "bad", "perfweave-bad", 3)
    assert ns.RECORDS["bad"] == np.dtype([("t", "<i8"), ("n", "<i4"), ("v", "<i2", (2,))])
    assert ns.RECORDS["rank"] == _format.RECORDS["rank"]  # the core's part as well


@pytest.mark.parametrize("record", ["bad", "nothing"])
def test_a_modules_profile_array_follows_the_cores(tmp_path, record):
    """A module's array of the profile files (PW_PROFILE_ARRAYS_<module>, listed by the
    build in PW_PROFILE_ARRAY_PARTS) comes after the core's in PROFILE_ARRAYS, with its
    part and record; an array whose record the part does not declare fails the build."""
    fields = 'X(int64_t, "<i8", t)'
    parts = PART.format(fields=fields, array_parts=" P(bad)")
    parts += f"#define PW_PROFILE_ARRAYS_bad(X) X(bads, {record}, BAD_FIELDS, bad_rec)\n"
    rc, err, text = _generate(tmp_path, parts)
    if record == "nothing":
        assert rc == 1 and text is None
        assert "gen_format: bad: record nothing: profile array bads: no RECORD" in err
        return
    assert rc == 0, err
    ns = types.ModuleType("_format")
    exec(compile(text, "_format.py", "exec"), vars(ns))
    core = {k: v for k, v in _format.PROFILE_ARRAYS.items() if v[0] == "core"}
    assert ns.PROFILE_ARRAYS == {**core, "bads": ("bad", "bad")}
    assert list(ns.PROFILE_ARRAYS)[-1] == "bads"


@pytest.mark.parametrize(
    "fields, message",
    [
        ('X(int32_t, "<i4", n) X(int64_t, "<i8", t)', ", field t: padding before it"),
        ('X(int64_t, "<i8", t) X(int32_t, "<i4", n)', ": padding after the last field"),
        ('X(int64_t, "<i4", t)', ", field t: numpy code and C type differ in size"),
        ('X(int64_t, "<i8", t) A(int32_t, "<i8", v, 2)', ", field v: numpy code and C type"),
    ],
)
def test_a_record_numpy_would_misread_fails_the_build(tmp_path, fields, message):
    rc, err, text = _generate(tmp_path, PART.format(fields=fields, array_parts=""))
    assert rc == 1 and text is None
    assert f"gen_format: bad: record bad{message}" in err


def test_python_holds_no_copy_of_the_format():
    """The files' "format" strings and the families' list appear in the Python sources only
    through perfweave._format."""
    magics = {k.magic for k in _format.FILES.values()}
    families = re.compile(r"""["']p2p["'],\s*["']coll["'],\s*["']rma["']""")
    found = []
    for path in (ROOT / "python" / "perfweave").rglob("*.py"):
        text = path.read_text()
        found += [f"{path.name}: {m}" for m in magics if f'"{m}"' in text or f"'{m}'" in text]
        found += [f"{path.name}: the families" for _ in families.finditer(text)]
    assert not found
