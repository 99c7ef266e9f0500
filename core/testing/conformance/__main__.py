"""``python -m loom.testing.conformance [pytest options]``: run the suite with its plugin loaded."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run pytest on the suite; ``argv`` (default: the command line) adds options such as ``--loom-kind``."""
    import pytest

    args = list(sys.argv[1:] if argv is None else argv)
    return int(pytest.main(["-p", "loom.testing.conformance.plugin", "--pyargs", "loom.testing.conformance", *args]))


if __name__ == "__main__":
    sys.exit(main())
