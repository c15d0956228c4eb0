"""perfweave.readers.experiment.open_experiment on experiment directories built by
hand: experiment.json plus profile.pwprof, partial/rank-R.pwprof or
procs/HOST.PID.pwprof (conftest.write_pwprof)."""

import json

import numpy as np
import pytest

from perfweave.analysis.mpi import analyze
from perfweave.errors import FormatError, PerfweaveError
from perfweave.readers.experiment import rank_ranges as _ranges, open_experiment
from perfweave.symbols import Location

FUNCS = {
    "functions": ["MPI_Init", "MPI_Send", "MPI_Finalize"],
    "families": ["other", "p2p", "other"],
}


def rank_row(rank, state=0, app_ns=1000, mpi_ns=100, host=0, **kw):
    return dict(
        rank=rank,
        host=host,
        pid=1000 + rank,
        state=state,
        app_ns=app_ns,
        mpi_ns=mpi_ns,
        mpi_calls=3,
        table_capacity=4096,
        **kw,
    )


def header(world_size, **kw):
    h = dict(FUNCS, world_size=world_size, hosts=["node01"], objects=["/bin/app"], buildids=["b0"])
    h.update(kw)
    return h


class FakeSymbolizer:
    def resolve(self, module, offsets):
        return [Location(module, o, f"f{o:x}") for o in offsets]


# ---- complete and partial experiments ----


def test_reduced_profile_is_complete(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(
        exp / "profile.pwprof",
        header(2, mpi_library="MPICH 4.0", mpi_flavor="mpich"),
        ranks=[rank_row(0), rank_row(1)],
        sites=[{"rank": 0, "fn": 1, "object": 0, "offset": 0x10, "count": 1, "total_ns": 5}],
    )
    e = open_experiment(exp)
    assert e.state == "complete"
    assert e.partial is False
    assert e.path == exp
    assert e.meta["command"] == ["./app", "-x"]
    assert e.meta["exit_status"] == {"code": 0}
    p = e.profile
    assert p.ranks["rank"].tolist() == [0, 1]
    assert p.world_size == 2
    assert p.missing_ranks() == []
    assert p.mpi is True
    assert p.functions == ["MPI_Init", "MPI_Send", "MPI_Finalize"]
    assert p.families == ["other", "p2p", "other"]
    assert p.module("mpi")["library"] == "MPICH 4.0"
    assert p.module("mpi")["flavor"] == "mpich"
    assert p.function_ids("mpi").tolist() == [0, 1, 2]
    assert p.notes == []
    assert e.processes is None


def test_partial_ranks_missing_one(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(exp / "partial" / "rank-0.pwprof", header(3, partial=True), ranks=[rank_row(0, state=1)])
    pwprof(exp / "partial" / "rank-1.pwprof", header(3, partial=True), ranks=[rank_row(1, state=3)])
    e = open_experiment(exp)
    assert e.state == "partial"
    assert e.partial is True
    p = e.profile
    assert sorted(p.ranks["rank"].tolist()) == [0, 1]
    assert p.world_size == 3
    assert p.missing_ranks() == [2]
    assert p.notes[0] == (
        "partial: the run did not complete MPI_Finalize; each rank saved its "
        "own data (rank states: no-finalize, signal)"
    )
    assert p.notes[1] == "no data from 1 of 3 ranks: 2"
    assert len(p.notes) == 2


def test_missing_rank_ranges(experiment_dir, pwprof):
    exp = experiment_dir()
    for r in (0, 1, 5, 6, 8):
        pwprof(exp / "partial" / f"rank-{r}.pwprof", header(10), ranks=[rank_row(r, state=2)])
    e = open_experiment(exp)
    assert e.profile.missing_ranks() == [2, 3, 4, 7, 9]
    assert "no data from 5 of 10 ranks: 2-4,7,9" in e.profile.notes


@pytest.mark.parametrize(
    "values,text", [([], ""), ([3], "3"), ([0, 1, 2], "0-2"), ([1, 3, 4, 5, 9, 10], "1,3-5,9-10")]
)
def test_ranges(values, text):
    assert _ranges(values) == text


def test_objects_merged_by_path_and_buildid(experiment_dir, pwprof):
    exp = experiment_dir()
    # the same two objects, listed in different orders by the two ranks, plus an object
    # with the same path as the app but another build id (a rebuilt binary)
    pwprof(
        exp / "partial" / "rank-0.pwprof",
        header(2, objects=["/bin/app", "/lib/libmpi.so"], buildids=["aa", "bb"], hosts=["node01"]),
        ranks=[rank_row(0, host=0)],
        sites=[
            {
                "rank": 0,
                "fn": 1,
                "object": 0,
                "offset": 0x10,
                "count": 2,
                "total_ns": 2_000_000_000,
                "nframes": 1,
                "first_frame": 0,
            },
            {
                "rank": 0,
                "fn": 1,
                "object": 1,
                "offset": 0x20,
                "count": 1,
                "total_ns": 1_000_000_000,
            },
            {"rank": 0, "fn": 1, "object": -1, "offset": 0, "count": 1, "total_ns": 1},
        ],
        frames=[{"object": 1, "offset": 0x99}],
    )
    pwprof(
        exp / "partial" / "rank-1.pwprof",
        header(
            2,
            objects=["/lib/libmpi.so", "/bin/app", "/bin/app"],
            buildids=["bb", "aa", "cc"],
            hosts=["node02", "node01"],
        ),
        ranks=[rank_row(1, host=1)],
        sites=[
            {
                "rank": 1,
                "fn": 1,
                "object": 1,
                "offset": 0x10,
                "count": 3,
                "total_ns": 4_000_000_000,
                "nframes": 1,
                "first_frame": 0,
            },
            {
                "rank": 1,
                "fn": 1,
                "object": 2,
                "offset": 0x10,
                "count": 1,
                "total_ns": 1_000_000_000,
            },
        ],
        frames=[{"object": 0, "offset": 0x99}],
    )
    p = open_experiment(exp).profile
    assert p.objects == ["/bin/app", "/lib/libmpi.so", "/bin/app"]
    assert p.buildids == ["aa", "bb", "cc"]
    assert p.hosts == ["node01", "node02"]
    order = np.argsort(p.ranks["rank"])
    assert p.ranks["host"][order].tolist() == [0, 0]  # both ran on node01
    s = p.sites
    assert s["rank"].tolist() == [0, 0, 0, 1, 1]
    assert s["object"].tolist() == [0, 1, -1, 0, 2]  # -1 (unknown) stays -1
    assert s["offset"].tolist() == [0x10, 0x20, 0, 0x10, 0x10]
    # frame indices are rebased onto the concatenated frames array
    assert s["first_frame"].tolist() == [0, -1, -1, 1, -1]
    assert p.frames["object"].tolist() == [1, 1]  # libmpi.so in both files
    assert p.frames["offset"].tolist() == [0x99, 0x99]

    # so the analysis sees one call site on both ranks for (app, 0x10, same stack)
    m = analyze(p, symbolizer=FakeSymbolizer()).to_json()
    site = [c for c in m["callsites"] if c["calls"] == 5]
    assert len(site) == 1
    assert site[0]["ranks"] == 2
    assert site[0]["per_rank_time_s"] == {0: 2.0, 1: 4.0}
    assert site[0]["location"]["object"] == "/bin/app"
    assert site[0]["stack_where"] == ["f99 (libmpi.so+0x99)"]
    # the rebuilt binary's site at the same offset is a site of its own
    assert sorted(c["calls"] for c in m["callsites"]) == [1, 1, 1, 5]


def test_function_tables_merged_by_module_and_name(experiment_dir, pwprof):
    """Files whose function tables differ (another build of the runtime, or a process
    that never loaded a module) merge by (module, function name): each file's ids are
    mapped into the experiment's table."""
    exp = experiment_dir()
    site = {"object": 0, "offset": 0x10, "count": 2, "total_ns": 7}
    pwprof(
        exp / "partial" / "rank-0.pwprof",
        header(2),
        ranks=[rank_row(0)],
        sites=[dict(site, rank=0, fn=1)],
        hist=[{"rank": 0, "fn": 1, "bucket": 3, "count": 2, "bytes": 10}],
    )
    pwprof(
        exp / "partial" / "rank-1.pwprof",
        header(
            2,
            functions=["sched_yield", "MPI_Init", "MPI_Recv", "MPI_Finalize"],
            families=["other", "other", "p2p", "other"],
            modules=[
                {"name": "example", "version": 1, "first": 0, "count": 1},
                {"name": "mpi", "version": 3, "first": 1, "count": 3, "flavor": "mpich"},
            ],
        ),
        ranks=[rank_row(1)],
        sites=[dict(site, rank=1, fn=2), dict(site, rank=1, fn=0)],
        hist=[{"rank": 1, "fn": 2, "bucket": 4, "count": 2, "bytes": 20}],
    )
    p = open_experiment(exp).profile
    assert p.functions == ["MPI_Init", "MPI_Send", "MPI_Finalize", "MPI_Recv", "sched_yield"]
    assert p.families == ["other", "p2p", "other", "p2p", "other"]
    assert [(m["name"], m["first"], m["count"]) for m in p.modules] == [
        ("mpi", 0, 4),
        ("example", 4, 1),
    ]
    assert p.module("mpi")["flavor"] == "mpich"
    named = [(int(r), p.functions[f]) for r, f in zip(p.sites["rank"], p.sites["fn"])]
    assert named == [(0, "MPI_Send"), (1, "MPI_Recv"), (1, "sched_yield")]
    assert [p.functions[f] for f in p.hist["fn"]] == ["MPI_Send", "MPI_Recv"]
    # the MPI analysis sees the MPI module's calls only
    m = analyze(p, symbolizer=FakeSymbolizer()).to_json()
    assert sorted(f["name"] for f in m["functions"]) == ["MPI_Recv", "MPI_Send"]


def test_corrupt_partial_file_is_skipped_with_a_note(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(exp / "partial" / "rank-0.pwprof", header(2), ranks=[rank_row(0, state=1)])
    bad = exp / "partial" / "rank-1.pwprof"
    good = pwprof(exp / "x.pwprof", header(2), ranks=[rank_row(1)]).read_bytes()
    bad.write_bytes(good[: good.index(b"\n") + 1 + 50])  # cut inside the ranks array
    (exp / "x.pwprof").unlink()
    e = open_experiment(exp)
    assert e.state == "partial"
    assert e.profile.ranks["rank"].tolist() == [0]
    assert e.profile.missing_ranks() == [1]
    skipped = [n for n in e.profile.notes if n.startswith("skipped ")]
    assert len(skipped) == 1
    assert str(bad) in skipped[0] and "truncated" in skipped[0]
    assert e.warnings == skipped
    assert "no data from 1 of 2 ranks: 1" in e.profile.notes


def test_reduced_profile_wins_over_partial_files(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(exp / "profile.pwprof", header(2), ranks=[rank_row(0), rank_row(1)])
    pwprof(exp / "partial" / "rank-0.pwprof", header(2), ranks=[rank_row(0, state=1)])
    pwprof(exp / "partial" / "rank-1.pwprof", header(2), ranks=[rank_row(1, state=1)])
    e = open_experiment(exp)
    assert e.state == "complete"
    assert e.profile.ranks["state"].tolist() == [0, 0]
    assert e.profile.notes == ["2 rank files in partial/ ignored: the reduced profile is complete"]


def test_dropped_calls_note(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(
        exp / "profile.pwprof",
        header(2),
        ranks=[rank_row(0, sites_dropped=5), rank_row(1, sites_dropped=7)],
    )
    notes = open_experiment(exp).profile.notes
    assert notes == [
        "12 calls exceeded the call-site bound (4096 sites per thread) and were "
        "folded into one overflow site per function; raise --max-callsites"
    ]


def test_program_without_mpi(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(
        exp / "procs" / "node01.4242.pwprof",
        {"functions": [], "families": [], "partial": True, "world_size": 1},
        ranks=[{"rank": -1, "pid": 4242, "state": 0}],
    )
    e = open_experiment(exp)
    assert e.state == "complete"
    assert e.profile.mpi is False
    assert e.processes is None
    assert e.profile.ranks["pid"].tolist() == [4242]


def test_program_without_mpi_killed(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(
        exp / "procs" / "node01.4242.pwprof",
        {"world_size": 1},
        ranks=[{"rank": -1, "pid": 4242, "state": 3}],
    )
    assert open_experiment(exp).state == "partial"


def test_helper_processes_kept_apart(experiment_dir, pwprof):
    exp = experiment_dir()
    pwprof(exp / "profile.pwprof", header(1), ranks=[rank_row(0)])
    pwprof(exp / "procs" / "node01.1.pwprof", {"world_size": 1}, ranks=[{"rank": -1, "pid": 1}])
    pwprof(exp / "procs" / "node01.2.pwprof", {"world_size": 1}, ranks=[{"rank": -1, "pid": 2}])
    e = open_experiment(exp)
    assert e.profile.ranks["rank"].tolist() == [0]
    assert sorted(e.processes.ranks["pid"].tolist()) == [1, 2]


# ---- errors ----


def test_no_directory(tmp_path):
    with pytest.raises(PerfweaveError, match="no such experiment directory"):
        open_experiment(tmp_path / "absent")


def test_no_experiment_json(tmp_path, pwprof):
    pwprof(tmp_path / "exp" / "profile.pwprof", header(1), ranks=[rank_row(0)])
    with pytest.raises(PerfweaveError) as e:
        open_experiment(tmp_path / "exp")
    assert "not a perfweave experiment (no experiment.json)" in str(e.value)
    assert not isinstance(e.value, FormatError)


@pytest.mark.parametrize(
    "content", ['{"format": "perfweave-experiment", "vers', "", "\x00\xff garbage"]
)
def test_corrupt_experiment_json(tmp_path, content):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "experiment.json").write_text(content, errors="surrogateescape")
    with pytest.raises(FormatError, match=r"experiment.json: corrupt"):
        open_experiment(exp)


@pytest.mark.parametrize(
    "meta,message",
    [
        ([1, 2], "not a perfweave experiment description"),
        ({"format": "something", "version": 1}, "not a perfweave experiment description"),
        (
            {"format": "perfweave-experiment", "version": 7},
            "experiment format version 7 not supported",
        ),
    ],
)
def test_wrong_experiment_json(tmp_path, meta, message):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "experiment.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match=message):
        open_experiment(exp)


def test_corrupt_reduced_profile_is_an_error(experiment_dir):
    exp = experiment_dir()
    (exp / "profile.pwprof").write_bytes(b'{"format":"perfweave-profile","version":1}\nxx')
    with pytest.raises(FormatError, match="profile.pwprof"):
        open_experiment(exp)


def test_no_data_running(experiment_dir):
    exp = experiment_dir(state="running")
    with pytest.raises(PerfweaveError, match="the run has not finished"):
        open_experiment(exp)


def test_no_data_finished(experiment_dir):
    exp = experiment_dir()
    with pytest.raises(PerfweaveError, match="no profile data"):
        open_experiment(exp)


# ---- the datasets beside the profile (readers/datasets.py) ----


def test_data_kinds_are_read_on_first_use_and_kept(experiment_dir, pwprof, monkeypatch):
    from perfweave.readers import datasets

    exp = experiment_dir()
    pwprof(exp / "profile.pwprof", header(1), ranks=[rank_row(0)])
    e = open_experiment(exp)
    reads = []
    monkeypatch.setitem(
        datasets.DATASETS,
        "samples",
        datasets.Dataset("samples", "samples", lambda path: reads.append(path) or ["p0"], "test"),
    )
    assert e.samples == ["p0"] and e.samples is e.samples
    assert reads == [exp]  # read once
    assert e.timelines == []  # no timeline/: an empty model
    with pytest.raises(PerfweaveError, match="no traces in this experiment"):
        e.traces.ranks  # traces: read rank by rank, on demand
    with pytest.raises(AttributeError, match="no attribute 'spectra'"):
        e.spectra
