import sys

from perfweave.cli import main

sys.exit(main())
