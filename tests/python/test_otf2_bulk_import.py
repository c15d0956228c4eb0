"""OTF2 import through the C callbacks of libperfweave-otf2.so (runtime/interop/otf2_read.c,
interop/otf2/bulk.py) against one Python call per event (interop/otf2/collector.py): the
same experiment, file for file, on the public Score-P traces, on archives that perfweave
wrote (every record type with perfweave's attributes, and a generated ring exchange), on
a Score-P-like hybrid archive with threads, accelerator streams and metrics (events only
counted), and where the definitions announce fewer events than the locations hold."""

import json
from pathlib import Path

import pytest

from perfweave.errors import PerfweaveError
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
    # the tables put aside beside the experiment are gone
    assert not list(tmp_path.glob(".perfweave-otf2.*"))
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
        # a Reading of each rank's locations, the ranks' events all
        assert len(sizes) == 4 and sum(sizes) == s["events"] > 4 * bulk.CHUNK
        assert_same((out, s), ref)


def _import_peaks(tmp_path, monkeypatch, ranks, steps):
    """Peak memory by tracemalloc (numpy reports its buffers there) of the read and of the
    writing of the experiment, importing a ring exchange of ranks x steps; and the bytes of
    each table read (a rank's)."""
    import tracemalloc

    tg = bench_tracegen()
    exp = tmp_path / f"ring-{ranks}"
    tg.write(exp, ranks, ranks * steps * tg.PER_ITER)
    anchor = Path(pw_otf2.export(exp, tmp_path / f"otf2-{ranks}" / "traces.otf2")["anchor"])
    peaks, tables = {}, []
    with monkeypatch.context() as m:
        real_add = importer._Importer._add_part

        def add_part(self, tab, *a, **k):
            tables.append(sum(v.nbytes for v in tab.values()) if tab else 0)
            return real_add(self, tab, *a, **k)

        m.setattr(importer._Importer, "_add_part", add_part)
        for name in ("read", "write"):
            real = getattr(importer._Importer, name)

            def peak(self, *a, real=real, name=name):
                tracemalloc.start()
                try:
                    return real(self, *a)
                finally:
                    peaks[name] = tracemalloc.get_traced_memory()[1]
                    tracemalloc.stop()

            m.setattr(importer._Importer, name, peak)
        s = pw_otf2.import_archive(anchor, tmp_path / f"mem-{ranks}")
    assert len(tables) == ranks and sum(tables) == 80 * s["events"]
    return peaks, max(tables), sum(tables)


def test_memory_is_one_ranks_not_the_archives(tmp_path, monkeypatch):
    """The C path reads a rank's locations at a time and puts each rank's table aside on
    disk, so that the import's memory is bounded by the largest rank's events, not the
    archive's: ring exchanges of 4 and 16 ranks x 1000 steps (26 000 events a rank,
    420 000 in all for 16)."""
    monkeypatch.setattr(bulk, "CHUNK", 4096)  # the chunk small beside a rank's table
    bulk.bulk_reader.cache_clear()
    p4, rank4, _ = _import_peaks(tmp_path, monkeypatch, 4, 1000)
    p16, rank, archive = _import_peaks(tmp_path, monkeypatch, 16, 1000)
    bulk.bulk_reader.cache_clear()
    assert rank == rank4
    # the read: a rank's table (80 bytes an event), the chunk's buffers (10 columns of
    # CHUNK rows, and attribute rows: a 4-byte mask and 8 bytes for each of perfweave's
    # 5 attributes), the table made of its blocks; 1 MiB for the rest
    chunk = (80 + 4 + 8 * 5) * bulk.CHUNK
    assert p16["read"] <= 2 * rank + chunk + (1 << 20), (p16, rank)
    # the write: a rank's table, its records and thread_records' temporaries (about 3
    # tables' worth, measured), then the profile a rank at a time
    assert p16["write"] <= 5 * rank + (1 << 20), (p16, rank)
    # four times the ranks of the same size: the same peaks (the whole table would be
    # four times as large), and far below the archive's table
    for k in ("read", "write"):
        assert p16[k] <= 1.25 * p4[k] + (1 << 20), (k, p4, p16)
        assert p16[k] < archive / 3, (k, p16, archive)


def test_no_room_for_the_tables_aside(tmp_path, monkeypatch):
    """A disk that fills while a rank's table is put aside: the line of a full disk under
    the experiment (as writing it says), not that the archive is unreadable, and nothing
    left behind."""
    import errno

    tg = bench_tracegen()
    tg.write(tmp_path / "ring", 2, 2 * 50 * tg.PER_ITER)
    anchor = Path(pw_otf2.export(tmp_path / "ring", tmp_path / "otf2" / "traces.otf2")["anchor"])
    bulk.bulk_reader.cache_clear()

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(importer.pickle, "dump", full)
    out = tmp_path / "out" / "x"
    out.parent.mkdir()
    with pytest.raises(PerfweaveError, match=r"out/x: cannot write: No space left"):
        pw_otf2.import_archive(anchor, out)
    assert not any(out.parent.iterdir())


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
