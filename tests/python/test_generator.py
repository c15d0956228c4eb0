"""Golden tests of runtime/mpi/gen_wrappers.py (the MPI wrapper generator).

The generated C of a small literal spec (MINI_SPEC, also stored as
golden/mini.spec) is compared with golden/pw_mpi_fn.h and
golden/pw_mpi_wrappers.c. After an intended change to the generator, regenerate
the golden files and review the diff:

    PERFWEAVE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/python/test_generator.py
    git diff tests/python/golden/
"""

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GEN_PATH = ROOT / "runtime" / "mpi" / "gen_wrappers.py"
SPEC_PATH = ROOT / "runtime" / "mpi" / "mpi.spec"
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("PERFWEAVE_UPDATE_GOLDEN") == "1"


def _load():
    spec = importlib.util.spec_from_file_location("pw_gen_wrappers", GEN_PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load()

MINI_SPEC = """\
# mini.spec: the literal spec of tests/python/test_generator.py (golden output).
p2p   send       int MPI_Send(const void *buf:buf, int count:count, MPI_Datatype datatype:type, int dest:peer, int tag:tag, MPI_Comm comm:comm)
coll  bcast      int MPI_Bcast(void *buffer:buf, int count:count, MPI_Datatype datatype:type, int root:root, MPI_Comm comm:comm)

sync  waitmulti  int MPI_Waitall(int count:nreq, MPI_Request array_of_requests[]:requests, MPI_Status array_of_statuses[]:statuses)
other init       int MPI_Init(int *argc, char ***argv)  [fortran=()]
other pcontrol   int MPI_Pcontrol(const int level:level, ...)  [nofort]
rma   fop        int MPI_Fetch_and_op(const void *origin_addr:buf, void *result_addr:rbuf, MPI_Datatype datatype:type, int target_rank:target, MPI_Aint target_disp, MPI_Op op, MPI_Win win:win)
"""


@pytest.fixture(scope="module")
def mini():
    return gen.parse(MINI_SPEC)


# ---- (a) parsing ----


def test_mini_names_families_actions_lines(mini):
    assert [f.name for f in mini] == [
        "MPI_Send",
        "MPI_Bcast",
        "MPI_Waitall",
        "MPI_Init",
        "MPI_Pcontrol",
        "MPI_Fetch_and_op",
    ]
    assert [f.family for f in mini] == ["p2p", "coll", "sync", "other", "other", "rma"]
    assert [f.action for f in mini] == ["send", "bcast", "waitmulti", "init", "pcontrol", "fop"]
    assert [f.line for f in mini] == [2, 3, 5, 6, 7, 8]  # 1-based, comments and blanks count
    assert [f.lower for f in mini] == [
        "mpi_send",
        "mpi_bcast",
        "mpi_waitall",
        "mpi_init",
        "mpi_pcontrol",
        "mpi_fetch_and_op",
    ]


def test_mini_send_args(mini):
    send = mini[0]
    assert [a.name for a in send.args] == ["buf", "count", "datatype", "dest", "tag", "comm"]
    assert [a.role for a in send.args] == ["buf", "count", "type", "peer", "tag", "comm"]
    assert [a.ctype for a in send.args] == [
        "const void *",
        "int",
        "MPI_Datatype",
        "int",
        "int",
        "MPI_Comm",
    ]
    assert [a.array for a in send.args] == [False] * 6
    assert send.args[0].decl == "const void *buf"
    assert send.args[0].base == "void"
    assert send.args[0].indirect and not send.args[1].indirect
    assert (send.fortran, send.fortran_args, send.variadic) == (True, None, False)


def test_mini_bcast_and_waitall_args(mini):
    bcast, waitall = mini[1], mini[2]
    assert [(a.name, a.role) for a in bcast.args] == [
        ("buffer", "buf"),
        ("count", "count"),
        ("datatype", "type"),
        ("root", "root"),
        ("comm", "comm"),
    ]
    assert bcast.args[0].ctype == "void *"
    reqs = waitall.args[1]
    assert (reqs.ctype, reqs.name, reqs.role, reqs.array) == (
        "MPI_Request",
        "array_of_requests",
        "requests",
        True,
    )
    assert reqs.decl == "MPI_Request array_of_requests[]"
    assert reqs.indirect
    assert [a.role for a in waitall.args] == ["nreq", "requests", "statuses"]
    assert waitall.fortran and waitall.fortran_args is None


def test_mini_init_fortran_empty(mini):
    init = mini[3]
    assert [(a.ctype, a.name, a.role) for a in init.args] == [
        ("int *", "argc", ""),
        ("char ***", "argv", ""),
    ]
    assert init.fortran is True
    assert init.fortran_args == []  # fortran=() : MPI_INIT(IERROR) only
    assert not init.variadic


def test_mini_pcontrol_nofort_variadic(mini):
    pc = mini[4]
    assert pc.fortran is False
    assert pc.fortran_args is None
    assert pc.variadic is True
    assert [(a.ctype, a.name, a.role) for a in pc.args] == [("const int", "level", "level")]


def test_fortran_args_parsed(tmp_path):
    fns = gen.parse(
        "other init int MPI_Init_thread(int *argc, char ***argv, int required, "
        "int *provided)  [fortran=(int required, int *provided)]\n"
    )
    f = fns[0]
    assert f.fortran and [(a.ctype, a.name) for a in f.fortran_args] == [
        ("int", "required"),
        ("int *", "provided"),
    ]
    text = gen.source(fns)
    # provided thread level is handed to the hook in both bindings
    assert "pw_mpi_init_done(PW_FN_MPI_Init_thread, ra, t0, *provided);" in text
    assert (
        "PW_WRAPPER void mpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, "
        "MPI_Fint *ierr)" in text
    )


# ---- (b) golden output ----


def _golden(name, text):
    path = GOLDEN / name
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{path} missing: run with PERFWEAVE_UPDATE_GOLDEN=1"
    return path.read_text()


def test_golden_spec_is_the_literal():
    assert _golden("mini.spec", MINI_SPEC) == MINI_SPEC


def test_golden_header(mini):
    text = gen.header(mini)
    assert text == _golden("pw_mpi_fn.h", text)


def test_golden_source(mini):
    text = gen.source(mini)
    assert text == _golden("pw_mpi_wrappers.c", text)


def test_golden_symbols(mini):
    text = gen.symbols_header(mini)
    assert text == _golden("pw_mpi_symbols.h", text)


def test_golden_table(mini):
    """perfweave/_mpi.py: MPI_Send may block (its [pattern=]), MPI_Bsend's action is the
    same; a nonblocking collective names its blocking twin."""
    text = gen.table(mini, gen.parse_classified(MINI_SPEC))
    assert text == _golden("_mpi.py", text)
    spec = TABLE_SPEC + "section classify\nfile  MPI_File_delete\n"
    table = {}
    exec(gen.table(gen.parse(spec), gen.parse_classified(spec)), table)
    assert table["FUNCTIONS"] == {
        "MPI_Send": ("p2p", "send", "block_send", None),
        "MPI_Bsend": ("p2p", "send", "p2p", None),
        "MPI_Bcast": ("coll", "bcast", "12n", None),
        "MPI_Ibcast": ("coll", "bcast", "12n", "MPI_Bcast"),
        "MPI_Comm_dup": ("other", "mgmt", "comm", None),
        "MPI_Comm_rank": ("other", "mgmt", "other", None),
        "MPI_File_delete": ("file", "", "file", None),
    }


TABLE_SPEC = """\
p2p   send   int MPI_Send(const void *buf:buf, int count:count, MPI_Datatype datatype:type, int dest:peer, int tag:tag, MPI_Comm comm:comm)  [pattern=block_send]
p2p   send   int MPI_Bsend(const void *buf:buf, int count:count, MPI_Datatype datatype:type, int dest:peer, int tag:tag, MPI_Comm comm:comm)
coll  bcast  int MPI_Bcast(void *buffer:buf, int count:count, MPI_Datatype datatype:type, int root:root, MPI_Comm comm:comm)
coll  bcast  int MPI_Ibcast(void *buffer:buf, int count:count, MPI_Datatype datatype:type, int root:root, MPI_Comm comm:comm, MPI_Request *request:request)  [nofort]
other mgmt   int MPI_Comm_dup(MPI_Comm comm:comm, MPI_Comm *newcomm:newcomm)
other mgmt   int MPI_Comm_rank(MPI_Comm comm, int *rank)
"""


def test_otf2_tables():
    """What OTF2 calls a collective's and a one-sided communication's operation (a
    neighbourhood collective: the plain one's), the synchronous sends, the calls that post
    a request, and the export's events, numbered in the order of the spec's section."""
    spec = (
        TABLE_SPEC
        + "p2p   send   "
        + SEND.replace("MPI_Send", "MPI_Ssend")
        + "\n"
        + "coll  neighbor_allgather  int MPI_Ineighbor_allgather(const void *sendbuf:buf, "
        "int sendcount:scount, MPI_Datatype sendtype:stype, void *recvbuf, int recvcount:rcount, "
        "MPI_Datatype recvtype:rtype, MPI_Comm comm:comm, MPI_Request *request:request)  [nofort]\n"
        "rma   put    int MPI_Rput(const void *origin_addr:buf, int origin_count:count, "
        "MPI_Datatype origin_datatype:type, int target_rank:target, MPI_Aint target_disp, "
        "int target_count, MPI_Datatype target_datatype, MPI_Win win:win, "
        "MPI_Request *request:request)  [nofort]\n"
        "section otf2\nENTER Enter 1\nSEND  MpiSend 4  # a comment\n"
    )
    out = gen.generate(spec)
    table = {}
    exec(out["_mpi.py"], table)
    assert table["SYNCHRONOUS"] == {"MPI_Ssend"}
    assert table["POSTS_REQUEST"] == {"MPI_Ibcast", "MPI_Ineighbor_allgather", "MPI_Rput"}
    assert table["OTF2_COLLECTIVE_OPS"] == {
        "MPI_Bcast": "BCAST",
        "MPI_Ibcast": "BCAST",
        "MPI_Ineighbor_allgather": "ALLGATHER",
    }
    assert table["OTF2_RMA_OPS"] == {"MPI_Rput": "PUT"}
    assert table["OTF2_EVENTS"] == {"ENTER": ("Enter", 1), "SEND": ("MpiSend", 4)}
    assert (
        "#define PW_OTF2_EVENTS(X) \\\n    X(ENTER) \\\n    X(SEND) \\\n\n"
        in (out["pw_otf2_events.h"])
    )
    with pytest.raises(gen.SpecError, match="line 3: expected 'EVENT Writer ARGUMENTS'"):
        gen.parse_otf2_events("\nsection otf2\nENTER Enter 7\n")
    with pytest.raises(gen.SpecError, match="line 3: event ENTER listed twice"):
        gen.parse_otf2_events("section otf2\nENTER Enter 1\nENTER Leave 1\n")


def test_rma_roles():
    """[rma=ROLE]: the calls that lock and unlock a window and those that create one on
    memory they allocate; a role belongs to one action."""
    win = (
        "int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm:comm, "
        "void *baseptr, MPI_Win *win:newwin)"
    )
    lock = "int MPI_Win_lock(int lock_type:tag, int rank:target, int assert, MPI_Win win:win)"
    unlock = "int MPI_Win_unlock_all(MPI_Win win:win)"
    spec = (
        f"rma win {win}  [rma=allocate]\nsync winsync {lock}  [rma=lock]\n"
        f"sync winsync {unlock}  [rma=unlock]\n"
    )
    table = {}
    exec(gen.generate(spec)["_mpi.py"], table)
    assert table["LOCKS_WINDOW"] == {"MPI_Win_lock"}
    assert table["UNLOCKS_WINDOW"] == {"MPI_Win_unlock_all"}
    assert table["ALLOCATES_WINDOW"] == {"MPI_Win_allocate"}
    with pytest.raises(gen.SpecError, match="line 1: MPI_Win_lock: 'rma=allocate' is no role"):
        gen.parse(f"sync winsync {lock}  [rma=allocate]\n")
    with pytest.raises(gen.SpecError, match="'rma=bogus' is no role of action 'win'"):
        gen.parse(f"rma win {win}  [rma=bogus]\n")


def test_pattern_role_errors():
    with pytest.raises(gen.SpecError, match="unknown pattern role 'bogus'"):
        gen.parse("p2p send " + SEND + "  [pattern=bogus]\n")
    with pytest.raises(gen.SpecError, match="pattern role 'barrier' is not of the family 'p2p'"):
        gen.parse("p2p send " + SEND + "  [pattern=barrier]\n")
    with pytest.raises(gen.SpecError, match="both wrapped and listed"):
        gen.table(gen.parse("p2p send " + SEND + "\n"), {"MPI_Send": "p2p"})


def test_stub_list_is_the_wrapper_table(mini):
    """The core's stub i jumps to table entry i: both come from one list, in the order
    the wrappers are defined."""
    text = gen.source(mini)
    wrappers = re.findall(r"^PW_WRAPPER \w+ (\w+)\(", text, re.M)
    listed = re.findall(r"X\((\d+), (\w+)\)", gen.symbols_header(mini))
    assert [int(i) for i, _ in listed] == list(range(len(wrappers)))
    assert [n for _, n in listed] == wrappers == gen.symbols(mini)
    assert f"#define PW_MPI_NSYMBOLS {len(wrappers)}" in gen.symbols_header(mini)
    assert "PW_EXPORT void *const pw_mpi_wrapper_table[PW_MPI_NSYMBOLS]" in text


def test_main_writes_the_golden_files(tmp_path):
    out = tmp_path / "gen"
    gen.main(["gen_wrappers.py", str(GOLDEN / "mini.spec"), str(out)])
    assert sorted(p.name for p in out.iterdir()) == [
        "_mpi.py",
        "pw_mpi_fn.h",
        "pw_mpi_symbols.h",
        "pw_mpi_wrappers.c",
        "pw_otf2_events.h",
    ]
    assert (out / "pw_mpi_fn.h").read_text() == (GOLDEN / "pw_mpi_fn.h").read_text()
    assert (out / "pw_mpi_wrappers.c").read_text() == (GOLDEN / "pw_mpi_wrappers.c").read_text()
    assert (out / "pw_mpi_symbols.h").read_text() == (GOLDEN / "pw_mpi_symbols.h").read_text()
    assert (out / "_mpi.py").read_text() == (GOLDEN / "_mpi.py").read_text()
    # an unchanged output is not rewritten (keeps make/CMake from rebuilding)
    before = (out / "pw_mpi_fn.h").stat().st_mtime_ns
    os.utime(out / "pw_mpi_fn.h", ns=(before - 10**9, before - 10**9))
    gen.main(["gen_wrappers.py", str(GOLDEN / "mini.spec"), str(out)])
    assert (out / "pw_mpi_fn.h").stat().st_mtime_ns == before - 10**9


def test_header_lines(mini):
    lines = gen.header(mini).splitlines()
    assert "#define PW_MPI_NFN 6" in lines
    assert "    PW_FN_MPI_Send = 0," in lines
    assert "    PW_FN_MPI_Pcontrol = 4," in lines


def test_source_specific_lines(mini):
    lines = gen.source(mini).splitlines()
    assert '        real = (pw_creal_MPI_Send)pw_mpi_real("PMPI_Send");' in lines
    assert (
        "typedef int (*pw_creal_MPI_Send)(const void *, int, MPI_Datatype, int, int, "
        "MPI_Comm);" in lines
    )
    assert (
        "PW_WRAPPER int MPI_Send(const void *buf, int count, MPI_Datatype datatype, "
        "int dest, int tag, MPI_Comm comm)" in lines
    )
    assert "    pw_mpi_leave(&c, PW_ACTION_send, &a);" in lines
    assert "    a.peer = dest;" in lines
    # the four Fortran entry points of MPI_Send, each resolving its own name
    for sym in ("mpi_send_", "mpi_send__", "mpi_send_f08_", "mpi_send_f08ts_"):
        assert (
            f"PW_WRAPPER void {sym}(void *buf, MPI_Fint *count, MPI_Fint *datatype, "
            "MPI_Fint *dest, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *ierr)"
        ) in lines
        assert (
            f'        real = (pw_freal_MPI_Send)pw_mpi_fortran_real("{sym}", (void *){sym});'
        ) in lines
    # Fortran handles are converted, counts dereferenced
    assert "    a.type = pw_type_f2c(*datatype);" in lines
    assert "    a.count = (int)*count;" in lines
    # arguments are set once, before the real call, with only `fortran` and the
    # roles (optional roles of the action the function lacks are NULL): nothing is
    # zeroed per call; a Wait sees its requests before the call completes them
    assert "    a.flag = NULL;" in lines and "    a.indices = NULL;" in lines
    assert "    pw_mpi_before(&c, PW_ACTION_waitmulti, &a);" in lines
    assert "    pw_mpi_leave(&c, PW_ACTION_waitmulti, &a);" in lines
    assert "    a.fortran = 0;" in lines and "    a.fortran = 1;" in lines
    assert not any("PW_ARGS_INIT" in l for l in lines)


def test_action_needs_its_roles():
    bad = "p2p send int MPI_Send(const void *buf:buf, int count:count, MPI_Datatype datatype:type, int dest, int tag:tag, MPI_Comm comm:comm)"
    with pytest.raises(
        gen.SpecError,
        match=r"line 1: MPI_Send: action 'send' reads the roles "
        r"peer, which MPI_Send does not tag",
    ):
        gen.parse(bad)


def test_wrapper_reading_a_role_its_function_lacks_is_rejected():
    """The window event of every one-sided operation reads its window and target: an
    atomic without them cannot be wrapped (the build stops at the spec line)."""
    bad = (
        "\nrma fop int MPI_Fetch_and_op(const void *origin_addr:buf, void *result_addr:rbuf, "
        "MPI_Datatype datatype:type, int target_rank, MPI_Aint target_disp, MPI_Op op, "
        "MPI_Win win)\n"
    )
    with pytest.raises(
        gen.SpecError,
        match=r"line 2: MPI_Fetch_and_op: action 'fop' reads the "
        r"roles target, win, which MPI_Fetch_and_op does "
        r"not tag",
    ):
        gen.parse(bad)


def test_optional_role_absent_is_set_to_none(mini):
    """MPI_Fetch_and_op has no request (the R* operations of its action family do): its C
    and Fortran wrappers set it to NULL rather than leave stack contents for the window
    event to read (the --trace crash of atomics)."""
    text = gen.source(mini)
    body = text[text.index("PW_WRAPPER int MPI_Fetch_and_op(") :]
    c_body = body[: body.index("\n}\n")]
    f_body = body[body.index("void pw_f_MPI_Fetch_and_op(") :]
    f_body = f_body[: f_body.index("\n}\n")]
    for b in (c_body, f_body):
        assert b.count("    a.request = NULL;") == 1
        assert b.index("a.request = NULL;") < b.index("pw_mpi_leave(&c, PW_ACTION_fop, &a);")


def test_every_role_a_kind_reads_is_set_in_every_wrapper(real):
    """The class: for each function of the real spec, in its C and Fortran wrappers,
    every role its action's body reads is assigned before pw_mpi_leave (from the argument
    or the action's value for none)."""
    text = gen.source(real)
    for f in real:
        if not gen.has_args(f, f.args) or f.action in gen.CONTROL_ACTIONS:
            continue  # (Pcontrol hands its level to a hook)
        bodies = [text[text.index(f"PW_WRAPPER int {f.name}(") :]]
        if f.fortran:
            bodies.append(text[text.index(f"void pw_f_{f.name}(") :])
        for b in bodies:
            b = b[: b.index("\n}\n")]
            leave = b.index("pw_mpi_leave(")
            for role in gen.ACTION_READS[f.action]:
                assert re.search(rf"^    a\.{role} = ", b[:leave], re.M), (f.name, role)


def test_action_reads_declarations_are_checked():
    assert gen.action_reads({"fop": "type target? win"})["fop"] == {
        "type": None,
        "target": "MPI_PROC_NULL",
        "win": None,
    }
    with pytest.raises(gen.SpecError, match="action 'fop' reads the unknown role 'bogus'"):
        gen.action_reads({"fop": "type bogus"})
    with pytest.raises(gen.SpecError, match="optional role 'win' has no value for none"):
        gen.action_reads({"fop": "type win?"})
    actions = set(" ".join(gen.ACTIONS.values()).split())
    assert actions - set(gen.ACTION_READS) == gen.NO_ARGS_ACTIONS - {"mgmt"} | {
        "init",
        "finalize",
        "abort",
    }


def test_source_entry_point_sets(mini):
    text = gen.source(mini)
    exported = re.findall(r"^PW_WRAPPER \w+ (\w+)\(", text, re.M)
    assert exported == [
        "MPI_Send",
        "mpi_send_",
        "mpi_send__",
        "mpi_send_f08_",
        "mpi_send_f08ts_",
        "MPI_Bcast",
        "mpi_bcast_",
        "mpi_bcast__",
        "mpi_bcast_f08_",
        "mpi_bcast_f08ts_",
        "MPI_Waitall",
        "mpi_waitall_",
        "mpi_waitall__",
        "mpi_waitall_f08_",
        "mpi_waitall_f08ts_",
        "MPI_Init",
        "mpi_init_",
        "mpi_init__",
        "mpi_init_f08_",
        "mpi_init_f08ts_",
        "MPI_Pcontrol",  # nofort: C only
        "MPI_Fetch_and_op",
        "mpi_fetch_and_op_",
        "mpi_fetch_and_op__",
        "mpi_fetch_and_op_f08_",
        "mpi_fetch_and_op_f08ts_",
    ]
    assert "PW_WRAPPER void mpi_init_(MPI_Fint *ierr)" in text
    assert "PW_WRAPPER int MPI_Pcontrol(const int level, ...)" in text
    assert "    pw_mpi_pcontrol(level);" in text
    assert not re.search(r"\bmpi_pcontrol_", text)


def test_control_actions_call_real_outside_record_path(mini):
    text = gen.source(mini)
    init = text[
        text.index("PW_WRAPPER int MPI_Init(") : text.index("typedef void (*pw_freal_MPI_Init)")
    ]
    assert "pw_mpi_enter" not in init
    assert init.count("real(argc, argv)") == 2  # nested path and measured path
    assert "pw_mpi_init_done(PW_FN_MPI_Init, ra, t0, -1);" in init


# ---- (c) errors ----

SEND = (
    "int MPI_Send(const void *buf:buf, int count:count, MPI_Datatype datatype:type, "
    "int dest:peer, int tag:tag, MPI_Comm comm:comm)"
)


@pytest.mark.parametrize(
    "text,message",
    [
        ("# comment\n\np3p send " + SEND + "\n", "line 3: unknown family 'p3p'"),
        ("p2p bcast " + SEND + "\n", "line 1: action 'bcast' is not a p2p action"),
        (
            "p2p send " + SEND + "\np2p send int MPI_Isend(int count:cnt)\n",
            "line 2: unknown role 'cnt'",
        ),
        (
            "p2p send " + SEND + "\n# again\np2p send " + SEND + "\n",
            "line 3: MPI_Send declared twice",
        ),
        (
            "file fopen int MPI_File_open(MPI_Comm comm:comm, const char *filename, int amode, "
            "MPI_Info info, MPI_File *fh:file)\n",
            "line 1: MPI_File_open: action 'fopen' reads the roles newfile, path",
        ),
        (
            "other mgmt int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function *fn)\n",
            "argument 'MPI_Comm_errhandler_function *fn' has no Fortran mapping",
        ),
        ("p2p send " + SEND + "  [nofort fast]\n", "line 1: unknown flag 'fast'"),
        ("\n\np2p send MPI_Send(void)\n", "line 3: expected 'FAMILY ACTION int MPI_Name(args)"),
        ("# only comments\n\n", "the spec declares no function"),
    ],
)
def test_spec_errors(text, message):
    with pytest.raises(gen.SpecError) as e:
        gen.parse(text)
    assert message in str(e.value)


def test_char_argument_fortran_hidden_length():
    """A char * of the Fortran binding comes with its hidden length (size_t, after ierr),
    which the wrapper hands on to the real binding and, for File_open, to the path role."""
    fns = gen.parse(
        "file fopen int MPI_File_open(MPI_Comm comm:comm, const char *filename:path, "
        "int amode, MPI_Info info, MPI_File *fh:newfile)\n"
        "file fother int MPI_File_set_view(MPI_File fh:file, const char *datarep)  "
        "[fortran=(MPI_File fh)]\n"
    )
    assert [f.fortran for f in fns] == [True, True]
    assert [a.name for a in fns[1].fortran_args] == ["fh"]
    text = gen.fortran_wrapper(fns[0])
    assert "MPI_Fint *ierr, size_t filename_len)" in text
    assert "a.path_len = (int)filename_len;" in text
    assert "real(comm, filename, amode, info, fh, ierr, filename_len);" in text


def test_mpi4_functions_only_where_mpi_h_has_them():
    (f,) = gen.parse(
        "file fwrite int MPI_File_write_c(MPI_File fh:file, const void *buf:buf, "
        "MPI_Count count:count, MPI_Datatype datatype:type, MPI_Status *status:status)  [mpi4]\n"
    )
    assert f.mpi4 and not f.fortran
    text = gen.source([f])
    assert "#if MPI_VERSION >= 4" in text
    assert "#else\n#define MPI_File_write_c ((void *)0)\n#endif" in text


def test_main_reports_spec_errors_with_path_and_line(tmp_path):
    bad = tmp_path / "bad.spec"
    bad.write_text("p2p send " + SEND + "\nxyz send " + SEND.replace("Send", "Ssend") + "\n")
    with pytest.raises(SystemExit) as e:
        gen.main(["gen_wrappers.py", str(bad), str(tmp_path / "out")])
    assert str(e.value) == f"{bad}: line 2: unknown family 'xyz'"
    assert not (tmp_path / "out").exists()


# ---- (d) the real spec ----


@pytest.fixture(scope="module")
def real():
    return gen.parse(SPEC_PATH.read_text())


def test_real_spec_size_and_names(real):
    names = [f.name for f in real]
    assert len(names) >= 150
    assert len(set(names)) == len(names)
    for name in (
        "MPI_Send",
        "MPI_Isend",
        "MPI_Send_init",
        "MPI_Start",
        "MPI_Startall",
        "MPI_Alltoallw",
        "MPI_Ialltoallv",
        "MPI_Win_fence",
        "MPI_Put",
        "MPI_Get_accumulate",
        "MPI_Compare_and_swap",
        "MPI_Win_lock_all",
        "MPI_File_write_at_all",
        "MPI_Comm_split",
        "MPI_Init_thread",
    ):
        assert name in names, name


def test_real_spec_families_and_actions(real):
    from perfweave._format import FAMILIES

    # the spec's families are the format's (format.h PW_FAMILIES), every one used
    assert {f.family for f in real} == set(gen.ACTIONS) == set(FAMILIES)
    by = {f.name: f for f in real}
    expect = {
        "MPI_Send": ("p2p", "send"),
        "MPI_Isend": ("p2p", "isend"),
        "MPI_Send_init": ("p2p", "send_init"),
        "MPI_Start": ("p2p", "start"),
        "MPI_Startall": ("p2p", "startall"),
        "MPI_Alltoallw": ("coll", "alltoallw"),
        "MPI_Ialltoallv": ("coll", "alltoallv"),
        "MPI_Win_fence": ("sync", "winsync"),
        "MPI_Put": ("rma", "put"),
        "MPI_Get_accumulate": ("rma", "getacc"),
        "MPI_Compare_and_swap": ("rma", "cas"),
        "MPI_Win_lock_all": ("sync", "winsync"),
        "MPI_File_write_at_all": ("file", "fwrite"),
        "MPI_Comm_split": ("other", "mgmt"),
        "MPI_Init_thread": ("other", "init"),
        "MPI_Finalize": ("other", "finalize"),
        "MPI_Waitall": ("sync", "waitmulti"),
    }
    for name, fk in expect.items():
        assert (by[name].family, by[name].action) == fk, name
    for f in real:
        assert f.action in gen.ACTIONS[f.family].split()


def test_real_spec_roles(real):
    by = {f.name: f for f in real}
    roles = lambda n: [a.role for a in by[n].args]  # noqa: E731
    assert roles("MPI_Alltoallw") == [
        "buf",
        "scounts",
        "",
        "stypes",
        "rbuf",
        "rcounts",
        "",
        "rtypes",
        "comm",
    ]
    assert roles("MPI_Get_accumulate") == [
        "buf",
        "count",
        "type",
        "rbuf",
        "rcount",
        "rtype",
        "target",
        "",
        "",
        "",
        "",
        "win",
    ]
    assert roles("MPI_Startall") == ["nreq", "requests"]
    assert [a.name for a in by["MPI_Init_thread"].fortran_args] == ["required", "provided"]
    assert by["MPI_Init"].fortran_args == []
    assert [a.name for a in by["MPI_Pcontrol"].fortran_args] == ["level"]
    nofort = sorted(f.name for f in real if not f.fortran)
    assert nofort == sorted(f.name for f in real if f.mpi4)  # the _c forms
    assert all(f.name.endswith("_c") for f in real if f.mpi4)


def test_real_spec_generates(real):
    text = gen.source(real)
    header = gen.header(real)
    assert f"#define PW_MPI_NFN {len(real)}" in header
    exported = re.findall(r"^PW_WRAPPER \w+ (\w+)\(", text, re.M)
    nfort = sum(f.fortran for f in real)
    assert len(exported) == len(real) + 4 * nfort
    for f in real:
        assert f'pw_mpi_real("P{f.name}")' in text
    assert "PW_WRAPPER void mpi_file_open_(" in text
    assert "PW_WRAPPER void mpi_put_f08ts_(" in text


def test_nested_fortran_init_forwards_once():
    """A nested Fortran Init (MPICH's binding calling the C one) must call the real
    function exactly once and return, not fall through into the hooks."""
    src = gen.source(gen.parse(MINI_SPEC))
    body = src[src.index("static inline __attribute__((always_inline)) void pw_f_MPI_Init(") :]
    body = body[: body.index("\n}\n")]
    guard = body.index("if (pw_mpi_nested()) {")
    assert body[guard:].split("\n")[1:3] == ["        real(ierr);", "        return;"]
    assert body.count("real(ierr);") == 2  # the nested path and the measured path
