"""Post-mortem symbolisation of (module, offset) code addresses.

Offsets are return addresses relative to the module's load base (as in the
profile files); the call instruction is the byte before, so offset - 1 is looked
up. addr2line (GNU binutils) reads DWARF for function, file:line and inlined
frames, falls back to the symbol table for code without debug information, and
demangles C++ (Fortran names: fortran_name). A stripped library without separate debug symbols (a system libc
without its -dbg package) gives addr2line nothing: its exported functions are then
named from the dynamic symbol table (nm -D), an offset counting only when it lies within
a symbol's size (no guess for the internal functions between them). Without any of it,
or for a module that is gone, a location is shown as module+0xoffset.
"""
import bisect
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Location:
    module: str
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
            return f"{self.function} ({os.path.basename(self.module)}+{self.offset:#x})"
        return f"{os.path.basename(self.module) or '?'}+{self.offset:#x}"

    def to_json(self):
        return {"module": self.module, "offset": self.offset, "function": self.function,
                "file": self.file, "line": self.line,
                "inlined_into": [{"function": f, "file": fl, "line": ln}
                                 for f, fl, ln in self.inlined_into]}


class Symbolizer:
    def __init__(self, addr2line=None):
        self.addr2line = addr2line or shutil.which("addr2line")
        self.cache = {}
        self.nm = shutil.which("nm")
        self._dynsyms = {}

    def resolve(self, module, offsets):
        """Locations for offsets in one module, in order."""
        offsets = [int(o) for o in offsets]
        todo = sorted({o for o in offsets if (module, o) not in self.cache})
        if todo:
            for o, loc in zip(todo, self._run(module, todo)):
                self.cache[(module, o)] = loc
        return [self.cache[(module, o)] for o in offsets]

    def _run(self, module, offsets):
        plain = [Location(module, o) for o in offsets]
        if not self.addr2line or not module or not os.path.isfile(module):
            return plain
        args = [self.addr2line, "-e", module, "-f", "-C", "-i", "-a"]
        args += [f"{max(o - 1, 0):#x}" for o in offsets]
        try:
            out = subprocess.run(args, capture_output=True, text=True, timeout=120,
                                 check=False).stdout
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
            return self._dynamic(module, plain)
        result = []
        for o, b in zip(offsets, blocks):
            frames = []
            for i in range(0, len(b) - 1, 2):
                fn = b[i] if b[i] != "??" else ""
                path, _, ln = b[i + 1].rpartition(":")
                ln = ln.split(" ")[0]
                line_no = int(ln) if ln.isdigit() else 0
                path = path if path and path != "??" else ""
                frames.append((fortran_name(fn, path), path, line_no))
            if not frames:
                result.append(Location(module, o))
                continue
            fn, path, ln = frames[0]
            result.append(Location(module, o, fn, path, ln, tuple(frames[1:])))
        return self._dynamic(module, result)

    def _dynamic(self, module, locations):
        """Unnamed locations named from the module's dynamic symbols (nm -D -S)."""
        if all(L.function for L in locations):
            return locations
        if module not in self._dynsyms:
            self._dynsyms[module] = self._read_dynsyms(module)
        starts, ends, names = self._dynsyms[module]
        out = []
        for L in locations:
            i = bisect.bisect_right(starts, max(L.offset - 1, 0)) - 1
            if not L.function and i >= 0 and L.offset - 1 < ends[i]:
                L = Location(L.module, L.offset, names[i], L.file, L.line, L.inlined_into)
            out.append(L)
        return out

    def _read_dynsyms(self, module):
        syms = {}
        if self.nm:
            try:
                out = subprocess.run([self.nm, "-D", "-S", "--defined-only", module],
                                     capture_output=True, text=True, timeout=60,
                                     check=False).stdout
            except (OSError, subprocess.SubprocessError):
                out = ""
            for line in out.splitlines():
                f = line.split()
                if len(f) == 4 and f[2] in "TtWwi":
                    try:
                        start, size = int(f[0], 16), int(f[1], 16)
                    except ValueError:
                        continue
                    name = f[3].split("@")[0]
                    # of aliases (write, __write), the plain name
                    old = syms.get(start)
                    if size and (old is None or (name.startswith("_"), len(name)) <
                                 (old[1].startswith("_"), len(old[1]))):
                        syms[start] = (size, name)
        starts = sorted(syms)
        return starts, [s + syms[s][0] for s in starts], [syms[s][1] for s in starts]


FORTRAN_SUFFIXES = (".f", ".for", ".ftn", ".f77", ".f90", ".f95", ".f03", ".f08")
_GFORTRAN_MODULE = re.compile(r"^__(\w+?)_MOD_(\w+)$")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9_]*[a-z0-9]_$")


def fortran_name(fn, path):
    """A Fortran procedure's name as written in its source, for code of a Fortran source
    file (path): gfortran's module procedures __mod_MOD_proc become mod::proc, external
    procedures lose the trailing underscore gfortran appends (solve_ -> solve). The main
    program stays MAIN__; names in other languages' files are returned as given."""
    if not fn or not path.lower().endswith(FORTRAN_SUFFIXES):
        return fn
    m = _GFORTRAN_MODULE.match(fn)
    if m:
        return f"{m.group(1)}::{m.group(2)}"
    if _EXTERNAL.match(fn):
        return fn[:-1]
    return fn
