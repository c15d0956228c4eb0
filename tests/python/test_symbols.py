"""Naming addresses by symbols (perfweave.symbols): an address is named by a symbol only
when it lies within the symbol's size. A stripped shared library (strip --strip-all:
only its dynamic symbols are left) with an exported function and, after it, a static
function that no table names: addr2line names the static one after the exported one
(its nearest symbol below); perfweave must show libx.so+0xOFFSET there, and the
exported function's own addresses by its name."""

import shutil
import subprocess

import numpy as np

from perfweave.symbols import Symbolizer, symbol_at

LIB = r"""
volatile double sink;

/* exported; its body is short, the static function below is far past its end */
double libx_visible(int n)
{
    for (int i = 0; i < n; i++)
        sink += i;
    return sink;
}

__attribute__((noinline, used)) static double hidden(int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += (double)i * i / (i + 1.0) + sink;
    for (int i = 0; i < n; i++)
        s -= (double)i / (i + 2.0) - sink;
    return s;
}

double libx_other(int n) { return hidden(n) + 1; }
"""


def _symbols(path, dynamic):
    """{name: (start, size)} of a module's function symbols (nm -S)."""
    out = subprocess.run(
        ["nm", *(["-D"] if dynamic else []), "-S", "--defined-only", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    syms = {}
    for ln in out.splitlines():
        f = ln.split()
        if len(f) == 4 and f[2] in "Tt":
            syms[f[3].split("@")[0]] = (int(f[0], 16), int(f[1], 16))
    return syms


def test_stripped_library_names_only_within_symbol_size(tmp_path):
    src = tmp_path / "libx.c"
    src.write_text(LIB)
    lib = tmp_path / "libx.so"
    subprocess.run(["gcc", "-O1", "-g", "-fPIC", "-shared", "-o", str(lib), str(src)], check=True)
    full = _symbols(lib, dynamic=False)  # before stripping: where each lies
    start, size = full["hidden"]
    vis_start, vis_size = full["libx_visible"]
    subprocess.run(["strip", "--strip-all", str(lib)], check=True)
    dyn = _symbols(lib, dynamic=True)
    assert "hidden" not in dyn and dyn["libx_visible"] == (vis_start, vis_size)
    # addr2line itself names the static function after an exported one below it
    below = max((s, n) for n, (s, _) in dyn.items() if s <= start)[1]
    a2l = subprocess.run(
        [shutil.which("addr2line"), "-f", "-e", str(lib), hex(start + 4)],
        capture_output=True,
        text=True,
    ).stdout.split()[0]
    assert a2l == below, (a2l, below)
    # offsets are return addresses: the symboliser looks up offset - 1
    inside_hidden = [start + 1, start + size // 2, start + size]
    inside_visible = [vis_start + 1, vis_start + vis_size // 2, vis_start + vis_size]
    locs = Symbolizer().resolve(str(lib), inside_hidden + inside_visible)
    for L, o in zip(locs[:3], inside_hidden):
        assert L.function == "" and L.short() == f"libx.so+{o:#x}", L
    for L in locs[3:]:
        assert L.function == "libx_visible", L


def test_symbol_sizes_and_size_zero_symbols():
    # a: [0x100, 0x140); b: size 0 at 0x200 (assembly); c: [0x300, 0x310); a label d of
    # size 0 inside c at 0x304
    starts = np.array([0x100, 0x200, 0x300, 0x304])
    table = (starts, np.array([0x40, 0, 0x10, 0]), ["a", "b", "c", "d"])
    addrs = np.array([0x0FF, 0x100, 0x13F, 0x140, 0x1FF, 0x200, 0x2FF, 0x305, 0x30F, 0x310, 0x400])
    assert symbol_at(table, addrs) == [
        "",  # below every symbol
        "a",
        "a",  # within a's size
        "",
        "",  # the gap after a: never a
        "b",
        "b",  # size 0: up to the next symbol
        "c",
        "c",  # within c, past the label d: c (sized) is the better name
        "",
        "",
    ]  # past c's end: not the label d, which lies inside c


# gfortran 12 gives a CALL that passes a variable to an INTENT(OUT) argument the line of
# its procedure's first statement (the clobber of the argument it emits has no location);
# consecutive ones share one row of the line table. "! @NAME" marks each statement.
FORTRAN = """\
module m
  interface
    subroutine ext(x, y)
      integer, intent(inout) :: x
      integer, intent(out) :: y
    end subroutine
    subroutine ext2(x)
      integer, intent(out) :: x
    end subroutine
  end interface
contains
  subroutine work()
    integer :: a, b
    a = 1
    call ext(a, b) ! @w1
    b = b + 1
    call ext2(a) ! @w2
  end subroutine
end module
program calls
  use m
  integer :: c, d
  c = 1
  call ext(c, d) ! @p1
  call ext(c, d) ! @p2

  call ext2(c) ! @p3
  if (c > 0) call ext2(d) ! @p4
  print *, c, d ! @print
  call work() ! @p5
end program
subroutine ext(x, y)
  integer, intent(inout) :: x
  integer, intent(out) :: y
  y = x
end subroutine
subroutine ext2(x)
  integer, intent(out) :: x
  x = 1
end subroutine
"""


def test_fortran_calls_that_gfortran_puts_on_the_procedures_first_line(tmp_path):
    """The return address of each call of the program and of the module procedure names
    the CALL statement's own line, as the source marks it, whatever line table row it is
    in; the runtime library's calls of the PRINT keep theirs."""
    src = tmp_path / "calls.f90"
    src.write_text(FORTRAN)
    exe = tmp_path / "calls"
    subprocess.run(["gfortran", "-g", "-O0", "-o", str(exe), str(src)], check=True, cwd=tmp_path)
    at = {ln.split("! @")[1]: n for n, ln in enumerate(FORTRAN.splitlines(), 1) if "! @" in ln}
    dis = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(exe)], capture_output=True, text=True
    ).stdout.splitlines()
    calls, fn = [], None  # (return address, callee)
    for i, ln in enumerate(dis):
        if ln.endswith(">:"):
            fn = ln.split("<")[1][:-2]
        f = ln.split("\t")
        if fn in ("MAIN__", "__m_MOD_work") and len(f) > 1 and f[1].startswith("call"):
            ra = int(dis[i + 1].split(":")[0], 16)
            calls.append((ra, f[1].split("<")[1].split("@")[0].rstrip(">")))
    locs = Symbolizer().resolve(str(exe), [ra for ra, _ in calls])
    got = [(c, L.line) for (_, c), L in zip(calls, locs) if not c.startswith("_gfortran")]
    names = ["w1", "w2", "p1", "p2", "p3", "p4", "p5"]
    callees = ["ext_", "ext2_", "ext_", "ext_", "ext2_", "ext2_", "__m_MOD_work"]
    assert sorted(got, key=lambda x: x[1]) == [(c, at[n]) for c, n in zip(callees, names)]
    assert {L.line for (_, c), L in zip(calls, locs) if c.startswith("_gfortran")} == {at["print"]}
    assert {L.function for L in locs} == {"program calls", "m::work"}
