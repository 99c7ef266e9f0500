"""Small helpers of classic TVM's ``tvm.contrib.util``: a temporary folder for build artifacts.

>>> from loom.contrib import util
>>> temp = util.tempdir()
>>> open(temp.relpath("a.txt"), "w").close()
>>> temp.listdir()
['a.txt']
>>> temp.remove()
"""

from __future__ import annotations

import os
import shutil
import tempfile

__all__ = ["TempDirectory", "tempdir"]


class TempDirectory:
    """A folder removed when the object is collected (or by :meth:`remove`)."""

    def __init__(self, custom_path: str | None = None) -> None:
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir, self._owned = custom_path, False
        else:
            self.temp_dir, self._owned = tempfile.mkdtemp(prefix="loom_"), True

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside the folder."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        """The names in the folder, sorted."""
        return sorted(os.listdir(self.temp_dir))

    def remove(self) -> None:
        """Delete the folder now (only one this object created)."""
        if self._owned and self.temp_dir and os.path.isdir(self.temp_dir):
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        self.temp_dir = ""

    def __del__(self) -> None:
        try:
            self.remove()
        except Exception:  # interpreter shutdown: best effort  # noqa: BLE001
            pass


def tempdir(custom_path: str | None = None) -> TempDirectory:
    """A new temporary folder (or ``custom_path``, created and kept)."""
    return TempDirectory(custom_path)
