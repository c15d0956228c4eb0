#!/usr/bin/env python3
"""Generate perfweave's MPI wrappers from mpi.spec.

    gen_wrappers.py SPEC OUTDIR

writes OUTDIR/pw_mpi_fn.h (function ids, names, families, and the actions: PW_MPI_ACTIONS),
OUTDIR/pw_mpi_wrappers.c (one C wrapper per function, and Fortran wrappers for
the mpif.h / `use mpi` / `use mpi_f08` entry points of Open MPI and MPICH, and the
table of all of them) and OUTDIR/pw_mpi_symbols.h (every symbol a wrapper stands for,
in the table's order: the core's dispatch stubs, runtime/modules/mpi_loader.c, are
made from it, so stubs and table cannot disagree), and OUTDIR/_mpi.py, what every MPI
function is for the Python side (installed as perfweave/_mpi.py): family, action, role in
the wait-state patterns and time categories, blocking twin; of the functions wrapped and
of those the spec lists for classification only (functions of imported traces); which
sends are synchronous and which calls post a request; and what the OTF2 export and import
call them (collective operations, one-sided operations, and the OTF2 events of the spec's
section 'otf2', whose numbering OUTDIR/pw_otf2_events.h gives the export's C loop).

Every wrapper has the same shape (runtime/modules/pw_mpi.h): resolve the real
function once, call it exactly once whatever perfweave's state, time around it
and record only when recording and not re-entered. What a call means (bytes
sent/received, persistent requests, Init/Finalize hooks) is decided by its ACTION
in one place, pw_mpi_leave(), from the values of the arguments tagged with roles.
"""

import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gen"))
import spec_tools  # noqa: E402
from spec_tools import SpecError, entries, parse_decl, py_table, sections, split_args  # noqa: E402

# The actions of each family. The families are format.h's (PW_FAMILIES): the wrappers name
# each as PW_FAMILY_<FAMILY>, so that a family the format does not know fails to build.
ACTIONS = {
    "p2p": "send isend recv irecv mrecv sendrecv sendrecv_replace send_init recv_init start "
    "startall probe request_free cancel",
    "coll": "barrier bcast gather gatherv scatter scatterv allgather allgatherv alltoall alltoallv "
    "alltoallw reduce allreduce reduce_scatter reduce_scatter_block scan exscan "
    "neighbor_allgather neighbor_allgatherv neighbor_alltoall neighbor_alltoallv "
    "neighbor_alltoallw",
    "rma": "win win_free put get acc getacc fop cas",
    "sync": "wait waitmulti winsync",
    "file": "fopen fclose fread fwrite fother",
    "other": "init finalize abort pcontrol mgmt comm_free",
}
# What a function is to the analysis (model/trace.py's time categories and wait-state
# patterns, interop's families): its pattern role, that of its action here unless its spec
# line says [pattern=...] (where the functions of one action play different parts: MPI_Send
# may block, MPI_Bsend does not). A management call that creates a communicator (tags
# :newcomm) has the pattern role "comm". In the order of the model's role codes, with the
# time category and the family of each.
PATTERN_ROLES = {
    "other": ("other", "other"),
    "p2p": ("p2p", "p2p"),
    "block_send": ("p2p", "p2p"),
    "wait": ("p2p", "sync"),
    "waitmulti": ("p2p", "sync"),
    "test": ("p2p", "sync"),
    "barrier": ("sync_coll", "coll"),
    "n2n": ("coll", "coll"),
    "12n": ("coll", "coll"),
    "n21": ("coll", "coll"),
    "scan": ("coll", "coll"),
    "coll": ("coll", "coll"),
    "win_fence": ("rma_active", "sync"),
    "win_post": ("rma_active", "sync"),
    "win_start": ("rma_active", "sync"),
    "win_complete": ("rma_active", "sync"),
    "win_wait": ("rma_active", "sync"),
    "win_test": ("rma_active", "sync"),
    "passive": ("rma_passive", "sync"),
    "op": ("rma_comm", "rma"),
    "create": ("mgmt_win", "rma"),
    "free": ("mgmt_win", "rma"),
    "file_data": ("file_data", "file"),
    "file": ("mgmt_file", "file"),
    "comm": ("mgmt_comm", "other"),
    "init": ("init", "other"),
    "finalize": ("init", "other"),
    "init_thread": ("init", "other"),
}
_ACTION_PATTERNS = {
    "p2p": ACTIONS["p2p"],
    "barrier": "barrier",
    "12n": "bcast scatter scatterv",
    "n21": "reduce gather gatherv",
    "n2n": "allgather allgatherv alltoall allreduce reduce_scatter reduce_scatter_block",
    "scan": "scan exscan",
    "coll": "alltoallv alltoallw neighbor_allgather neighbor_allgatherv neighbor_alltoall "
    "neighbor_alltoallv neighbor_alltoallw",
    "create": "win",
    "free": "win_free",
    "op": "put get acc getacc fop cas",
    "wait": "wait",
    "waitmulti": "waitmulti",
    "passive": "winsync",
    "file": "fopen fclose fother",
    "file_data": "fread fwrite",
    "init": "init",
    "finalize": "finalize",
    "comm": "comm_free",
    "other": "abort pcontrol mgmt",
}
ACTION_PATTERN = {k: role for role, ks in _ACTION_PATTERNS.items() for k in ks.split()}
# What OTF2 calls an operation (docs/interop.md). A collective's OTF2_CollectiveOp is its
# action's name in capitals; OTF2 has no neighbourhood collectives, so theirs is that of the
# collective of the same shape. A one-sided communication is an RmaPut or RmaGet event
# (PUT, GET), else an RmaAtomic of the OTF2_RmaAtomicType given here.
OTF2_RMA_OPS = {
    "put": "PUT",
    "get": "GET",
    "acc": "ACCUMULATE",
    "getacc": "FETCH_AND_ACCUMULATE",
    "fop": "FETCH_AND_ACCUMULATE",
    "cas": "COMPARE_AND_SWAP",
}


# A function's part in one-sided communication beyond its action ([rma=ROLE]; the OTF2
# export's lock and unlock events and its regions' roles), with the action it belongs to
RMA_ROLES = {"lock": "winsync", "unlock": "winsync", "allocate": "win"}


def otf2_collective_op(action):
    return action.removeprefix("neighbor_").upper()


ROLES = set(
    "buf rbuf count type source scount stype rcount rtype scounts rcounts stypes rtypes "
    "peer tag root comm newcomm win newwin target group request requests nreq status "
    "statuses file newfile path offset level flag index outcount indices message".split()
)
# Actions whose wrappers run a hook whatever the recording state.
CONTROL_ACTIONS = {"init", "finalize", "abort", "pcontrol"}
# The roles each action's body reads: call_bytes and pw_mpi_before (runtime/modules/mpi.c),
# pw_trace_before and pw_trace_call with their helpers (mpi_trace.c). Wrappers fill only
# the roles their function tags, and the struct is not zeroed (the wrapper's hot path), so
# this table is the contract: every function of an action tags each plain role ("peer"), and
# one without an optional role ("request?") sets it to the action's value for none (_NONE).
# parse() rejects a function that lacks a plain role; a body that starts reading a role
# must declare it here first. Actions of NO_ARGS_ACTIONS read nothing, init, finalize and
# abort have hooks of their own.
_SR = "scount stype rcount rtype comm"
_P2P = "peer count type comm tag"
_COLL = "comm request?"  # request: a nonblocking collective
_RMA = "target win request?"  # request: the R* forms
_NONE = {
    "flag": "NULL",
    "index": "NULL",
    "outcount": "NULL",
    "indices": "NULL",
    "statuses": "NULL",
    "request": "NULL",
    "target": "MPI_PROC_NULL",
    "tag": "-1",
    "group": "MPI_GROUP_NULL",
    "count": "0",
    "type": "MPI_DATATYPE_NULL",
    "status": "NULL",
    "offset": "-1",
    "message": "NULL",
}
READS = {
    "send": _P2P,
    "isend": _P2P + " request",
    "recv": _P2P + " status",
    "irecv": _P2P + " request",
    "mrecv": "count type status? message",
    "probe": "peer comm status? message? flag?",
    "sendrecv": "peer source scount stype rcount rtype comm tag status",
    "sendrecv_replace": "peer source count type comm tag status",
    "send_init": _P2P + " request",
    "recv_init": _P2P + " request",
    "start": "request",
    "startall": "nreq requests",
    "request_free": "request",
    "barrier": _COLL,
    "bcast": "root count type " + _COLL,
    "reduce": "root count type " + _COLL,
    "allreduce": "count type " + _COLL,
    "scan": "count type " + _COLL,
    "exscan": "count type " + _COLL,
    "reduce_scatter_block": "count type " + _COLL,
    "reduce_scatter": "rcounts type " + _COLL,
    "gather": f"root buf {_SR} {_COLL}",
    "gatherv": f"root buf scount stype rcounts rtype {_COLL}",
    "scatter": f"root rbuf {_SR} {_COLL}",
    "scatterv": f"root rbuf scounts stype rcount rtype {_COLL}",
    "allgather": f"buf {_SR} {_COLL}",
    "allgatherv": f"buf scount stype rcounts rtype {_COLL}",
    "alltoall": f"buf {_SR} {_COLL}",
    "alltoallv": f"buf scounts stype rcounts rtype {_COLL}",
    "alltoallw": f"buf scounts stypes rcounts rtypes {_COLL}",
    "neighbor_allgather": f"{_SR} {_COLL}",
    "neighbor_allgatherv": f"scount stype rcounts rtype {_COLL}",
    "neighbor_alltoall": f"{_SR} {_COLL}",
    "neighbor_alltoallv": f"scounts stype rcounts rtype {_COLL}",
    "neighbor_alltoallw": f"scounts stypes rcounts rtypes {_COLL}",
    "win": "comm newwin",
    "win_free": "newwin",
    "put": "count type " + _RMA,
    "get": "count type " + _RMA,
    "acc": "count type " + _RMA,
    "getacc": "count type rcount rtype " + _RMA,
    "fop": "type " + _RMA,
    "cas": "type " + _RMA,
    "wait": "request status flag?",
    "waitmulti": "nreq requests flag? index? outcount? indices? status? statuses?",
    "winsync": "win flag? target? tag? group?",
    # a split collective's _end has no count: its _begin had it
    # request: the nonblocking forms' (its completion is MPI-IO time)
    "fread": "file count? type? status? offset? request?",
    "fwrite": "file count? type? status? offset? request?",
    "fopen": "path newfile",
    "fclose": "file",
    "fother": "file",
    "pcontrol": "level",
    "mgmt": "comm newcomm",
    "comm_free": "newcomm",
}


def action_reads(table):
    """READS as {action: {role: None (required) or the value for none}}, checked."""
    out = {}
    for action, text in table.items():
        roles = {}
        for word in text.split():
            role = word.rstrip("?")
            if role not in ROLES:
                raise SpecError(f"action '{action}' reads the unknown role '{role}'")
            if word.endswith("?") and role not in _NONE:
                raise SpecError(f"action '{action}': optional role '{role}' has no value for none")
            roles[role] = _NONE[role] if word.endswith("?") else None
        out[action] = roles
    return out


# Actions whose calls neither move bytes nor matter to a trace: their wrappers pass
# no arguments to pw_mpi_leave (management calls do when they create a communicator).
NO_ARGS_ACTIONS = {"cancel", "mgmt"}
# Actions whose statuses a trace needs even when the program ignores them.
STATUS_ACTIONS = {"recv", "mrecv", "sendrecv", "sendrecv_replace", "wait", "waitmulti", "probe"}
# Completion calls: the communication matrix reads the statuses of pending receives
# (pw_mpi_matrix_waits), also from Fortran.
COMPLETION_ACTIONS = {"wait", "waitmulti"}
# The role of the receive's source, of actions whose status may name it.
_SOURCE_ROLE = {"recv": "peer", "sendrecv": "source", "sendrecv_replace": "source", "probe": "peer"}
# Actions whose status always gives the bytes the call moved (MPI-IO: a short read at the
# end of a file): one of the wrapper's own when the program ignores it.
BYTES_STATUS_ACTIONS = {"fread", "fwrite"}

ACTION_READS = action_reads(READS)
_undeclared = (
    set(" ".join(ACTIONS.values()).split()) - set(READS) - NO_ARGS_ACTIONS - CONTROL_ACTIONS
)
if _undeclared:  # a new action says what its body reads before any wrapper is written
    raise SpecError(f"actions without their roles in READS: {', '.join(sorted(_undeclared))}")

_roleless = set(" ".join(ACTIONS.values()).split()) - set(ACTION_PATTERN)
if _roleless:  # a new action says what it is to the analysis
    raise SpecError(f"actions without a pattern role: {', '.join(sorted(_roleless))}")

_opless = set(_ACTION_PATTERNS["op"].split()) - set(OTF2_RMA_OPS)
if _opless:  # a new one-sided action says what OTF2 calls it
    raise SpecError(f"one-sided actions without an OTF2 operation: {', '.join(sorted(_opless))}")

LINE_RE = re.compile(r"^(\w+)\s+(\w+)\s+(int\s+(MPI_\w+)\s*\((.*)\))\s*(\[(.*)\])?\s*$")


@dataclass
class Arg:
    ctype: str  # C type without the name, e.g. "const int *" or "MPI_Datatype"
    name: str
    role: str = ""
    array: bool = False

    @property
    def decl(self):
        if self.array:
            return f"{self.ctype} {self.name}[]"
        sep = "" if self.ctype.endswith("*") else " "
        return f"{self.ctype}{sep}{self.name}"

    @property
    def base(self):
        """Type without const, pointer or array marks."""
        return re.sub(r"\bconst\b", "", self.ctype).replace("*", "").strip()

    @property
    def indirect(self):
        return self.array or "*" in self.ctype


@dataclass
class Function:
    family: str
    action: str
    name: str
    args: list
    variadic: bool = False
    fortran: bool = True
    fortran_args: list = None
    line: int = 0
    mpi4: bool = False  # only where mpi.h is MPI-4 (the _c large-count forms)
    pattern: str = ""  # its pattern role (PATTERN_ROLES)
    rma: str = ""  # its one-sided role (RMA_ROLES)

    @property
    def lower(self):
        return self.name.lower()


def parse_arg(text, lineno):
    ctype, name, array, role = parse_decl(text, ROLES, f"line {lineno}")
    return Arg(ctype=ctype, name=name, role=role, array=array)


def parse(text):
    """The functions the spec wraps (its section 'classify', parse_classified's, aside)."""
    functions, seen = [], set()
    for lineno, line in entries(sections(text, "section")[0]):
        m = LINE_RE.match(line)
        if not m:
            raise SpecError(f"line {lineno}: expected 'FAMILY ACTION int MPI_Name(args) [flags]'")
        family, action, _, name, argtext, _, flags = m.groups()
        if family not in ACTIONS:
            raise SpecError(f"line {lineno}: unknown family '{family}'")
        if action not in ACTIONS[family].split():
            raise SpecError(f"line {lineno}: action '{action}' is not a {family} action")
        if name in seen:
            raise SpecError(f"line {lineno}: {name} declared twice")
        seen.add(name)
        parts = split_args(argtext)
        variadic = bool(parts) and parts[-1] == "..."
        if variadic:
            parts = parts[:-1]
        args = [parse_arg(p, lineno) for p in parts]
        fn = Function(family, action, name, args, variadic=variadic, line=lineno)
        flags = flags or ""
        fm = re.search(r"fortran=\(([^)]*)\)", flags)
        if fm:
            fn.fortran_args = [parse_arg(p, lineno) for p in split_args(fm.group(1))]
            flags = flags.replace(fm.group(0), "")
        for flag in flags.split():
            if flag == "nofort":
                fn.fortran = False
            elif flag == "mpi4":
                fn.mpi4 = True
                fn.fortran = False  # the table's entry is a C name only (see source())
            elif flag.startswith("pattern="):
                fn.pattern = flag.partition("=")[2]
            elif flag.startswith("rma="):
                fn.rma = flag.partition("=")[2]
                if RMA_ROLES.get(fn.rma) != action:
                    raise SpecError(
                        f"line {lineno}: {name}: '{flag}' is no role of action '{action}'"
                    )
            else:
                raise SpecError(f"line {lineno}: unknown flag '{flag}'")
        if not fn.pattern:
            creates = action == "mgmt" and any(a.role == "newcomm" for a in args)
            fn.pattern = "comm" if creates else ACTION_PATTERN[action]
        check_pattern(fn.pattern, family, f"line {lineno}: {name}")
        if has_args(fn, args):
            reads = ACTION_READS.get(action, {})
            missing = {r for r, none in reads.items() if none is None} - set_roles(args)
            if missing:
                raise SpecError(
                    f"line {lineno}: {name}: action '{action}' reads the roles "
                    f"{', '.join(sorted(missing))}, which {name} does not tag"
                )
        if fn.fortran and fn.fortran_args is None:
            for a in args:
                if fortran_type(a) is None:
                    raise SpecError(
                        f"line {lineno}: {name}: argument '{a.decl}' has no "
                        "Fortran mapping; add [nofort] or fortran=(...)"
                    )
        functions.append(fn)
    if not functions:
        raise SpecError("the spec declares no function")
    return functions


def check_pattern(pattern, family, where):
    if pattern not in PATTERN_ROLES:
        raise SpecError(f"{where}: unknown pattern role '{pattern}'")
    if family and PATTERN_ROLES[pattern][1] != family:
        raise SpecError(f"{where}: pattern role '{pattern}' is not of the family '{family}'")


OTF2_EVENT_RE = re.compile(r"^([A-Z][A-Z0-9_]*)\s+([A-Z]\w*)\s+([0-6])$")


def parse_otf2_events(text):
    """{event: (OTF2 writer function, number of arguments after the time)} of the spec's
    section 'otf2', in its order: the numbering of the export's events."""
    out = {}
    for lineno, line in sections(text, "section")[1].get("otf2", []):
        m = OTF2_EVENT_RE.match(line)
        if not m:
            raise SpecError(f"line {lineno}: expected 'EVENT Writer ARGUMENTS' (0 to 6 arguments)")
        event, writer, nargs = m.groups()
        if event in out:
            raise SpecError(f"line {lineno}: event {event} listed twice")
        out[event] = (writer, int(nargs))
    if len(out) > 255:  # the export's columns hold an event in a byte
        raise SpecError("section otf2: more than 255 events")
    return out


def parse_classified(text):
    """{name: pattern role} of the spec's section 'classify': MPI functions perfweave does
    not wrap, which imported traces hold, one 'PATTERN NAME...' per line."""
    out = {}
    for lineno, line in sections(text, "section")[1].get("classify", []):
        pattern, *names = line.split()
        check_pattern(pattern, "", f"line {lineno}")
        for name in names:
            if not re.fullmatch(r"MPI_\w+", name) or name in out:
                raise SpecError(f"line {lineno}: '{name}' is no MPI name, or listed twice")
            out[name] = pattern
    return out


# ---- C wrappers ----


def c_param_type(a):
    return f"{a.ctype} *" if a.array else a.ctype


# Roles whose value is a pointer (arrays, requests, statuses) are passed as
# pointers; the others are values, and an output handle (MPI_Comm *newcomm,
# MPI_Win *win of Win_create) carries no value an action needs.
POINTER_ROLES = {
    "buf",
    "rbuf",
    "scounts",
    "rcounts",
    "stypes",
    "rtypes",
    "request",
    "requests",
    "status",
    "statuses",
    "newcomm",
    "flag",
    "index",
    "outcount",
    "indices",
    "message",
    "newwin",
    "newfile",
    "path",
}


def carries_value(a):
    """The argument fills its role in `pw_args` (a value role on an output handle only
    documents it)."""
    return bool(a.role) and (not a.indirect or a.role in POINTER_ROLES or a.role == "file")


def set_roles(args):
    return {a.role for a in args if carries_value(a)}


def role_assignments(args, fortran):
    """C statements filling `pw_args a` from the role-tagged arguments."""
    out = []
    for a in args:
        if not carries_value(a):
            continue
        value = fortran_value(a) if fortran else a.name
        if not fortran and a.role == "file" and a.indirect:
            value = f"*{a.name}"  # File_close: the handle before the call clears it
        out.append(f"a.{a.role} = {value};")
        if a.role == "path":  # a Fortran string: its hidden length, no NUL
            out.append(f"a.path_len = {f'(int){a.name}_len' if fortran else '-1'};")
    return out


# Actions that look at their arguments before the real call changes them
# (Request_free clears the handle; a Wait completes its requests).
BEFORE_ACTIONS = {"request_free", "wait", "waitmulti", "comm_free", "win_free", "mrecv"}


def has_args(fn, args):
    if fn.action in NO_ARGS_ACTIONS:
        return fn.action == "mgmt" and any(a.role == "newcomm" for a in args)
    return True


def need_all(fn):
    """When a C wrapper supplies statuses the program ignores: for a trace, and for the
    communication matrix's pending receives at a completion call."""
    if fn.action in COMPLETION_ACTIONS:
        return "(PW_UNLIKELY(pw_trace_on) || PW_UNLIKELY(pw_mpi_matrix_waits))"
    return "PW_UNLIKELY(pw_trace_on)"


def status_lines(fn, args, fortran):
    """Statuses the wrapper supplies where the program ignores them: a trace's (C only),
    and the communication matrix's, which names a receive from MPI_ANY_SOURCE by its
    status' source and a completion's pending receives by theirs (C and Fortran)."""
    src = next((x.name for x in args if x.role == _SOURCE_ROLE.get(fn.action)), None)
    if fortran:
        if fn.action not in COMPLETION_ACTIONS and src is None:
            return []
        many = "PW_UNLIKELY(pw_mpi_matrix_waits)"
        need = many if src is None else f"(int)*{src} == MPI_ANY_SOURCE"
        decl, ignored, one = (
            "MPI_Fint pw_fstatus[MPI_F_STATUS_SIZE]",
            "pw_f_status_ignored({})",
            "pw_fstatus",
        )
        ignored_all, all_ = ignored, "pw_mpi_matrix_fstatuses((int)*{n}, {s})"
    else:
        if fn.action not in STATUS_ACTIONS:
            return []
        many = need_all(fn)
        need = many if src is None else f"({many} || {src} == MPI_ANY_SOURCE)"
        decl, ignored, one = "MPI_Status pw_status", "{} == MPI_STATUS_IGNORE", "&pw_status"
        ignored_all, all_ = "{} == MPI_STATUSES_IGNORE", "pw_trace_statuses({n})"
    lines = []
    for a in args:
        if a.role == "status":
            lines += [
                f"    {decl};",
                f"    if ({need} && {ignored.format(a.name)})",
                f"        {a.name} = {one};",
            ]
        if a.role == "statuses":
            n = next(x.name for x in args if x.role == "nreq")
            lines += [
                f"    if ({many} && {ignored_all.format(a.name)})",
                f"        {a.name} = {all_.format(n=n, s=a.name)};",
            ]
    return lines


def args_lines(fn, args, fortran):
    """Before the real call: substitute statuses a trace needs, fill `pw_args a`."""
    if not has_args(fn, args):
        return []
    lines = []
    if not fortran and fn.action in BYTES_STATUS_ACTIONS:
        for a in args:
            if a.role == "status":
                lines += [
                    "    MPI_Status pw_status = {0}; /* a failed call's: no bytes */",
                    f"    if ({a.name} == MPI_STATUS_IGNORE)",
                    f"        {a.name} = &pw_status;",
                ]
    lines += status_lines(fn, args, fortran)
    lines += ["    pw_args a;", f"    a.fortran = {1 if fortran else 0};"]
    lines += ["    " + s for s in role_assignments(args, fortran)]
    tagged = set_roles(args)
    lines += [
        f"    a.{r} = {none};"
        for r, none in ACTION_READS.get(fn.action, {}).items()
        if none is not None and r not in tagged
    ]
    if fn.action in BEFORE_ACTIONS:
        lines.append(f"    pw_mpi_before(&c, PW_ACTION_{fn.action}, &a);")
    return lines


def leave_line(fn, args):
    return f"    pw_mpi_leave(&c, PW_ACTION_{fn.action}, {'&a' if has_args(fn, args) else 'NULL'});"


def call_list(args):
    return ", ".join(a.name for a in args)


def c_wrapper(fn):
    params = ", ".join(a.decl for a in fn.args) or "void"
    if fn.variadic:
        params += ", ..."
    call = call_list(fn.args)
    fid = f"PW_FN_{fn.name}"
    ptypes = ", ".join(c_param_type(a) for a in fn.args) or "void"
    if fn.variadic:
        ptypes += ", ..."
    lines = [
        f"typedef int (*pw_creal_{fn.name})({ptypes});",
        f"PW_WRAPPER int {fn.name}({params})",
        "{",
        f"    static pw_creal_{fn.name} real;",
        "    if (PW_UNLIKELY(!real))",
        f'        real = (pw_creal_{fn.name})pw_mpi_real("P{fn.name}");',
        "    void *ra = __builtin_return_address(0);",
    ]
    if fn.action in CONTROL_ACTIONS:
        lines += control_body(fn, f"real({call})", fid, fortran=False)
    else:
        lines += [
            "    pw_call c;",
            f"    if (!pw_mpi_enter(&c, {fid}, ra))",
            f"        return real({call});",
        ]
        lines += args_lines(fn, fn.args, fortran=False)
        lines += [f"    int rc = real({call});", leave_line(fn, fn.args)]
        lines += ["    return rc;"]
    lines.append("}")
    return "\n".join(lines)


def nested_guard(call, fortran):
    """Inside another wrapper (a Fortran binding calling the C one): just forward."""
    if fortran:
        return ["    if (pw_mpi_nested()) {", f"        {call};", "        return;", "    }"]
    return ["    if (pw_mpi_nested())", f"        return {call};"]


def control_body(fn, call, fid, fortran):
    """Init, Finalize, Abort and Pcontrol: hooks around the real call."""
    ret = "" if fortran else "return "
    rc_decl = "" if fortran else "int rc = "
    rc_ret = "return;" if fortran else "return rc;"
    level = "*level" if fortran else "level"
    if fn.action == "init":
        provided = "-1"
        for a in fn.fortran_args if fortran else fn.args:
            if a.name == "provided":
                provided = "*provided"
        return nested_guard(call, fortran) + [
            "    pw_mpi_nest();",
            "    int64_t t0 = pw_now();",
            "    pw_thread_activity = PW_ACTIVITY_OTHER; /* MPI's start-up is MPI time */",
            "    pw_mpi_anchor();",
            f"    {rc_decl}{call};",
            f"    pw_mpi_init_done({fid}, ra, t0, {provided});",
            "    pw_thread_activity = 0;",
            "    pw_call_anchor = 0;",
            "    pw_mpi_unnest();",
            f"    {rc_ret}",
        ]
    if fn.action == "finalize":
        return nested_guard(call, fortran) + [
            "    pw_mpi_nest();",
            "    pw_thread_activity = PW_ACTIVITY_OTHER;",
            "    pw_mpi_anchor();",
            f"    pw_mpi_finalize_begin({fid}, ra);",
            f"    {rc_decl}{call};",
            "    pw_thread_activity = 0;",
            "    pw_call_anchor = 0;",
            "    pw_mpi_finalize_done();",
            "    pw_mpi_unnest();",
            f"    {rc_ret}",
        ]
    if fn.action == "abort":
        return ["    pw_mpi_abort(ra);", f"    {ret}{call};"]
    if fn.action == "pcontrol":
        return ["    (void)ra;", f"    pw_mpi_pcontrol({level});", f"    {ret}{call};"]
    raise AssertionError(fn.action)


# ---- Fortran wrappers ----

HANDLE_F2C = {
    "MPI_Comm": "pw_comm_f2c",
    "MPI_Datatype": "pw_type_f2c",
    "MPI_Win": "pw_win_f2c",
    "MPI_File": "pw_file_f2c",
    "MPI_Request": "pw_request_f2c",
    "MPI_Group": "pw_group_f2c",
}
FORTRAN_HANDLES = {
    "MPI_Comm",
    "MPI_Datatype",
    "MPI_Win",
    "MPI_File",
    "MPI_Request",
    "MPI_Group",
    "MPI_Op",
    "MPI_Info",
    "MPI_Message",
    "MPI_Errhandler",
    "MPI_Status",
    "int",
}


def fortran_type(a):
    """C type of the argument as a Fortran binding passes it (always by reference)."""
    base = a.base
    if base == "void":
        return "void *"
    if base in FORTRAN_HANDLES:
        return "MPI_Fint *"
    if base in ("MPI_Aint", "MPI_Offset", "MPI_Count"):
        return f"{base} *"
    if base == "char":
        return "char *"  # with a hidden length after ierr (fortran_strings)
    return None


def fortran_strings(args):
    """The hidden length arguments of a Fortran binding's strings, in order."""
    return [a for a in args if a.base == "char"]


def fortran_value(a):
    """C expression for a role's value inside a Fortran wrapper."""
    if a.role in ("scounts", "rcounts"):
        return f"(const int *){a.name}"
    if a.role in POINTER_ROLES:
        return f"(const void *){a.name}"
    if a.base in HANDLE_F2C:
        return f"{HANDLE_F2C[a.base]}(*{a.name})"
    if a.base == "int":
        return f"(int)*{a.name}"
    return f"*{a.name}"


# Entry points of the Fortran bindings: mpif.h and `use mpi` (name_, name__),
# `use mpi_f08` of Open MPI and of MPICH without choice buffers (name_f08_), and
# MPICH's f08 routines with a choice buffer (name_f08ts_).
FORTRAN_SUFFIXES = ("_", "__", "_f08_", "_f08ts_")


def fortran_wrapper(fn):
    args = fn.fortran_args if fn.fortran_args is not None else fn.args
    strings = fortran_strings(args)
    fparams = [f"{fortran_type(a)}{a.name}" for a in args] + ["MPI_Fint *ierr"]
    fparams += [f"size_t {a.name}_len" for a in strings]
    ftypes = ", ".join(
        [fortran_type(a) for a in args] + ["MPI_Fint *"] + ["size_t" for _ in strings]
    )
    body_params = ", ".join([f"pw_freal_{fn.name} real", "void *ra"] + fparams)
    call = ", ".join([a.name for a in args] + ["ierr"] + [f"{a.name}_len" for a in strings])
    fid = f"PW_FN_{fn.name}"
    lines = [
        f"typedef void (*pw_freal_{fn.name})({ftypes});",
        f"static inline __attribute__((always_inline)) void pw_f_{fn.name}({body_params})",
        "{",
    ]
    if fn.action in CONTROL_ACTIONS:
        lines += control_body(fn, f"real({call})", fid, fortran=True)
    else:
        lines += [
            "    pw_call c;",
            f"    if (!pw_mpi_enter(&c, {fid}, ra)) {{",
            f"        real({call});",
            "        return;",
            "    }",
        ]
        lines += args_lines(fn, args, fortran=True)
        lines += [f"    real({call});", leave_line(fn, args)]
    lines.append("}")
    params = ", ".join(fparams)
    for suffix in FORTRAN_SUFFIXES:
        sym = fn.lower + suffix
        lines += [
            f"PW_WRAPPER void {sym}({params})",
            "{",
            f"    static pw_freal_{fn.name} real;",
            "    if (PW_UNLIKELY(!real))",
            f'        real = (pw_freal_{fn.name})pw_mpi_fortran_real("{sym}", (void *){sym});',
            f"    pw_f_{fn.name}(real, __builtin_return_address(0), {call});",
            "}",
        ]
    return "\n".join(lines)


# ---- output files ----


def header(functions):
    out = [
        "/* Generated by runtime/mpi/gen_wrappers.py from mpi.spec: do not edit. */",
        "#ifndef PW_MPI_FN_H",
        "#define PW_MPI_FN_H",
        "",
        f"#define PW_MPI_NFN {len(functions)}",
        "",
        "/* The spec's actions (one body each in pw_mpi_leave, modules/pw_mpi.h), by family */",
        "#define PW_MPI_ACTIONS(X) \\",
    ]
    out += [f"    {' '.join(f'X({k})' for k in ks.split())} \\" for ks in ACTIONS.values()]
    out += ["", "enum pw_mpi_fn {"]
    out += [f"    PW_FN_{f.name} = {i}," for i, f in enumerate(functions)]
    out += [
        "};",
        "",
        "extern const char *pw_mpi_fn_names[PW_MPI_NFN];",
        "extern const signed char pw_mpi_fn_family[PW_MPI_NFN]; /* PW_FAMILY_* */",
        "extern const unsigned char pw_mpi_fn_actions[PW_MPI_NFN];",
        "/* a send of synchronous mode: the trace's PW_EVF_SYNCHRONOUS (synchronous()) */",
        "extern const unsigned char pw_mpi_fn_synchronous[PW_MPI_NFN];",
        "",
        "#endif",
        "",
    ]
    return "\n".join(out)


def source(functions):
    out = [
        "/* Generated by runtime/mpi/gen_wrappers.py from mpi.spec: do not edit. */",
        "#include <mpi.h>",
        '#include "pw_mpi_fn.h"',
        '#include "modules/pw_mpi.h"',
        "",
        "const char *pw_mpi_fn_names[PW_MPI_NFN] = {",
    ]
    out += [f'    "{f.name}",' for f in functions]
    out += ["};", "", "const signed char pw_mpi_fn_family[PW_MPI_NFN] = {"]
    out += [f"    PW_FAMILY_{f.family.upper()}," for f in functions]
    out += ["};", "", "const unsigned char pw_mpi_fn_actions[PW_MPI_NFN] = {"]
    out += [f"    PW_ACTION_{f.action}," for f in functions]
    out += ["};", "", "const unsigned char pw_mpi_fn_synchronous[PW_MPI_NFN] = {"]
    out += [f"    {int(synchronous(f))}, /* {f.name} */" for f in functions]
    out += ["};", ""]
    for f in functions:
        if f.mpi4:
            out.append("#if MPI_VERSION >= 4")
        out += [f"/* {f.family} {f.action}: spec line {f.line} */", c_wrapper(f), ""]
        if f.fortran:
            out += [fortran_wrapper(f), ""]
        if f.mpi4:  # not in this MPI: an empty entry, the core's stub forwards the call
            out += ["#else", f"#define {f.name} ((void *)0)", "#endif", ""]
    out += [
        "/* The wrappers in the order of pw_mpi_symbols.h: the core's stub number i jumps",
        " * to entry i once this library is loaded. */",
        '#include "pw_mpi_symbols.h"',
        "#define PW_TABLE_ENTRY(i, name) (void *)name,",
        "PW_EXPORT void *const pw_mpi_wrapper_table[PW_MPI_NSYMBOLS] = {",
        "    PW_MPI_SYMBOLS(PW_TABLE_ENTRY)",
        "};",
        "",
    ]
    return "\n".join(out)


def symbols(functions):
    """Every symbol a wrapper stands for: the C name, then the Fortran names."""
    names = []
    for f in functions:
        names.append(f.name)
        if f.fortran:
            names += [f.lower + suffix for suffix in FORTRAN_SUFFIXES]
    return names


def symbols_header(functions):
    names = symbols(functions)
    return guarded_header(
        "PW_MPI_SYMBOLS_H",
        [
            f"#define PW_MPI_NSYMBOLS {len(names)}",
            "",
            "/* X(index, symbol) for every symbol the MPI module wraps */",
            "#define PW_MPI_SYMBOLS(X) \\",
            *(f"    X({i}, {n}) \\" for i, n in enumerate(names)),
        ],
    )


def guarded_header(guard, lines):
    """A generated header: its note, then lines inside the include guard."""
    return "\n".join(
        [
            "/* Generated by runtime/mpi/gen_wrappers.py from mpi.spec: do not edit. */",
            f"#ifndef {guard}",
            f"#define {guard}",
            "",
            *lines,
            "",
            "#endif",
            "",
        ]
    )


def synchronous(fn):
    """A send of synchronous mode (MPI_Ssend, MPI_Issend, MPI_Ssend_init): the trace's
    SYNCHRONOUS flag (pw_mpi_fn_synchronous, read by runtime/modules/mpi_trace.c) and
    _mpi.SYNCHRONOUS (the OTF2 import's and export's)."""
    return "Ssend" in fn.name or "Issend" in fn.name


def posts_request(fn):
    """The nonblocking form of an action whose request is optional (MPI_Ibcast, MPI_Rput,
    MPI_File_iread): the call tags the request it returns."""
    return ACTION_READS.get(fn.action, {}).get("request") is not None and "request" in set_roles(
        fn.args
    )


def table(functions, classified, events=None):
    """perfweave/_mpi.py: FUNCTIONS {name: (family, action, pattern role, blocking twin)} of
    the wrapped functions (action "" for those listed for classification only), and the
    pattern roles with their time category and family; the synchronous sends, the
    calls that post a request, those that lock and unlock a window (passive target) and
    those that create a window on memory they allocate ([rma=ROLE]); per collective and
    one-sided communication its OTF2 operation, and the OTF2 events of the spec's section
    'otf2' (events)."""
    actions = {f.name: f.action for f in functions}
    rows = {}
    for f in functions:
        twin = "MPI_" + f.name[5:6].upper() + f.name[6:]  # MPI_Ibcast -> MPI_Bcast
        nonblocking = f.family == "coll" and f.name[4] == "I" and actions.get(twin) == f.action
        rows[f.name] = (f.family, f.action, f.pattern, twin if nonblocking else None)
    for name, pattern in classified.items():
        if name in rows:
            raise SpecError(f"{name} is both wrapped and listed for classification only")
        rows[name] = (PATTERN_ROLES[pattern][1], "", pattern, None)
    return py_table(
        "runtime/mpi/gen_wrappers.py from mpi.spec",
        "What each MPI function is: family, action, pattern role, blocking twin; the\n"
        "synchronous sends, the calls that post a request, lock or unlock a window or\n"
        "create one on memory they allocate; what OTF2 calls the operations of collectives\n"
        "and one-sided communications, and the OTF2 events the export writes:\n"
        "{event: (writer function, arguments after the time)}, numbered in order.",
        {
            "PATTERN_ROLES": {r: cf for r, cf in PATTERN_ROLES.items()},
            "FUNCTIONS": rows,
            "SYNCHRONOUS": frozenset(f.name for f in functions if synchronous(f)),
            "POSTS_REQUEST": frozenset(f.name for f in functions if posts_request(f)),
            "LOCKS_WINDOW": frozenset(f.name for f in functions if f.rma == "lock"),
            "UNLOCKS_WINDOW": frozenset(f.name for f in functions if f.rma == "unlock"),
            "ALLOCATES_WINDOW": frozenset(f.name for f in functions if f.rma == "allocate"),
            "OTF2_COLLECTIVE_OPS": {
                f.name: otf2_collective_op(f.action) for f in functions if f.family == "coll"
            },
            "OTF2_RMA_OPS": {
                f.name: OTF2_RMA_OPS[f.action] for f in functions if f.action in OTF2_RMA_OPS
            },
            "OTF2_EVENTS": dict(events or {}),
        },
    )


def otf2_events_header(events):
    return guarded_header(
        "PW_OTF2_EVENTS_H",
        [
            "/* X(EVENT) per OTF2 event of the export (mpi.spec, section otf2), numbered in order",
            " * as perfweave/_mpi.py's OTF2_EVENTS */",
            "#define PW_OTF2_EVENTS(X) \\",
            *(f"    X({e}) \\" for e in events),
        ],
    )


def generate(text):
    functions = parse(text)
    events = parse_otf2_events(text)
    return {
        "pw_mpi_fn.h": header(functions),
        "pw_mpi_wrappers.c": source(functions),
        "pw_mpi_symbols.h": symbols_header(functions),
        "_mpi.py": table(functions, parse_classified(text), events),
        "pw_otf2_events.h": otf2_events_header(events),
    }


def main(argv):
    spec_tools.main(argv, __doc__, generate)


if __name__ == "__main__":
    main(sys.argv)
