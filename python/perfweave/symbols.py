"""Post-mortem symbolisation of (object, offset) code addresses.

Offsets are return addresses relative to the object's load base (as in the
profile files); the call instruction is the byte before, so offset - 1 is looked
up. addr2line (GNU binutils) reads DWARF for function, file:line and inlined
frames, and demangles C++ (Fortran names: fortran_name). Code without debug
information is named from the object's symbol tables (nm: .symtab, else the dynamic
symbols of a stripped library, as a system libc or libgomp without their -dbg packages)
only when the address lies within a symbol's size: addr2line's own guess, the nearest
symbol below, can be an exported function far away, with the library's internal
functions in between. A symbol of size 0 (hand-written assembly) covers the addresses up
to the next symbol, where no sized one covers them. Otherwise, or for an object that is
gone, a location is shown as object+0xoffset.

gfortran's main program is MAIN__ in the symbol tables; its DWARF has the name the
source gives it (DW_AT_main_subprogram), which the locations use: "program stencil",
and for its OpenMP regions "program stencil._omp_fn.0".

gfortran 12 gives a CALL statement that passes a variable to an INTENT(OUT) argument
(`call MPI_File_close(fh, ierr)` under `use mpi`, `call MPI_Init(ierr)`) no line of its
own: its code falls in a row of the line table with the line of the procedure's first
statement (the `program` or `subroutine` line), as the clobber of the argument it emits
has no location. Such a location (a Fortran file, the line of its procedure's entry, past
the entry) is mapped back to its statement (fortran_call_lines).
"""

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Location:
    object: str  # the loaded object (path)
    offset: int
    function: str = ""
    file: str = ""
    line: int = 0
    inlined_into: tuple = field(default=())  # ((function, file, line), ...) outwards

    def short(self):
        where = f"{os.path.basename(self.file)}:{self.line}" if self.file and self.line else ""
        if self.function and where:
            return f"{self.function} ({where})"
        if self.function:
            return f"{self.function} ({os.path.basename(self.object)}+{self.offset:#x})"
        return f"{os.path.basename(self.object) or '?'}+{self.offset:#x}"

    def to_json(self):
        return {
            "object": self.object,
            "offset": self.offset,
            "function": self.function,
            "file": self.file,
            "line": self.line,
            "inlined_into": [
                {"function": f, "file": fl, "line": ln} for f, fl, ln in self.inlined_into
            ],
        }


class Symbolizer:
    def __init__(self, addr2line=None):
        self.addr2line = addr2line or shutil.which("addr2line")
        self.cache = {}
        self.nm = shutil.which("nm")
        self.readelf = shutil.which("readelf")
        self._symtabs = {}
        self._programs = {}
        self._line_tables = {}
        self._sources = {}
        self.objdump = shutil.which("objdump")

    def resolve(self, obj, offsets):
        """Locations for offsets in one loaded object, in order."""
        offsets = [int(o) for o in offsets]
        todo = sorted({o for o in offsets if (obj, o) not in self.cache})
        if todo:
            for o, loc in zip(todo, self._run(obj, todo)):
                self.cache[(obj, o)] = loc
        return [self.cache[(obj, o)] for o in offsets]

    def _run(self, obj, offsets):
        plain = [Location(obj, o) for o in offsets]
        if not self.addr2line or not obj or not os.path.isfile(obj):
            return plain
        args = [self.addr2line, "-e", obj, "-f", "-C", "-i", "-a"]
        args += [f"{max(o - 1, 0):#x}" for o in offsets]
        try:
            out = subprocess.run(
                args, capture_output=True, text=True, timeout=120, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return plain
        # output: per address, "0x..." then (function, file:line) pairs, innermost first
        blocks, cur = [], None
        for line in out.splitlines():
            if line.startswith("0x") and (cur is None or len(cur) % 2 == 0):
                cur = []
                blocks.append(cur)
            elif cur is not None:
                cur.append(line)
        if len(blocks) != len(offsets):
            return self._from_symbols(obj, plain)
        result = []
        for o, b in zip(offsets, blocks):
            frames = []
            for i in range(0, len(b) - 1, 2):
                fn = b[i] if b[i] != "??" else ""
                path, _, ln = b[i + 1].rpartition(":")
                ln = ln.split(" ")[0]
                line_no = int(ln) if ln.isdigit() else 0
                path = path if path and path != "??" else ""
                if fn.split(".")[0] == "MAIN__" and path:  # its regions too
                    fn = (self._program_name(obj) or "MAIN__") + fn[len("MAIN__") :]
                frames.append((fortran_name(fn, path), path, line_no))
            if not frames or not frames[0][1]:
                # no DWARF here: addr2line named it from the nearest symbol below,
                # whatever its size; the symbol tables decide (_from_symbols)
                result.append(Location(obj, o))
                continue
            fn, path, ln = frames[0]
            result.append(Location(obj, o, fn, path, ln, tuple(frames[1:])))
        return self._fortran_call_lines(obj, self._from_symbols(obj, result))

    def _fortran_call_lines(self, obj, locations):
        """Locations that gfortran's line table puts on their procedure's first line
        (module docstring) on the line of their CALL statement instead: the CALL
        statements of the source between the line table's rows before and after the
        misplaced code; of several, the one whose callee and rank among that callee's
        calls in the code match the call instruction's."""
        todo = [
            i
            for i, L in enumerate(locations)
            if L.line and not L.inlined_into and L.file.lower().endswith(FORTRAN_SUFFIXES)
        ]
        if not todo:
            return locations
        if obj not in self._symtabs:
            self._symtabs[obj] = self._read_symbols(obj)
        starts, sizes, _ = self._symtabs[obj]
        spans = {}  # location -> its function's [start, end), past its entry
        for i in todo:
            a = max(locations[i].offset - 1, 0)
            k = int(np.searchsorted(starts, a, "right")) - 1
            if k >= 0 and starts[k] < a < starts[k] + sizes[k]:
                spans[i] = (int(starts[k]), int(starts[k] + sizes[k]))
        if not spans:
            return locations
        # the entries' lines first (one addr2line run; an entry is past no entry): the
        # object's whole line table is read only where a location is on one
        entry = dict(zip(spans, self.resolve(obj, [b + 1 for b, _ in spans.values()])))
        out = list(locations)
        for i, (start, end) in spans.items():
            L = locations[i]
            if (entry[i].file, entry[i].line) != (L.file, L.line):
                continue
            line = self._call_line(obj, L, max(L.offset - 1, 0), start, end)
            if line:
                out[i] = Location(L.object, L.offset, L.function, L.file, line, L.inlined_into)
        return out

    def _call_line(self, obj, L, a, start, end):
        """The CALL statement's line of the code at a in the function [start, end), where
        the line table gives it the function's entry line L.line; 0 when it does not, or
        when the statement is not known for sure."""
        addr, lines = self._line_table(obj)
        f = int(np.searchsorted(addr, start, "left"))
        k = int(np.searchsorted(addr, a, "right")) - 1
        if f >= len(addr) or addr[f] != start or k < f or not lines[k] == lines[f] == L.line:
            return 0
        return self._statement(obj, L, a, addr, lines, f, k, end)

    def _statement(self, obj, L, a, addr, lines, f, k, end):
        entry = int(lines[f])
        lo, hi = k, k  # the run of rows of the entry line around a
        while lo > f and lines[lo - 1] == entry:
            lo -= 1
        while hi + 1 < len(addr) and addr[hi + 1] < end and lines[hi + 1] == entry:
            hi += 1
        if hi + 1 >= len(addr) or addr[hi + 1] >= end or lines[hi + 1] <= 0:
            return 0  # no statement after it in the function: its code is the entry's
        before = int(lines[lo - 1]) if lo > f else entry
        after = int(lines[hi + 1])
        src = self._source(L.file, obj)
        if src is None or not before < after:
            return 0
        calls = [
            (n, m.group(1).lower())
            for n in range(before + 1, after)
            for m in [_CALL.match(src[n - 1] if n <= len(src) else "")]
            if m
        ]
        if len(calls) == 1:
            return calls[0][0]
        if not calls:
            return 0
        code = self._calls_in(obj, int(addr[lo]), int(addr[hi + 1]))
        if not code:
            return 0
        # the call instruction of the statement a is in: the first that ends after a
        at = next((j for j, (e, _) in enumerate(code) if e > a), len(code) - 1)
        callee = code[at][1]
        same = [n for n, name in calls if _callee_matches(callee, name)]
        mine = [e for e, c in code if c == callee]
        if same and len(same) == len(mine):
            return same[mine.index(code[at][0])] if code[at][0] in mine else 0
        user = [(e, c) for e, c in code if not c.startswith(_RUNTIME_CALLS)]
        if len(user) == len(calls) and code[at] in user:
            return calls[user.index(code[at])][0]
        return 0

    def _line_table(self, obj):
        """(addresses, lines) of obj's DWARF line table rows, by address (readelf); the
        end of a sequence is a row of line 0."""
        if obj not in self._line_tables:
            rows = []
            if self.readelf and os.path.isfile(obj):
                out = _output([self.readelf, "--debug-dump=decodedline", "-W", obj])
                for m in _LINE_ROW.finditer(out):
                    ln = m.group(1)
                    rows.append((int(m.group(2), 16), int(ln) if ln.isdigit() else 0))
            rows.sort(key=lambda r: r[0])  # stable: rows at one address keep their order
            self._line_tables[obj] = (
                np.array([r[0] for r in rows], np.int64),
                np.array([r[1] for r in rows], np.int64),
            )
        return self._line_tables[obj]

    def _source(self, path, obj):
        """The source file's lines, or None when it cannot be read or was changed after
        the object was built (its lines may no longer be the line table's)."""
        if path not in self._sources:
            try:
                if os.path.getmtime(path) > os.path.getmtime(obj):
                    raise OSError
                with open(path, errors="replace") as fh:
                    self._sources[path] = fh.read().splitlines()
            except OSError:
                self._sources[path] = None
        return self._sources[path]

    def _calls_in(self, obj, lo, hi):
        """[(end address, callee)] of the call instructions in [lo, hi) of obj (objdump)."""
        if not self.objdump:
            return []
        out = _output(
            [self.objdump, "-d", "--no-show-raw-insn", f"--start-address={lo:#x}",
             f"--stop-address={hi:#x}", obj],
            60,
        )  # fmt: skip
        insns = [(int(m.group(1), 16), m.group(2)) for m in _INSN.finditer(out)]
        ends = [b for b, _ in insns[1:]] + [hi]
        return [
            (e, _CALLEE.search(text).group(1) if _CALLEE.search(text) else "")
            for (_, text), e in zip(insns, ends)
            if _CALL_INSN.match(text)
        ]

    def _from_symbols(self, obj, locations):
        """Unnamed locations named by the symbol that contains them (symbol_at)."""
        todo = [i for i, L in enumerate(locations) if not L.function]
        if not todo:
            return locations
        if obj not in self._symtabs:
            self._symtabs[obj] = self._read_symbols(obj)
        names = symbol_at(
            self._symtabs[obj], np.array([max(locations[i].offset - 1, 0) for i in todo])
        )
        out = list(locations)
        for i, name in zip(todo, names):
            if name:
                L = out[i]
                out[i] = Location(L.object, L.offset, name, L.file, L.line, L.inlined_into)
        return out

    def _read_symbols(self, obj):
        """(starts, sizes, names) of the object's functions, by start: .symtab and
        .dynsym together (nm -S, nm -D -S), one name per start: of aliases (write,
        __write), the plain one, a sized one before one of size 0."""
        syms = {}
        for table in ([], ["-D"]):
            if not self.nm or not os.path.isfile(obj):
                break
            out = _output([self.nm, *table, "-S", "-C", "--defined-only", obj], 60)
            for line in out.splitlines():
                f = line.split(" ", 2)
                if len(f) == 3 and len(f[1]) == 1:  # no size: "start type name"
                    f = [f[0], "0", f[1], f[2]]
                else:
                    f = line.split(" ", 3)
                if len(f) != 4 or len(f[2]) != 1 or f[2] not in "TtWwi":
                    continue
                try:
                    start, size = int(f[0], 16), int(f[1], 16)
                except ValueError:
                    continue
                name = f[3].split("@")[0]
                key = (size == 0, name.startswith("_"), len(name))
                old = syms.get(start)
                if old is None or key < old[2]:
                    syms[start] = (size, name, key)
        starts = np.array(sorted(syms), np.int64)
        return (
            starts,
            np.array([syms[s][0] for s in starts.tolist()], np.int64),
            [syms[s][1] for s in starts.tolist()],
        )

    def _program_name(self, obj):
        """gfortran's main program's name in the source ("program NAME"), from the
        first DIE with DW_AT_main_subprogram (only top-level DIEs are read)."""
        if obj in self._programs:
            return self._programs[obj]
        name = None
        if self.readelf:
            try:
                proc = subprocess.Popen(
                    [self.readelf, "--debug-dump=info", "--dwarf-depth=2", obj],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            except OSError:
                proc = None
            if proc:
                last = None
                for line in proc.stdout:
                    if "Abbrev Number" in line:
                        last = None  # a new DIE
                    elif "DW_AT_name" in line:
                        last = line.rsplit(":", 1)[-1].strip()
                    elif "DW_AT_main_subprogram" in line and last:
                        name = f"program {last}"
                        break
                proc.kill()
                proc.wait()
        self._programs[obj] = name
        return name


def _output(args, timeout=120):
    """A binutils tool's standard output; "" when it cannot run."""
    try:
        return subprocess.run(
            args, capture_output=True, text=True, timeout=timeout, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def symbol_at(table, addrs):
    """The name of the function containing each address (numpy array), "" where none
    does: a sized symbol contains [start, start + size); one of size 0, the addresses up
    to the next symbol's start (and not past the end of a sized symbol it lies in) where
    no sized symbol contains them. Never the nearest symbol below across the gap after
    its end."""
    starts, sizes, names = table
    out = [""] * len(addrs)
    if not len(starts) or not len(addrs):
        return out
    i = np.searchsorted(starts, addrs, side="right") - 1
    ok = i >= 0
    j = np.where(ok, i, 0)
    sized = ok & (sizes[j] > 0) & (addrs < starts[j] + sizes[j])
    for k in np.flatnonzero(sized).tolist():
        out[k] = names[int(j[k])]
    nxt = np.append(starts[1:], np.iinfo(np.int64).max)[j]
    for k in np.flatnonzero(ok & ~sized).tolist():
        # a sized symbol starting lower may contain it past a size-0 one (a label
        # inside a function); failing that, the size-0 symbol just below, if any
        a = addrs[k]
        cover = np.flatnonzero((starts <= a) & (a < starts + sizes))
        if len(cover):
            out[k] = names[int(cover[-1])]
        elif sizes[j[k]] == 0 and a < nxt[k]:
            # a label inside a sized function ends with it
            s0 = starts[j[k]]
            outer = np.flatnonzero((starts <= s0) & (s0 < starts + sizes))
            if not len(outer) or a < starts[outer[-1]] + sizes[outer[-1]]:
                out[k] = names[int(j[k])]
    return out


FORTRAN_SUFFIXES = (".f", ".for", ".ftn", ".f77", ".f90", ".f95", ".f03", ".f08")
# a CALL statement of free or fixed form, after a label or a logical IF
_CALL = re.compile(r"^\s*(?:\d+\s+)?(?:if\s*\(.*\)\s*)?call\s+(\w+)", re.IGNORECASE)
_LINE_ROW = re.compile(r"^\S+\s+(\d+|-)\s+(0x[0-9a-f]+)\b", re.MULTILINE)
_INSN = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$", re.MULTILINE)
_CALL_INSN = re.compile(r"(call|callq|bl|blr)\b")
_CALLEE = re.compile(r"<([^>+@]+)")
# calls the compiler makes on its own (gfortran's run time, memory for temporaries)
_RUNTIME_CALLS = ("_gfortran_", "malloc", "free", "memcpy", "memmove", "memset", "__stack_chk")


def _callee_matches(symbol, name):
    """A callee's symbol is the procedure a CALL statement names: gfortran's name_ or
    __module_MOD_name, and the specific procedures of the MPI bindings' interfaces
    (name_f08_, name_f08ts_)."""
    sym = symbol.lower()
    m = _GFORTRAN_MODULE.match(symbol)
    if m:
        sym = m.group(2).lower()
    for suffix in ("_f08ts_", "_f08_", "__", "_"):
        if sym.endswith(suffix):
            sym = sym[: -len(suffix)]
            break
    return sym == name


_GFORTRAN_MODULE = re.compile(r"^__(\w+?)_MOD_(\w+)$")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9_]*[a-z0-9]_$")
_OUTLINED_SUFFIX = re.compile(r"\._omp_fn\.\d+$")


def fortran_name(fn, path):
    """A Fortran procedure's name as written in its source, for code of a Fortran source
    file (path): gfortran's module procedures __mod_MOD_proc become mod::proc, external
    procedures lose the trailing underscore gfortran appends (solve_ -> solve). The main
    program stays MAIN__ (Symbolizer names it); an OpenMP region outlined from a
    procedure keeps its suffix (__m_MOD_p._omp_fn.0 -> m::p._omp_fn.0); names in other
    languages' files are returned as given."""
    if not fn or not path.lower().endswith(FORTRAN_SUFFIXES):
        return fn
    m = _OUTLINED_SUFFIX.search(fn)
    if m and m.start():
        return fortran_name(fn[: m.start()], path) + m.group(0)
    m = _GFORTRAN_MODULE.match(fn)
    if m:
        return f"{m.group(1)}::{m.group(2)}"
    if _EXTERNAL.match(fn):
        return fn[:-1]
    return fn
