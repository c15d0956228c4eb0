#!/usr/bin/env python3
"""Generate the mathlib module's wrappers from mathlib.spec.

    gen_wrappers.py SPEC OUTDIR

writes OUTDIR/pw_ml_fn.h (routine ids, the routines' names, groups and kinds, every
routine the spec lists and does not wrap, with why), OUTDIR/pw_ml_wrappers.c (one
wrapper per wrapped routine, and for each Fortran one its ILP64 twin NAME_64_) and
OUTDIR/_mathlib.py (the names the samples' classification knows the math libraries by,
installed as perfweave/_mathlib.py: the BLAS routines and LAPACK matrix types of the
routines the spec lists, and the spec's sections after them: table()).

Every wrapper has one shape (runtime/modules/mathlib.h): the real routine looked up once
and cached, called exactly once whatever perfweave's state; recorded only by the
outermost math-library call of the thread (pw_ml_enter: one depth per thread across the
whole family, so that cblas_dgemm -> dgemm_ and LAPACK's own BLAS calls are internal,
counted apart); the return value untouched. The record of a call (its size class, flops
and bytes) comes from the arguments the spec tags, and the formulas the spec states.
"""

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gen"))
import spec_tools  # noqa: E402
from spec_tools import SpecError, entries, parse_decl, py_table, sections, split_args  # noqa: E402

GROUPS = (
    "blas1",
    "blas2",
    "blas3",
    "cblas",
    "lapack",
    "lapacke",
    "fftw",
    "scalapack",
    "cublas",
    "cufft",
)
KINDS = ("call", "plan", "exec", "destroy")
FFT_KINDS = {"c2c": 0, "r2c": 1, "c2r": 2}
PLAN_ROLES = set("rank n n0 n1 n2 howmany in out sign flags planout comm type handleout".split())
ROLES = {"d", "c", "op", "count", "plan", "handle", "desc"} | PLAN_ROLES
# Per prefix letter: {T} CBLAS element type, {A} CBLAS scalar argument, {R} real type,
# {E} bytes per element, {X} real flops per multiply-add relative to a real one.
PREFIX = {
    "s": {"T": "float", "A": "float", "R": "float", "E": "4", "X": "1"},
    "d": {"T": "double", "A": "double", "R": "double", "E": "8", "X": "1"},
    "c": {"T": "void", "A": "void *", "R": "float", "E": "8", "X": "4"},
    "z": {"T": "void", "A": "void *", "R": "double", "E": "16", "X": "4"},
}
MAX_DIMS, MAX_CHARS = 3, 4


@dataclass
class Param:
    ctype: str
    name: str
    role: str = ""
    wide: bool = False  # a by-value int taken as long (WIDE)

    @property
    def pointer(self):
        return self.ctype.rstrip().endswith("*")

    @property
    def base(self):
        """The pointee's type, for a pointer argument."""
        return self.ctype.rstrip()[:-1].rstrip()


@dataclass
class Routine:
    name: str
    group: str
    kind: str
    flops: str
    bytes: str
    ret: str
    params: list
    fortran: bool = False
    fft_kind: str = ""
    nowrap: str = ""
    twin: bool = True  # a Fortran routine's ILP64 twin NAME_64_ is written
    line: int = 0
    hidden: list = field(default_factory=list)  # hidden length arguments

    @property
    def ident(self):
        return "PW_ML_" + self.name


def parse_param(text, where):
    ctype, name, _, role = parse_decl(text, ROLES, where)
    return Param(ctype, name, role)


def expand(line_no, text):
    """One spec line into its routines (prefix and precision expansions)."""
    where = f"line {line_no}"
    flags = {}
    m = re.search(r"\[([^\]]*)\]\s*$", text)
    if m:
        for f in m.group(1).split():
            k, _, v = f.partition("=")
            flags[k] = v
        text = text[: m.start()].rstrip()
    cols = text.split(None, 4)
    if len(cols) != 5:
        raise SpecError(f"{where}: expected GROUP KIND FLOPS BYTES PROTOTYPE")
    group, kind, flops, nbytes, proto = cols
    if group not in GROUPS or kind not in KINDS:
        raise SpecError(f"{where}: unknown group or kind '{group} {kind}'")
    unknown = set(flags) - {"f", "p", "kind", "fftw", "nowrap", "no64"}
    if unknown:
        raise SpecError(f"{where}: unknown flags {sorted(unknown)}")
    out = []
    for letter in flags.get("p", "") or [""]:
        subst = PREFIX.get(letter.lower(), {})  # cuBLAS writes them upper case
        for prec in flags["fftw"].split(",") if "fftw" in flags else [""]:

            def sub(s, letter=letter, subst=subst, prec=prec, name=True):
                if name:  # in FLOPS and BYTES '?' is C's conditional
                    s = s.replace("?", letter)
                for k, v in subst.items():
                    s = s.replace("{" + k + "}", v)
                if prec:
                    s = re.sub(r"\b[ds]?fftw(?=_)", prec, s, count=1)
                return s

            p = sub(proto)
            m = re.fullmatch(r"(.+?[\s*])(\w+)\s*\((.*)\)", p)
            if not m:
                raise SpecError(f"{where}: cannot read prototype '{p}'")
            r = Routine(
                name=m.group(2),
                group=group,
                kind=kind,
                flops=sub(flops, name=False),
                bytes=sub(nbytes, name=False),
                ret=m.group(1).strip(),
                params=[parse_param(a, where) for a in split_args(m.group(3))],
                fortran="f" in flags,
                fft_kind=flags.get("kind", ""),
                nowrap=flags.get("nowrap", ""),
                twin="no64" not in flags,
                line=line_no,
            )
            if "{" in r.ret + r.flops + r.bytes or any("{" in a.ctype for a in r.params):
                raise SpecError(f"{where}: unexpanded placeholder in {r.name}")
            check(r, where)
            out.append(r)
    return out


def check(r, where):
    roles = [a.role for a in r.params if a.role]
    if sum(1 for x in roles if x == "d") > MAX_DIMS:
        raise SpecError(f"{where}: {r.name}: more than {MAX_DIMS} dimensions")
    if roles.count("desc") > 1 or roles.count("comm") > 1:
        raise SpecError(f"{where}: {r.name}: more than one :desc or :comm argument")
    if sum(1 for x in roles if x in ("c", "op")) > MAX_CHARS:
        raise SpecError(f"{where}: {r.name}: more than {MAX_CHARS} characters")
    if r.kind in ("exec", "destroy") and roles.count("plan") + roles.count("handle") != 1:
        raise SpecError(f"{where}: {r.name}: an FFT {r.kind} needs one :plan or :handle")
    if r.kind == "plan" and not r.nowrap:
        if r.fft_kind not in FFT_KINDS and "type" not in roles:
            raise SpecError(f"{where}: {r.name}: a planner needs kind=c2c, r2c, c2r or a :type")
        if "handleout" in roles and r.ret != "int":
            raise SpecError(f"{where}: {r.name}: a :handleout planner returns its status (int)")
        if not ({"n0", "n"} & set(roles)) or ("n" in roles) != ("rank" in roles):
            raise SpecError(f"{where}: {r.name}: a planner needs n0.. or rank and n")
    if r.kind == "call" and r.flops == "-":
        raise SpecError(f"{where}: {r.name}: a routine needs a flop formula")
    if r.fortran:
        r.hidden = [a.name for a in r.params if a.ctype.replace(" ", "") == "constchar*"]


def parse(text):
    routines, seen = [], set()
    for no, line in entries(sections(text, "section")[0]):
        for r in expand(no, line):
            if r.name in seen:
                raise SpecError(f"line {no}: {r.name} listed twice")
            seen.add(r.name)
            routines.append(r)
            if r.fortran and r.twin:  # the ILP64 twin: Debian's libblas64 / liblapack64 naming
                twin = Routine(**{**r.__dict__, "name": r.name + "64_"})
                twin.params = [
                    Param(re.sub(r"\bint\b", "int64_t", a.ctype), a.name, a.role) for a in r.params
                ]
                twin.hidden = list(r.hidden)
                if twin.ret == "int":
                    twin.ret = "int64_t"
                routines.append(twin)
    return routines


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def header(routines):
    wrapped = [r for r in routines if not r.nowrap]
    lines = [
        "/* Generated by runtime/mathlib/gen_wrappers.py from mathlib.spec: do not edit. */",
        "#ifndef PW_ML_FN_H",
        "#define PW_ML_FN_H",
        "",
        "enum pw_ml_fn {",
    ]
    lines += [f"    {r.ident}," for r in wrapped]
    lines += ["    PW_ML_NFN", "};", ""]
    lines.append("/* GROUP: the library interface, as mathlib.spec names them */")
    lines.append("#define PW_ML_GROUPS(X) " + " ".join(f"X({g}, {c_string(g)})" for g in GROUPS))
    lines.append("#define PW_ML_KINDS(X) " + " ".join(f"X({k}, {c_string(k)})" for k in KINDS))
    lines.append("/* X(ident, name, group index, kind index) per wrapped routine, by id */")
    lines.append("#define PW_ML_ROUTINES(X) \\")
    for r in wrapped:
        g, k = GROUPS.index(r.group), KINDS.index(r.kind)
        lines.append(f"    X({r.ident}, {c_string(r.name)}, {g}, {k}) \\")
    lines.append("")
    lines.append("/* X(name, why) per listed routine that is not wrapped */")
    lines.append("#define PW_ML_NOT_WRAPPED(X) \\")
    for r in routines:
        if r.nowrap:
            lines.append(f"    X({c_string(r.name)}, {c_string(r.nowrap)}) \\")
    lines += ["", "#endif", ""]
    return "\n".join(lines)


def scalar(a):
    """The value of a tagged scalar argument: its pointee for a pointer."""
    if a.wide:
        return f"(int)a_{a.name}"
    return f"*a_{a.name}" if a.pointer else f"a_{a.name}"


# A C-ABI integer passed by value: the wrapper takes and passes on the whole 64-bit
# register or stack slot (long), so that an ILP64 library's 64-bit integer (OpenBLAS's
# blasint, LAPACKE's lapack_int in Debian's libopenblas64, under the usual names) reaches
# it unchanged; the wrapper reads its low 32 bits (an LP64 caller's int; an ILP64 value
# below 2^31). An int return is passed back whole the same way.
WIDE = {"int", "const int"}


def widen(r):
    """The wrapper's parameter types (C ABI: groups cblas and lapacke) and return type."""
    ret = "long" if r.ret == "int" else r.ret  # i?amax_: INTEGER*8 in an ILP64 library
    if r.fortran or r.group not in ("cblas", "lapacke"):
        return r.params, ret
    params = [Param("long", a.name, a.role) if a.ctype in WIDE else a for a in r.params]
    for a, w in zip(r.params, params):
        if w is not a:
            w.wide = True
    return params, ret


def wrapper(r):
    wparams, ret = widen(r)
    r = Routine(**{**r.__dict__, "params": wparams, "ret": ret})
    params = [(a.ctype, "a_" + a.name) for a in r.params]
    params += [("size_t", "len_" + h) for h in r.hidden]
    decl = ", ".join(f"{t} {n}" if not t.endswith("*") else f"{t}{n}" for t, n in params)
    args = ", ".join(n for _, n in params)
    types = ", ".join(t for t, _ in params) or "void"
    is_void = r.ret == "void"
    ret_ptr = r.ret.endswith("*")
    fail = "return;" if is_void else ("return NULL;" if ret_ptr else f"return ({r.ret})0;")
    keep = "" if is_void else f"{r.ret} rv = "
    back = "return;" if is_void else "return rv;"
    star = "" if ret_ptr else " "
    o = [
        f"/* mathlib.spec:{r.line} */",
        f"typedef {r.ret}{star}pw_ml_real_{r.name}_t({types});",
        f"PW_EXPORT {r.ret}{star}{r.name}({decl or 'void'})",
        "{",
        f"    static pw_ml_real_{r.name}_t *real;",
        "    if (PW_UNLIKELY(!real) &&",
        f"        !(*(void **)&real = pw_ml_resolve({r.ident}))) {{",
        f"        pw_ml_missing({r.ident});",
        f"        {fail}",
        "    }",
        f"    if (!pw_ml_enter({r.ident})) {{",
        f"        {'' if is_void else 'return '}real({args});",
        *(["        return;"] if is_void else []),
        "    }",
        "    int64_t t0 = pw_ticks();",
        f"    {keep}real({args});",
        "    int64_t t1 = pw_ticks();",
        "    uintptr_t ra = (uintptr_t)__builtin_return_address(0);",
    ]
    o += globals()["body_" + r.kind](r)
    o += [f"    {back}", "}", ""]
    return o


def body_call(r):
    dims = [a for a in r.params if a.role == "d"]
    chars = [a for a in r.params if a.role in ("c", "op")]
    o = ["    {"]
    for a in dims:
        o.append(f"        const double {a.name} = (double)({scalar(a)});")
    desc = [a for a in r.params if a.role == "desc"]
    if desc:  # a distributed matrix: P, the processes of its BLACS grid
        o.append(f"        const double P = pw_ml_grid_procs(a_{desc[0].name});")
        o.append("        (void)P;")
    for a in (a for a in r.params if a.role == "count"):  # in the formulas only
        o.append(f"        const double {a.name} = (double)({scalar(a)});")
        o.append(f"        (void){a.name};")
    for i, a in enumerate(chars):
        if a.role == "op":  # cuBLAS's cublasOperation_t
            conv = f"pw_ml_op_char((int)a_{a.name})"
        elif a.pointer:
            conv = f"pw_ml_char(*a_{a.name})"
        else:
            conv = f"pw_ml_enum_char((int)a_{a.name})"
        o.append(f"        const int c{i} = {conv};")
    d = [f"(int64_t)({scalar(a)})" for a in dims] + ["0"] * (MAX_DIMS - len(dims))
    c = [f"c{i}" for i in range(len(chars))] + ["0"] * (MAX_CHARS - len(chars))
    o.append(f"        const int64_t d[{MAX_DIMS}] = {{{', '.join(d)}}};")
    for a in dims:
        o.append(f"        (void){a.name};")
    for i in range(len(chars)):
        o.append(f"        (void)c{i};")
    nb = "0" if r.bytes == "-" else f"(double)({r.bytes})"
    o.append(
        f"        pw_ml_record({r.ident}, ra, t1 - t0, d, pw_ml_chars({', '.join(c)}), "
        f"(double)({r.flops}), {nb});"
    )
    o.append("    }")
    return o


def body_plan(r):
    roles = {a.role: a for a in r.params if a.role}
    o = ["    {", "        pw_ml_plan_desc pd;"]
    if "type" in roles:  # cuFFT: the kind from the cufftType
        kind = f"pw_ml_cufft_kind((int)({scalar(roles['type'])}))"
    else:
        kind = FFT_KINDS[r.fft_kind]
    o.append(f"        pw_ml_plan_desc_init(&pd, {kind});")
    if "rank" in roles:
        n = roles["n"]
        fn = "pw_ml_plan_desc_ldims" if "ptrdiff_t" in n.ctype else "pw_ml_plan_desc_dims"
        o.append(f"        {fn}(&pd, {scalar(roles['rank'])}, a_{n.name});")
    else:
        ns = [scalar(roles[k]) for k in ("n0", "n1", "n2") if k in roles]
        o.append(f"        const int64_t n[{len(ns)}] = {{{', '.join(ns)}}};")
        o.append(f"        pw_ml_plan_desc_ldims(&pd, {len(ns)}, n);")
    if "howmany" in roles:
        o.append(f"        pd.howmany = {scalar(roles['howmany'])};")
    if "sign" in roles:
        o.append(f"        pd.sign = {scalar(roles['sign'])};")
    if "comm" in roles:  # an MPI plan: the communicator's processes share its work
        o.append(f"        pd.procs = pw_ml_comm_procs(a_{roles['comm'].name});")
    if "flags" in roles:
        o.append(f"        pd.flags = (uint32_t)({scalar(roles['flags'])});")
    if "in" in roles and "out" in roles:
        o.append(f"        pd.inplace = a_{roles['in'].name} == a_{roles['out'].name};")
    if "handleout" in roles:  # cuFFT: the handle written on success (status 0)
        plan = f"(int)rv == 0 ? pw_ml_cufft_plan(*a_{roles['handleout'].name}) : NULL"
    else:
        plan = f"*a_{roles['planout'].name}" if "planout" in roles else "rv"
    o.append(f"        pw_ml_plan_made({r.ident}, ra, t1 - t0, {plan}, &pd);")
    o.append("    }")
    return o


def plan_arg(r):
    a = next(a for a in r.params if a.role in ("plan", "handle"))
    if a.role == "handle":
        return f"pw_ml_cufft_plan(a_{a.name})"
    return (
        f"*a_{a.name}" if "**" in a.ctype.replace(" ", "").replace("const", "") else f"a_{a.name}"
    )


def body_exec(r):
    return [
        "    {",
        f"        const pw_ml_plan *pl = pw_ml_plan_find({plan_arg(r)});",
        "        const double N = pl ? pl->size : 0, H = pl ? (double)pl->howmany : 0;",
        "        const double P = pl && pl->procs > 1 ? (double)pl->procs : 1;",
        f"        const double flops = N > 1 ? (double)({r.flops}) : 0;",
        "        (void)H;",
        "        (void)P;",
        f"        pw_ml_plan_executed({r.ident}, ra, t1 - t0, pl, flops);",
        "    }",
    ]


def body_destroy(r):
    return [f"    pw_ml_plan_destroyed({r.ident}, ra, t1 - t0, {plan_arg(r)});"]


def wrappers(routines):
    lines = [
        "/* Generated by runtime/mathlib/gen_wrappers.py from mathlib.spec: do not edit. */",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "",
        '#include "modules/mathlib.h"',
        "",
        "#define MIN(a, b) ((a) < (b) ? (a) : (b))",
        "#define MAX(a, b) ((a) > (b) ? (a) : (b))",
        "#define log2(x) pw_ml_log2(x)",
        "",
    ]
    for r in routines:
        if not r.nowrap:
            lines += wrapper(r)
    return "\n".join(lines)


# The spec's sections (after its routines), each a list of words: what the samples'
# classification (python/perfweave/analysis/samples/names.py) knows besides the routines.
SECTIONS = {
    "libraries": "LIBRARIES",
    "blas": "BLAS",
    "extensions": "EXTENSIONS",
    "lapack_types": "LAPACK_TYPES",
    "interfaces": "INTERFACES",
    "prefixes": "PREFIXES",
    "internals": "INTERNALS",
    "blis": "BLIS",
}


def blas_name(name):
    """A BLAS routine's name without its type letters and the Fortran underscore
    (daxpy_ -> axpy, idamax_ -> amax, cdotc_ -> dotc)."""
    n = name.rstrip("_")
    return n[2:] if n[0] == "i" and n[1] in PREFIX else n[1:]


def table(routines, text):
    """perfweave/_mathlib.py: the section's words of SECTIONS, with BLAS the BLAS routines
    of the spec's Fortran BLAS lines (blas_name), LAPACK_TYPES the matrix types of its
    LAPACK lines (dgetrf_ -> ge) and INTERFACES the prefixes of its CBLAS and LAPACKE
    lines (cblas_dgemm -> cblas) added; BLIS: 'operation=routine' words as a dict."""
    named = sections(text, "section")[1]
    unknown = set(named) - set(SECTIONS)
    if unknown:
        raise SpecError(f"unknown sections {sorted(unknown)}")
    words = {key: [] for key in SECTIONS.values()}
    for r in routines:
        if r.name.endswith("_64_"):
            continue  # an ILP64 twin
        if r.group in ("blas1", "blas2", "blas3"):
            words["BLAS"].append(blas_name(r.name))
        elif r.group == "lapack":
            words["LAPACK_TYPES"].append(r.name[1:3])
        elif r.group in ("cblas", "lapacke"):
            words["INTERFACES"].append(r.name.split("_")[0])
    for section, key in SECTIONS.items():
        for lineno, line in named.get(section, []):
            for word in line.split():
                if word in words[key]:
                    raise SpecError(f"line {lineno}: {word} listed twice")
                words[key].append(word)
    blis = {}
    for word in words.pop("BLIS"):
        op, _, routine = word.partition("=")
        if routine not in words["BLAS"] + words["EXTENSIONS"]:
            raise SpecError(f"section blis: '{word}' is not OPERATION=BLAS_ROUTINE")
        blis[op] = routine
    values = {key: frozenset(found) for key, found in words.items()}
    values["BLIS"] = blis
    return py_table(
        "runtime/mathlib/gen_wrappers.py from mathlib.spec",
        "The names of the math libraries' objects and functions (analysis/samples/names.py).",
        values,
    )


def generate(text):
    routines = parse(text)
    return {
        "pw_ml_fn.h": header(routines),
        "pw_ml_wrappers.c": wrappers(routines),
        "_mathlib.py": table(routines, text),
    }


def main(argv):
    spec_tools.main(argv, __doc__, generate)


if __name__ == "__main__":
    main(sys.argv)
