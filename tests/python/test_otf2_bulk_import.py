"""OTF2 import through the C callbacks of libperfweave-otf2.so (runtime/interop/otf2_read.c,
interop/otf2/bulk.py) against one Python call per event (interop/otf2/collector.py): the
same experiment, file for file, on the public Score-P traces, on archives that perfweave
wrote (every record type with perfweave's attributes, and a generated ring exchange), on
a Score-P-like hybrid archive with threads, accelerator streams and metrics (events only
counted), and where the definitions announce fewer events than the locations hold."""

import json
from pathlib import Path

import numpy as np
import pytest

from perfweave.interop import otf2 as pw_otf2
from perfweave.interop.otf2 import bulk, importer
from test_interop import SHARED, bench_tracegen, rank0, rank1, rank2, write_experiment, write_hybrid

# experiment.json's wall-clock start where the archive has none: the time of the import
_NOW = ("start_time", "start_epoch", "end_time", "end_epoch")


def both(anchor, tmp_path, monkeypatch, name="x"):
    """The experiments imported from anchor through the C callbacks and through Python
    callbacks (a runtime library directory without libperfweave-otf2.so)."""
    bulk.bulk_reader.cache_clear()
    assert bulk.bulk_reader() is not None, "libperfweave-otf2.so has no import callbacks"
    c = tmp_path / f"{name}-c"
    sc = pw_otf2.import_archive(anchor, c)
    with monkeypatch.context() as m:
        m.setenv("PERFWEAVE_LIBDIR", str(tmp_path / "no-lib"))
        bulk.bulk_reader.cache_clear()
        assert bulk.bulk_reader() is None
        py = tmp_path / f"{name}-py"
        spy = pw_otf2.import_archive(anchor, py)
    bulk.bulk_reader.cache_clear()
    return (c, sc), (py, spy)


def assert_same(a, b):
    (c, sc), (py, spy) = a, b
    files = sorted(p.relative_to(c) for p in c.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(py) for p in py.rglob("*") if p.is_file())
    assert any(f.suffix == ".events" for f in files)
    for f in files:
        if f.name == "experiment.json":
            x, y = (json.loads((d / f).read_text()) for d in (c, py))
            for k in _NOW:
                x.pop(k), y.pop(k)
            assert x == y
        else:
            assert (c / f).read_bytes() == (py / f).read_bytes(), f
    for k in ("events", "records", "ranks", "notes", "skipped_locations", "skipped_events"):
        assert sc[k] == spy[k], k


@pytest.mark.parametrize("name", ["casita-10-ranks-tags", "pipit-ping-pong"])
def test_public_scorep_traces(tmp_path, monkeypatch, name):
    anchor = SHARED / "otf2" / name / "traces.otf2"
    a, b = both(anchor, tmp_path, monkeypatch)
    assert_same(a, b)
    # the events announced are those read: none was lost on the way
    exp = json.loads((a[0] / "experiment.json").read_text())
    assert not any("announce" in n for n in exp["import_notes"])
    assert a[1]["records"] > 0


def test_perfweave_archives_with_attributes(tmp_path, monkeypatch):
    """Every record type (the attributes perfweave writes where an event cannot say
    it), and a generated ring exchange of 3 ranks x 200 steps."""
    lit = write_experiment(tmp_path / "lit", {0: rank0(), 1: rank1(), 2: rank2()})
    anchor = Path(pw_otf2.export(lit)["anchor"])
    a, b = both(anchor, tmp_path, monkeypatch, "lit")
    assert_same(a, b)
    tg = bench_tracegen()
    exp = tmp_path / "ring"
    nrec = tg.write(exp, 3, 3 * 200 * tg.PER_ITER)
    anchor = Path(pw_otf2.export(exp, tmp_path / "ring-otf2" / "traces.otf2")["anchor"])
    a, b = both(anchor, tmp_path, monkeypatch, "ring")
    assert_same(a, b)
    assert a[1]["records"] == nrec


def test_threads_streams_and_metrics(tmp_path, monkeypatch):
    """Events of kinds that are only counted (Metric, ThreadFork, ...) and locations
    that are skipped: the same counts either way."""
    anchor = tmp_path / "hybrid" / "traces.otf2"
    want = write_hybrid(anchor)
    a, b = both(anchor, tmp_path, monkeypatch)
    assert_same(a, b)
    imp = json.loads((a[0] / "experiment.json").read_text())["import"]
    assert imp["skipped_events"] == want["skipped_events"]


def test_locations_beyond_what_the_definitions_announce(tmp_path, monkeypatch):
    """Each location's events go to a block of the table as large as its definition
    announces; an archive may hold more (or a location be undefined): those wait aside
    and are put after their location's block. Blocks of half, or none, give the
    table that blocks of the right size give."""
    tg = bench_tracegen()
    exp = tmp_path / "ring"
    tg.write(exp, 4, 4 * 300 * tg.PER_ITER)
    anchor = Path(pw_otf2.export(exp, tmp_path / "ring-otf2" / "traces.otf2")["anchor"])
    _, ref = both(anchor, tmp_path, monkeypatch, "ref")
    monkeypatch.setattr(bulk, "CHUNK", 4096)  # many chunks of a small trace
    real = bulk.Reading
    for shrink in (lambda n: n // 2, lambda n: 0, lambda n: n + 7):
        sizes = []

        def reading(lib, _otf2, attr_names, flush, blocks, shrink=shrink, sizes=sizes):
            sizes.append(sum(blocks.values()))
            return real(lib, _otf2, attr_names, flush, {k: shrink(v) for k, v in blocks.items()})

        with monkeypatch.context() as m:
            m.setattr(importer, "Reading", reading)
            out = tmp_path / f"shrunk-{len(list(tmp_path.glob('shrunk-*')))}"
            s = pw_otf2.import_archive(anchor, out)
        assert sizes and sizes[0] == s["events"] > 4 * bulk.CHUNK
        assert_same((out, s), ref)


def test_reading_keeps_a_chunk_not_the_trace(tmp_path, monkeypatch):
    """The C path keeps the table (its columns) and one chunk; the Python path a tuple per
    event besides. Peak memory of the read, by tracemalloc (numpy reports its buffers
    there): a ring exchange of 4 x 2000 steps (about 200 000 events)."""
    import tracemalloc

    tg = bench_tracegen()
    exp = tmp_path / "ring"
    tg.write(exp, 4, 4 * 2000 * tg.PER_ITER)
    anchor = Path(pw_otf2.export(exp, tmp_path / "ring-otf2" / "traces.otf2")["anchor"])
    peaks = {}
    for path in ("c", "py"):
        with monkeypatch.context() as m:
            if path == "py":
                m.setenv("PERFWEAVE_LIBDIR", str(tmp_path / "no-lib"))
            bulk.bulk_reader.cache_clear()
            seen = {}
            real = importer._Importer.read

            def read(self, seen=seen, real=real):
                tracemalloc.start()
                try:
                    real(self)
                    seen["peak"] = tracemalloc.get_traced_memory()[1]
                    seen["events"] = self.nevents
                    seen["kept"] = sum(v.nbytes for v in self.table.values())
                finally:
                    tracemalloc.stop()

            m.setattr(importer._Importer, "read", read)
            pw_otf2.import_archive(anchor, tmp_path / f"mem-{path}")
        peaks[path] = seen
    bulk.bulk_reader.cache_clear()
    c, py = peaks["c"], peaks["py"]
    # the table (80 bytes an event) and the chunk's buffers: 10 columns of CHUNK rows, and
    # attribute rows (a 4-byte mask and 8 bytes for each of perfweave's 5 attributes),
    # with 1 MiB for the rest
    chunk = (80 + 4 + 8 * 5) * bulk.CHUNK
    assert c["peak"] <= c["kept"] + chunk + (1 << 20), c
    assert c["kept"] == 80 * c["events"]
    assert py["peak"] > 2 * c["peak"], (py, c)
    assert np.isfinite(c["peak"])


def test_more_event_kinds_than_counters(tmp_path, monkeypatch):
    """An otf2 package that knows more kinds of event than otf2_read.c has counting
    callbacks for (a newer OTF2): the import reads through Python callbacks instead,
    and gives the same experiment."""
    anchor = tmp_path / "hybrid" / "traces.otf2"
    write_hybrid(anchor)
    bulk.bulk_reader.cache_clear()
    lib = bulk.bulk_reader()
    used = []
    real = importer._Importer._read_each

    def read_each(self, handle):
        used.append(True)
        return real(self, handle)

    monkeypatch.setattr(lib, "pw_otf2r_slots", lambda: 0)
    monkeypatch.setattr(importer._Importer, "_read_each", read_each)
    s = pw_otf2.import_archive(anchor, tmp_path / "fallback")
    monkeypatch.undo()
    bulk.bulk_reader.cache_clear()
    assert used == [True]
    a, _ = both(anchor, tmp_path, monkeypatch)
    assert_same(a, (tmp_path / "fallback", s))
