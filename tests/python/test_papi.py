"""perfweave.papi: the check of --counters before a run, and the kernel's software events
perfweave counts itself where PAPI does not know them (a processor libpfm4 does not
know). The checks that load PAPI run in a fresh interpreter: libpfm4 reads its
environment once per process."""

import importlib.util
import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from perfweave.papi import kernel_event, kernel_events

GEN = Path(__file__).resolve().parents[2] / "runtime" / "modules" / "gen_kernel_events.py"


@pytest.mark.parametrize(
    "name,config",
    [
        ("perf::TASK-CLOCK", 1),
        ("perf::task-clock", 1),
        ("TASK-CLOCK", 1),
        ("perf::PERF_COUNT_SW_TASK_CLOCK", 1),
        ("perf::PAGE-FAULTS", 2),
        ("perf::FAULTS", 2),
        ("perf::CS", 3),
        ("perf::MINOR-FAULTS", 5),
        ("perf::MAJOR-FAULTS", 6),
        # not the kernel's software events, or with modifiers: PAPI's alone
        ("perf::PAGE-FAULTS:u=0", None),
        ("perf::CYCLES", None),
        ("PAPI_TOT_INS", None),
        ("perf_raw::r0003", None),
    ],
)
def test_kernel_event_names_as_libpfm4_spells_them(name, config):
    assert kernel_event(name) == config


def test_the_runtime_header_lists_every_name():
    """The runtime's table is generated from the same file, every name with its config."""
    gen = importlib.util.spec_from_file_location("pw_gen_kernel_events", GEN)
    mod = importlib.util.module_from_spec(gen)
    gen.loader.exec_module(mod)
    spec = json.loads(resources.files("perfweave").joinpath("kernel_events.json").read_text())
    header = mod.generate(spec)
    listed = [l.strip() for l in header.splitlines() if l.strip().startswith("X(")]
    assert listed == [f'X("{n}", {c}) \\' for n, c in kernel_events().items()]


CHECK = """
import json
from perfweave.papi import check_events, countable, core_pmus, open_papi
names = ["perf::TASK-CLOCK", "PAPI_TOT_INS", "perf::page-faults", "NO_SUCH_EVENT"]
known, unknown, why = check_events(names)
counted, left_out = countable(known)
lib, _ = open_papi()
print(json.dumps({"known": known, "unknown": unknown, "why": why, "counted": counted,
                  "left_out": left_out, "core": core_pmus(lib)}))
"""


def check_here(env=None):
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_unknown_processor_counts_kernel_events_and_says_why_not_papis():
    """With every core PMU libpfm4 detects here disabled for it (as on a processor it does
    not know), the kernel's software events are counted (by perfweave), PAPI_TOT_INS is
    left out with the reason, and an event nobody knows is unknown."""
    natural = check_here()
    if natural["why"]:
        pytest.fail(f"PAPI is needed here (make test installs it): {natural['why']}")
    env = dict(os.environ)
    env.pop("LIBPFM_FORCE_PMU", None)
    if natural["core"]:
        env["LIBPFM_DISABLED_PMUS"] = ",".join(natural["core"])
    r = check_here(env)
    assert r["core"] == []
    assert r["known"] == ["perf::TASK-CLOCK", "PAPI_TOT_INS", "perf::page-faults"]
    assert [n for n, _ in r["unknown"]] == ["NO_SUCH_EVENT"]
    assert r["counted"] == ["perf::TASK-CLOCK", "perf::page-faults"]
    [(name, why)] = r["left_out"]
    assert name == "PAPI_TOT_INS" and why.startswith("PAPI: "), why
    assert "does not know this processor" in why and "PAPI counts none of its" in why
