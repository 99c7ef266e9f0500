"""``python -m loom``: the same as the ``loom`` command."""

from loom.cli import main

raise SystemExit(main())
