"""wrap.h's bootstrap arena (runtime/core/wrap.c): what an allocator wrapper hands out
while dlsym looks up its real function. Blocks are 16-byte aligned, zeroed, never
overlap, are recognised as the arena's (and nothing else is), and a request the arena
cannot hold gets NULL, as from a full heap. Run in a child process: libperfweave.so is
loaded there with ctypes (inactive: no experiment), never into pytest itself."""

import subprocess
import sys
from importlib import resources
from pathlib import Path

CORE = Path(str(resources.files("perfweave").joinpath("lib"))) / "libperfweave.so"

CHILD = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.pw_wrap_bootstrap_alloc.restype = ctypes.c_void_p
lib.pw_wrap_bootstrap_alloc.argtypes = [ctypes.c_size_t]
lib.pw_wrap_bootstrap_owns.argtypes = [ctypes.c_void_p]
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
blocks = [(lib.pw_wrap_bootstrap_alloc(n), n) for n in (1, 24, 100, 4096)]
for p, n in blocks:
    assert p and p % 16 == 0, (p, n)
    assert ctypes.string_at(p, n) == bytes(n)
    assert lib.pw_wrap_bootstrap_owns(p) == 1
ends = sorted((p, p + n) for p, n in blocks)
assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:])), ends
assert lib.pw_wrap_bootstrap_owns(libc.malloc(16)) == 0
assert lib.pw_wrap_bootstrap_alloc(1 << 20) is None      # more than the arena
assert lib.pw_wrap_bootstrap_alloc(2**64 - 8) is None    # rounding up would wrap
print("ok")
"""


def test_bootstrap_arena_blocks():
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(CORE)], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
