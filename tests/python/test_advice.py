"""Advice rules (analysis/advice.py): each fires on the situation it describes, with the
numbers of that situation, and stays quiet below its threshold."""

from perfweave.analysis import advice
from perfweave.analysis.mpi import analyze
from perfweave.model.profile import Profile
from perfweave.symbols import Location

S = 1_000_000_000
FUNCTIONS = ["MPI_Init", "MPI_Send", "MPI_Recv", "MPI_Alltoall", "MPI_Finalize"]
FAMILIES = ["other", "p2p", "p2p", "coll", "other"]


class Sym:
    def resolve(self, module, offsets):
        return [Location(module, o, f"f{o:x}", "/src/app.c", o) for o in offsets]


def data(ranks, sites, wait_states=None):
    """Report data of a profile: ranks [(app_s, mpi_s)], sites [(rank, fn, offset, calls,
    seconds, bytes)]."""
    p = Profile.from_literal(
        FUNCTIONS,
        FAMILIES,
        [
            dict(
                rank=r,
                host=0,
                pid=10 + r,
                app_ns=int(a * S),
                mpi_ns=int(m * S),
                mpi_calls=1,
                nthreads=1,
            )
            for r, (a, m) in enumerate(ranks)
        ],
        [
            dict(rank=r, fn=fn, object=0, offset=o, count=c, total_ns=int(t * S), bytes_sent=b)
            for r, fn, o, c, t, b in sites
        ],
    )
    d = {"mpi_profile": analyze(p, symbolizer=Sym()).to_json()}
    if wait_states:
        d["wait_states"] = wait_states
    return d


def rules(d):
    return {a["rule"]: a for a in advice.advise(d)}


def test_communication_bound_names_the_function_and_its_site():
    # 4 ranks x 10 s; MPI_Alltoall 3 s per rank = 30 % of the app time, mostly at 0x200
    d = data(
        [(10, 3)] * 4,
        [(r, "MPI_Alltoall", 0x200, 10, 2.5, 0) for r in range(4)]
        + [(r, "MPI_Alltoall", 0x300, 10, 0.5, 0) for r in range(4)],
    )
    a = rules(d)["communication_bound"]
    assert a["evidence"]["function"] == "MPI_Alltoall"
    assert abs(a["evidence"]["app_pct"] - 30.0) < 1e-9
    assert "MPI_Alltoall takes 30.0 % of the app time" in a["text"]
    assert "app.c:512" in a["text"] and "(83 % of it)" in a["text"]  # 0x200 = 512
    assert "collectives" in a["text"]
    # 15 %: below the threshold
    d = data([(10, 1.5)] * 4, [(r, "MPI_Alltoall", 0x200, 10, 1.5, 0) for r in range(4)])
    assert "communication_bound" not in rules(d)


def test_load_imbalance_names_the_slow_rank():
    # outside MPI: 9, 6, 6, 6 s -> mean 6.75, max 9: mean/max 0.75 < 0.85
    d = data(
        [(10, 1), (10, 4), (10, 4), (10, 4)],
        [(0, "MPI_Alltoall", 0x200, 5, 1, 0)]
        + [(r, "MPI_Alltoall", 0x200, 5, 4, 0) for r in (1, 2, 3)],
    )
    a = rules(d)["load_imbalance"]
    assert a["evidence"]["rank"] == 0 and abs(a["evidence"]["mean_outside_s"] - 6.75) < 1e-9
    assert "rank 0 computes 33 % longer than the mean" in a["text"]
    assert "mean/max 0.75" in a["text"] and "MPI_Alltoall at f200" in a["text"]
    # 9, 8.5, 8.5, 8.5: mean/max 0.96 -> balanced enough
    d = data(
        [(10, 1), (10, 1.5), (10, 1.5), (10, 1.5)],
        [(r, "MPI_Alltoall", 0x200, 5, 1, 0) for r in range(4)],
    )
    assert "load_imbalance" not in rules(d)


def test_wait_states_above_five_percent():
    ws = {
        "patterns": [
            {
                "id": "mpi_latesender",
                "name": "Late Sender",
                "time_s": 2.0,
                "pct": 12.5,
                "callpath": "main/solve/M:MPI_Recv@app.c:40",
                "callpath_s": 2.0,
            },
            {
                "id": "mpi_barrier_wait",
                "name": "Wait at Barrier",
                "time_s": 0.1,
                "pct": 0.6,
                "callpath": "main/M:MPI_Barrier",
                "callpath_s": 0.1,
            },
        ]
    }
    d = data([(10, 2)] * 2, [(r, "MPI_Recv", 0x100, 5, 2, 0) for r in range(2)], ws)
    found = [a for a in advice.advise(d) if a["rule"] == "wait_state"]
    assert len(found) == 1 and found[0]["evidence"]["pattern"] == "mpi_latesender"
    assert "Late Sender: 12.5 % of the app time" in found[0]["text"]
    assert "post the sends earlier" in found[0]["text"]


def test_small_messages():
    # 20 000 sends of 64 B per rank taking 8 % of the run
    d = data([(10, 0.8)] * 2, [(r, "MPI_Send", 0x100, 20000, 0.8, 20000 * 64) for r in range(2)])
    a = rules(d)["small_messages"]
    assert a["evidence"]["calls"] == 40000 and abs(a["evidence"]["mean_bytes"] - 64) < 1e-9
    assert "40000 calls of 64 bytes" in a["text"] and "aggregate" in a["text"]
    d = data([(10, 0.8)] * 2, [(r, "MPI_Send", 0x100, 20000, 0.8, 20000 * 4096) for r in range(2)])
    assert "small_messages" not in rules(d)


def test_mpi_light_and_order():
    d = data(
        [(10, 0.2), (10, 0.3)], [(r, "MPI_Send", 0x100, 5, 0.2 + r * 0.1, 40) for r in range(2)]
    )
    out = advice.advise(d)
    assert [a["rule"] for a in out] == ["mpi_light"]
    assert "MPI takes only 2.5 % of the app time" in out[0]["text"]
    # most severe first
    d = data(
        [(10, 1), (10, 4), (10, 4), (10, 4)],
        [(0, "MPI_Alltoall", 0x200, 5, 1, 0)]
        + [(r, "MPI_Alltoall", 0x200, 5, 4, 0) for r in (1, 2, 3)],
    )
    sev = [a["severity"] for a in advice.advise(d)]
    assert sev == sorted(sev, reverse=True) and len(sev) == 2


def test_a_sections_own_advice_is_ranked_with_the_rules():
    """A module's section gives advice of its own in its data ("advice"): the report's
    advice takes every section's, with the section named, ranked by severity with the
    rules' (a new module needs no rule here); an item without rule or text is not
    advice."""
    d = data([(10, 9)] * 2, [(r, "MPI_Alltoall", 0x100, 10, 9.0, 0) for r in (0, 1)])
    d["mymodule"] = {
        "calls": 3,
        "advice": [
            {"rule": "my_first", "severity": 95.0, "text": "first", "evidence": {"x": 1}},
            {"rule": "my_low", "text": "no severity: ranked last"},
            {"text": "no rule: ignored"},
        ],
    }
    got = advice.advise(d)
    assert got[0]["rule"] == "my_first" and got[0]["section"] == "mymodule"
    assert got[-1]["rule"] == "my_low" and got[-1]["severity"] == 0.0
    assert "communication_bound" in [a["rule"] for a in got]
    assert sum(a.get("section") == "mymodule" for a in got) == 2
