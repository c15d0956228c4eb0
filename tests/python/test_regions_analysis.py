"""The regions module's Python side (model/regions.py, analysis/regions.py, the report's
section) on literals whose answers are arithmetic: intervals of known length and MPI
time, samples at known times in known threads."""

import numpy as np
import pytest

from perfweave.analysis.regions import analyze, attribute
from perfweave.analysis.samples.classification import ACTIVITIES
from perfweave.model.regions import Regions
from perfweave.model.samples import ProcessSamples
from perfweave.report.sections.regions import SECTION


def literal():
    ms = 1_000_000
    return Regions.from_literal(
        [
            {"name": "solve", "kind": "phase", "t_begin": 0, "t_end": 100 * ms},
            {
                "name": "step",
                "t_begin": 10 * ms,
                "t_end": 50 * ms,
                "mpi_ns": 5 * ms,
                "mpi_calls": 3,
            },
            {
                "name": "halo",
                "depth": 1,
                "t_begin": 20 * ms,
                "t_end": 30 * ms,
                "mpi_ns": 5 * ms,
                "mpi_calls": 3,
            },
            {"name": "step", "t_begin": 60 * ms, "t_end": 90 * ms},
            {"name": "other-thread", "thread": 1001, "t_begin": 0, "t_end": 100 * ms},
            {"name": "off", "kind": "off", "t_begin": 95 * ms, "t_end": 99 * ms},
            {"name": "step", "rank": 1, "t_begin": 0, "t_end": 70 * ms},
        ]  # fmt: skip
    )


def test_sums_per_region_and_rank():
    res = analyze(literal())
    by = {(r["kind"], r["name"]): r for r in res.regions}
    step = by[("region", "step")]
    assert (step["ranks"], step["count"]) == (2, 3)
    assert step["time_s"] == pytest.approx(0.04 + 0.03 + 0.07)
    assert step["max_rank_s"] == pytest.approx(0.07)  # rank 1's one step
    assert (step["mpi_s"], step["mpi_calls"]) == (pytest.approx(0.005), 3)
    assert by[("region", "halo")]["mpi_pct"] == pytest.approx(50.0)
    assert res.off_s == pytest.approx(0.004) and ("off", "off") not in by
    assert res.regions["kind"][0] == "phase"  # phases first
    per = {(r["name"], r["rank"]): r for r in res.per_rank}
    assert per[("step", 0)]["count"] == 2 and per[("step", 0)]["max_s"] == pytest.approx(0.04)


def test_samples_charged_to_the_regions_around_them():
    ms = 1_000_000
    # thread 0 (tid 1000): in halo (and step, solve), in step only, in solve only;
    # thread 1 (tid 1001): inside other-thread; rank 1's samples are another process's
    procs = [
        ProcessSamples.from_literal(
            [
                {"frames": [], "t": 25 * ms, "activity": "mpi_p2p"},
                {"frames": [], "t": 40 * ms},
                {"frames": [], "t": 55 * ms, "activity": "io"},
                {"frames": [], "t": 65 * ms, "thread": 1},
            ],
            threads=2,
            activities=tuple(ACTIVITIES),  # the activities as classified
        )
    ]
    activity = [procs[0].records["activity"].astype(np.int64)]
    res = analyze(literal(), procs, list(ACTIVITIES), activity)
    by = {(r["kind"], r["name"]): r for r in res.regions}
    assert by[("region", "halo")]["samples"] == 1
    assert by[("region", "halo")]["mpi_samples_pct"] == 100
    assert by[("region", "step")]["samples"] == 2  # halo's and its own
    assert by[("region", "step")]["compute_samples_pct"] == 50
    assert by[("phase", "solve")]["samples"] == 3  # thread 0's three
    assert by[("region", "other-thread")]["samples"] == 1
    iv = literal().intervals
    region, phase = attribute(
        iv, np.array([1000, 1000]), np.array([1000, 1000]), np.array([25, 55]) * ms
    )
    assert list(iv["name"][region[:1]]) == ["halo"] and region[1] == -1
    assert list(iv["name"][phase]) == ["solve", "solve"]


def test_section_text_and_absence():
    data = {"regions": analyze(literal()).to_json()}

    class View:
        width, max_rows = 120, 50

    text = "\n".join(SECTION.text(data, View()))
    assert "Regions and phases" in text and "measurement off for 4.000ms" in text
    assert SECTION.text({}, View()) == []
    assert not Regions() and Regions.from_literal([]) is not None


def test_filter_rules_and_scorep_files(tmp_path):
    from perfweave.options import filter_rules

    assert filter_rules("exclude:MPI_Comm_rank, MPI_Wtime;exclude-region:init*;include:MPI_*") == (
        "exclude:MPI_Comm_rank;exclude:MPI_Wtime;exclude-region:init*;include:MPI_*"
    )
    f = tmp_path / "scorep.filt"
    f.write_text(
        "# comment\nSCOREP_REGION_NAMES_BEGIN\n  EXCLUDE *\n  INCLUDE MPI_Send MPI_Recv # keep\n"
        "SCOREP_REGION_NAMES_END\n"
    )
    assert filter_rules(f"@{f}").split(";") == [
        "exclude:*", "exclude-region:*", "include:MPI_Send", "include-region:MPI_Send",
        "include:MPI_Recv", "include-region:MPI_Recv",
    ]  # fmt: skip
    for bad in ("exclude", "keep:x", ";", "exclude:" + "x" * 200):
        with pytest.raises(ValueError, match="--filter"):
            filter_rules(bad)
    f.write_text("SCOREP_FILE_NAMES_BEGIN\nEXCLUDE *.c\nSCOREP_FILE_NAMES_END\n")
    with pytest.raises(ValueError, match="not supported"):
        filter_rules(f"@{f}")
