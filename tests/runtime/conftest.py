"""Fixtures of the runtime tests; the helpers live in harness.py (imported by name
from the test modules, which a second conftest module could shadow)."""

from harness import build, build_dir, mpi, run_pw  # noqa: F401  (pytest fixtures)
