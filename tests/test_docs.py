"""The user guides' examples run as written."""

import doctest
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDES = sorted(p for p in (ROOT / "docs").glob("*.md") if ">>>" in p.read_text())


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_guide_examples(guide):
    result = doctest.testfile(str(guide), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
