#!/usr/bin/env python3
"""Generate the io module's wrappers from io.spec.

    gen_io.py SPEC OUTDIR

writes OUTDIR/pw_io_fn.h (function ids, names, layers), OUTDIR/_io.py (the names of I/O
functions for the samples' classification, installed as perfweave/_io.py: every function
the spec lists, and those of its section 'classify') and OUTDIR/pw_io_wrappers.c (one
wrapper per function the spec lists without [later], in the one shape of
runtime/core/wrap.h: the real function looked up once, called exactly once whatever
perfweave's state, timed and recorded only when the module is on and the thread is not
already recording; the return value and errno are the real call's). What a call means
is decided by its OP, in one recording function of runtime/modules/io.c per OP.
"""

import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gen"))
import spec_tools  # noqa: E402
from spec_tools import SpecError, entries, parse_decl, py_table, sections, split_args  # noqa: E402

LAYERS = ("posix", "stdio")
OPS = "open fopen fdopen close fclose read write seek stat sync meta dup fcntl mmap munmap"
OPS = OPS.split()
LINE_RE = re.compile(r"^(\w+)\s+(\w+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.+?\))\s*(\[(.*)\])?\s*$")
PROTO_RE = re.compile(r"^(.*?)\b(\w+)\s*\((.*)\)$")
# What each OP's time is charged to (format/io.h PW_IO_OPS).
TIME_OP = {
    "open": "OPEN",
    "fopen": "OPEN",
    "fdopen": "OPEN",
    "close": "CLOSE",
    "fclose": "CLOSE",
    "read": "READ",
    "write": "WRITE",
    "seek": "SEEK",
    "stat": "STAT",
    "sync": "SYNC",
    "meta": "META",
    "dup": "META",
    "fcntl": "META",
    "mmap": "MMAP",
    "munmap": "MMAP",
}
# The value a wrapper returns when the C library lacks its function (errno ENOSYS).
FAILED = {"void *": "MAP_FAILED", "size_t": "0"}


@dataclass
class Arg:
    ctype: str
    name: str


@dataclass
class Fn:
    layer: str
    op: str
    file: str
    bytes: str
    offset: str
    ret: str
    name: str
    args: list
    variadic: bool
    flags: dict
    line: int

    @property
    def later(self):
        return "later" in self.flags


def parse_args(text, lineno):
    out, variadic = [], False
    for part in split_args(text):
        if part == "...":
            variadic = True
            continue
        ctype, name, array, _ = parse_decl(part, (), f"line {lineno}")
        out.append(Arg(ctype + " *" if array else ctype, name))
    return out, variadic


def parse_flags(text):
    flags = {}
    if not text:
        return flags
    m = re.match(r"^later(:.*)?$", text.strip())
    if m:
        flags["later"] = (m.group(1) or ":").lstrip(": ")
        return flags
    for word in re.findall(r"va=\w+\([^)]*\)|\w+", text):
        key, _, val = word.partition("=")
        flags[key] = val
    return flags


def parse(text):
    fns, seen = [], set()
    for lineno, line in entries(sections(text, "section")[0]):
        m = LINE_RE.match(line)
        if not m:
            raise SpecError(f"line {lineno}: expected 'LAYER OP FILE BYTES OFFSET PROTOTYPE'")
        layer, op, file, nbytes, offset, proto, _, flags = m.groups()
        if layer not in LAYERS:
            raise SpecError(f"line {lineno}: unknown layer '{layer}'")
        if op not in OPS:
            raise SpecError(f"line {lineno}: unknown op '{op}'")
        pm = PROTO_RE.match(proto)
        if not pm:
            raise SpecError(f"line {lineno}: cannot parse the prototype")
        ret = " ".join(pm.group(1).split()).replace(" *", "*").replace("*", " *").strip()
        name = pm.group(2)
        if name in seen:
            raise SpecError(f"line {lineno}: {name} listed twice")
        seen.add(name)
        args, variadic = parse_args(pm.group(3), lineno)
        flags = parse_flags(flags)
        fn = Fn(layer, op, file, nbytes, offset, ret, name, args, variadic, flags, lineno)
        if variadic and not fn.later and not ({"va", "mode", "arg"} & set(fn.flags)):
            raise SpecError(f"line {lineno}: {name} is variadic: say how ([va=], [mode], [arg])")
        if not fn.later:
            file_kind(fn)  # checked
        fns.append(fn)
    if not fns:
        raise SpecError("the spec lists no function")
    return fns


def file_kind(fn):
    """(kind, expression) of the FILE column: path, fd, fp or addr; (None, None) for '-'."""
    if fn.file == "-":
        return None, None
    if "=" in fn.file:
        kind, expr = fn.file.split("=", 1)
        if kind not in ("path", "fd", "fp", "addr"):
            raise SpecError(f"line {fn.line}: unknown file kind '{kind}'")
        return kind, expr
    for a in fn.args:
        if a.name == fn.file:
            base = a.ctype.replace("const", "").strip()
            kind = {"char *": "path", "int": "fd", "FILE *": "fp", "void *": "addr"}.get(base)
            if kind is None:
                raise SpecError(f"line {fn.line}: {fn.name}: '{a.ctype}' names no file")
            return kind, a.name
    raise SpecError(f"line {fn.line}: {fn.name} has no argument '{fn.file}'")


def expr(text, default="0"):
    return default if text == "-" else f"(int64_t)({text})"


def call_args(fn):
    names = [a.name for a in fn.args]
    if "mode" in fn.flags:
        names.append("mode")
    if "arg" in fn.flags:
        names.append("arg")
    return ", ".join(names)


def record_lines(fn):
    """(statements before the real call, the recording statement after it)."""
    kind, f = file_kind(fn)
    nbytes, off = expr(fn.bytes), expr(fn.offset, "-1")
    op = fn.op
    if op == "open":
        # appending (no offsets) from the flags the program passed: no fcntl(F_GETFL)
        names = {a.name for a in fn.args}
        append = "(flags & O_APPEND) != 0" if "flags" in names else "0"
        return [], f"pw_io_open(&c, {f}, rc, {append});"
    if op == "fopen":
        return [], f"pw_io_fopen(&c, {f}, rc, mode);"
    if op == "fdopen":
        return [], f"pw_io_fdopen(&c, {f}, rc);"
    if op == "close":
        return [f"    int pw_file = pw_io_fd_file({f});"], f"pw_io_close(&c, {f}, pw_file, rc);"
    if op == "fclose":
        return [
            f"    int pw_fd = pw_io_stream_fd({f});",
            "    int pw_file = pw_io_fd_file(pw_fd);",
        ], "pw_io_close(&c, pw_fd, pw_file, rc);"
    if op == "dup":
        return [], f"pw_io_dup(&c, {f}, rc);"
    if op == "fcntl":
        return [], f"pw_io_fcntl(&c, {f}, cmd, rc);"
    if op == "mmap":
        return [], f"pw_io_mmap(&c, {f}, rc, len, {off});"
    if op == "munmap":
        return [f"    int64_t pw_est = pw_io_unmap_begin({f}, len);"], "pw_io_munmap(&c, pw_est);"
    if op in ("read", "write"):
        if kind == "fp":
            return [], f"pw_io_stream_rw(&c, {f}, {nbytes});"
        return [], f"pw_io_rw(&c, {f}, {nbytes}, {off});"
    if op == "seek":
        if kind == "fp":
            return [], f"pw_io_stream_seek(&c, {f});"
        return [], f"pw_io_seek(&c, {f}, (int64_t)rc);"
    if kind == "path":
        return [], f"pw_io_path_op(&c, {f});"
    if kind == "fp":
        return [], f"pw_io_fd_op(&c, pw_io_stream_fd({f}));"
    return [], f"pw_io_fd_op(&c, {f});"


def tracked(fn):
    """The C condition under which a call is recorded, tested before its clock starts
    (io.h: files the program opened, never sockets, pipes or anonymous memory, nor the
    shared objects an MPI library loads inside its calls); None: always."""
    kind, f = file_kind(fn)
    if kind == "path":
        return f"pw_io_path_file({f})"
    if kind == "fd":
        cond = f"(pw_io_fd_file({f}) >= 0)"
        if fn.op == "dup" and any(a.name == "fd2" for a in fn.args):
            # dup2 onto a file's descriptor takes it from the file
            cond = f"({cond} || pw_io_fd_file(fd2) >= 0)"
        return cond
    if kind == "fp":
        return f"(pw_io_stream_file({f}) >= 0)"
    if kind == "addr":
        return f"pw_io_maybe_mapped({f})"
    return None


def wrapper(fn, index):
    params = ", ".join(f"{a.ctype}{'' if a.ctype.endswith('*') else ' '}{a.name}" for a in fn.args)
    if fn.variadic:
        params += ", ..."
    void = fn.ret == "void"
    fail = FAILED.get(fn.ret, "NULL" if fn.ret.endswith("*") else "-1")
    # the symbol by an assembler name: a header may redirect the C name (stdio.h's
    # vfscanf to __isoc99_vfscanf) or make it a macro
    sep = "" if fn.ret.endswith("*") else " "
    decl = f"{fn.ret}{sep}pw_io_w_{fn.name}({params or 'void'})"
    lines = [f"/* {fn.layer} {fn.op}: spec line {fn.line} */"]
    lines += [f'PW_EXPORT {decl} __asm__("{fn.name}");', decl, "{"]
    va = fn.flags.get("va")
    if va:
        vname = va.split("(")[0]
        vargs = va[va.index("(") + 1 : -1]
        lines += [
            f"    static __typeof__({vname}) *real;",
            "    static int looked;",
            "    if (PW_UNLIKELY(!looked))",
            f'        *(void **)&real = pw_io_real("{vname}", &looked);',
            "    va_list ap;",
            f"    va_start(ap, {fn.args[-1].name});",
        ]
        call = f"real({vargs})"
        end = ["    va_end(ap);"]
    else:
        lines += [
            f"    static __typeof__({fn.name}) *real;",
            "    static int looked;",
            "    if (PW_UNLIKELY(!looked))",
            f'        *(void **)&real = pw_io_real("{fn.name}", &looked);',
        ]
        call = f"real({call_args(fn)})"
        end = []
        if "mode" in fn.flags:
            flags = "flags"
            lines += [
                "    mode_t mode = 0;",
                f"    if (pw_io_needs_mode({flags})) {{",
                "        va_list ap;",
                f"        va_start(ap, {flags});",
                "        mode = (mode_t)va_arg(ap, int);",
                "        va_end(ap);",
                "    }",
            ]
        if "arg" in fn.flags:
            lines += [
                "    va_list ap;",
                "    va_start(ap, cmd);",
                "    void *arg = va_arg(ap, void *);",
                "    va_end(ap);",
            ]
    ret_rc = "" if void else "rc = "
    cond = tracked(fn)
    skip = (
        "    if (PW_LIKELY(!pw_io_on) || " + (f"!{cond} || " if cond else "") + "!pw_io_enter()) {"
    )
    lines += ["    if (PW_UNLIKELY(real == NULL)) {", "        errno = ENOSYS;"]
    lines += ["    " + e for e in end]
    lines += ["        return;" if void else f"        return {fail};", "    }"]
    if void:
        lines += (
            [skip, f"        {call};"] + ["    " + e for e in end] + ["        return;", "    }"]
        )
    else:
        lines += (
            [f"    {fn.ret}{'' if fn.ret.endswith('*') else ' '}rc;", skip, f"        rc = {call};"]
            + ["    " + e for e in end]
            + ["        return rc;", "    }"]
        )
    before, rec = record_lines(fn)
    if void:
        rec = rec.replace(", rc)", ", 0)")
    lines += [
        "    pw_io_call c;",
        f"    c.fn = {index};",
        f"    c.layer = PW_IO_{fn.layer.upper()};",
        f"    c.op = PW_IO_{TIME_OP[fn.op]};",
        "    c.ra = (uintptr_t)__builtin_return_address(0);",
    ]
    lines += before
    lines += ["    pw_io_begin(&c);", f"    {ret_rc}{call};", "    c.t1 = pw_ticks();"]
    lines += end
    lines += [f"    PW_KEEP_ERRNO({rec.rstrip(';')});", "    pw_io_leave(&c);"]
    lines += ["    return;" if void else "    return rc;", "}"]
    return "\n".join(lines)


def header(fns):
    live = [f for f in fns if not f.later]
    out = [
        "/* Generated by runtime/io/gen_io.py from io.spec: do not edit. */",
        "#ifndef PW_IO_FN_H",
        "#define PW_IO_FN_H",
        "",
        f"#define PW_IO_NFN {len(live)}",
        "extern const char *const pw_io_fn_names[PW_IO_NFN];",
        "extern const signed char pw_io_fn_layers[PW_IO_NFN];",
        "",
        "#endif",
        "",
    ]
    return "\n".join(out)


PRELUDE = """/* Generated by runtime/io/gen_io.py from io.spec: do not edit. */
#undef _FORTIFY_SOURCE
#define _GNU_SOURCE
#define _LARGEFILE64_SOURCE
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "modules/io.h"
#include "pw_io_fn.h"

/* Prototypes the C library's headers give only under _FORTIFY_SOURCE, or no longer. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);
size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *fp);
size_t __fread_unlocked_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *fp);
int __fprintf_chk(FILE *fp, int flag, const char *fmt, ...);
int __vfprintf_chk(FILE *fp, int flag, const char *fmt, va_list ap);
int __printf_chk(int flag, const char *fmt, ...);
int __vprintf_chk(int flag, const char *fmt, va_list ap);
int __isoc99_fscanf(FILE *fp, const char *fmt, ...);
int __isoc99_vfscanf(FILE *fp, const char *fmt, va_list ap);
char *__fgets_chk(char *s, size_t size, int n, FILE *fp);
int _IO_putc(int ch, FILE *fp);
int _IO_getc(FILE *fp);
ssize_t __getdelim(char **line, size_t *n, int delim, FILE *fp);
int fcntl64(int fd, int cmd, ...);
"""


def source(fns):
    live = [f for f in fns if not f.later]
    out = [PRELUDE]
    out.append("const char *const pw_io_fn_names[PW_IO_NFN] = {")
    out += [f'    "{f.name}",' for f in live]
    out += ["};", "const signed char pw_io_fn_layers[PW_IO_NFN] = {"]
    out += [f"    PW_IO_{f.layer.upper()}," for f in live]
    out += ["};", ""]
    for i, f in enumerate(live):
        out += [wrapper(f, i), ""]
    later = [f for f in fns if f.later]
    if later:
        out.append("/* Listed in io.spec, not yet wrapped:")
        out += [f" *   {f.name}: {f.flags['later']}" for f in later]
        out.append(" */")
    return "\n".join(out) + "\n"


def io_names(fns, text):
    """The names the samples' classification takes for I/O: the spec's functions and
    those of its section 'classify' (glibc's internals and calls not wrapped)."""
    names = [f.name for f in fns]
    for lineno, line in sections(text, "section")[1].get("classify", []):
        for name in line.split():
            if name in names:
                raise SpecError(f"line {lineno}: {name} listed twice")
            names.append(name)
    return py_table(
        "runtime/io/gen_io.py from io.spec",
        "The names of I/O functions (analysis/samples/names.py's classification).",
        {"NAMES": frozenset(names)},
    )


def generate(text):
    fns = parse(text)
    return {
        "pw_io_fn.h": header(fns),
        "pw_io_wrappers.c": source(fns),
        "_io.py": io_names(fns, text),
    }


def main(argv):
    spec_tools.main(argv, __doc__, generate)


if __name__ == "__main__":
    main(sys.argv)
