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
        return self._from_symbols(obj, result)

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
            try:
                out = subprocess.run(
                    [self.nm, *table, "-S", "-C", "--defined-only", obj],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                ).stdout
            except (OSError, subprocess.SubprocessError):
                out = ""
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
