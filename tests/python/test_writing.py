"""perfweave.writing: the marks of files that could not be written, as the runtime
(runtime/core/writer.c, pw_file_failed) and perfweave run make them."""

import datetime
import json
import re

import pytest

from perfweave import writing


def test_marks_name_the_file_and_the_error(tmp_path):
    assert (
        writing.mark_name("samples/rank-1.samples", 28)
        == "unwritten.samples%2Frank-1.samples.ENOSPC"
    )
    assert writing.mark_name("a%b/c.d", 122) == "unwritten.a%25b%2Fc.d.EDQUOT"
    for rel, err in [("samples/rank-1.samples", 28), ("a%b/c.d", 122), ("profile.pwprof", 5)]:
        assert writing.mark_unwritten(tmp_path, rel, err)
    (tmp_path / "unwritten.traces%2Frank-0.events.E9999").touch()  # an errno without name
    assert writing.read_unwritten(tmp_path) == [
        {"file": "a%b/c.d", "error": "EDQUOT", "reason": "Disk quota exceeded"},
        {"file": "profile.pwprof", "error": "EIO", "reason": "Input/output error"},
        {"file": "samples/rank-1.samples", "error": "ENOSPC", "reason": "No space left on device"},
        {"file": "traces/rank-0.events", "error": "E9999", "reason": "Unknown error 9999"},
    ]
    writing.unmark(tmp_path, "profile.pwprof")
    assert [u["file"] for u in writing.read_unwritten(tmp_path)] == [
        "a%b/c.d",
        "samples/rank-1.samples",
        "traces/rank-0.events",
    ]


def test_marks_and_experiment_json_merge(tmp_path):
    meta = {"unwritten": [{"file": "profile.pwprof", "error": "ENOSPC"}, "junk"]}
    writing.mark_unwritten(tmp_path, "profile.pwprof", 28)
    writing.mark_unwritten(tmp_path, "samples/rank-0.samples", 28)
    got = writing.read_unwritten(tmp_path, meta)
    assert [u["file"] for u in got] == ["profile.pwprof", "samples/rank-0.samples"]


def test_describe_is_one_line_whatever_the_count():
    files = [
        {"file": f"samples/rank-{r}.samples", "reason": "No space left on device"} for r in range(5)
    ]
    assert (
        writing.describe(files[:2])
        == "samples/rank-0.samples, samples/rank-1.samples (No space left on device)"
    )
    assert writing.describe(files) == (
        "samples/rank-0.samples, samples/rank-1.samples, "
        "samples/rank-2.samples and 2 more files (No space "
        "left on device)"
    )
    mixed = files[:1] + [{"file": "profile.pwprof", "reason": "Input/output error"}]
    assert (
        writing.describe(mixed, limit=1)
        == "samples/rank-0.samples and 1 more file (No space left on device; Input/output error)"
    )


def test_write_atomic_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "experiment.json"
    writing.write_atomic(target, json.dumps({"a": 1}))
    assert json.loads(target.read_text()) == {"a": 1}
    blocked = tmp_path / "dir"
    (blocked / "inside").mkdir(parents=True)  # rename onto a non-empty directory
    with pytest.raises(OSError):
        writing.write_atomic(blocked, b"data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir", "experiment.json"]


def test_experiment_names_of_run_and_import(tmp_path, monkeypatch):
    """perfweave run's and perfweave import's default directory names: one rule, -N for
    a name already taken, characters outside [A-Za-z0-9_.+-] written _."""
    from perfweave.cli.import_ import default_name
    from perfweave.launch.run import default_experiment_name

    monkeypatch.chdir(tmp_path)
    when = datetime.datetime(2024, 5, 6, 7, 8, 9)
    assert (
        writing.experiment_name("a b/\u00e9", "4p", now=when)
        == "perfweave-a_b__-4p-20240506-070809"
    )
    (tmp_path / "perfweave-x-20240506-070809").mkdir()
    (tmp_path / "perfweave-x-20240506-070809-1").touch()
    assert writing.experiment_name("x", now=when) == "perfweave-x-20240506-070809-2"
    run = default_experiment_name(["mpirun", "./my prog"], "./my prog", when, ranks=4)
    assert run == "perfweave-my_prog-4p-20240506-070809"
    for archive in (tmp_path / "my trace" / "traces.otf2", tmp_path / "my trace"):
        assert re.fullmatch(r"perfweave-import-my_trace-\d{8}-\d{6}", default_name(archive))
