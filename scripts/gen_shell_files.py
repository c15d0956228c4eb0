"""Writes the man page and the bash and zsh completion scripts at build (CMakeLists.txt),
as `perfweave manpage` and `perfweave completion` print them: from the source tree's
parsers with the options table generated into the build folder, so that installs put
them under share/ without running perfweave.

usage: gen_shell_files.py SOURCE_PYTHON_DIR GENERATED_DIR OUT_DIR"""

import os
import sys
from pathlib import Path


def main(python_dir, generated, out):
    # the help's defaults are options.json's, not the PERFWEAVE_ variables of the build
    for name in [n for n in os.environ if n.startswith("PERFWEAVE_")]:
        del os.environ[name]
    sys.path.insert(0, python_dir)
    import perfweave

    # the generated modules (_options.py, ...) are the package's once installed
    perfweave.__path__.append(generated)
    from perfweave.cli import shell

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "perfweave.1").write_text(shell.manpage())
    (out / "perfweave").write_text(shell.bash())
    (out / "_perfweave").write_text(shell.zsh())


if __name__ == "__main__":
    main(*sys.argv[1:])
