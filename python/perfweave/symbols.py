"""Post-mortem symbolisation of (module, offset) code addresses.

Offsets are return addresses relative to the module's load base (as in the
profile files); the call instruction is the byte before, so offset - 1 is looked
up. addr2line (GNU binutils) reads DWARF for function, file:line and inlined
frames, falls back to the symbol table for code without debug information, and
demangles C++ (Fortran names: fortran_name). Without it, or for a module that is gone, a location is shown as
module+0xoffset.
"""
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
            return plain
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
        return result


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
