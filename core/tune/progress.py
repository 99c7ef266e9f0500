"""The tuning progress bar (tqdm): trials done, failures, the best so far and the time left.

Shown on a terminal, quiet elsewhere (``progress=None``); ``True`` or ``False`` forces it.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

__all__ = ["Progress", "format_cost"]


def format_cost(seconds: Optional[float], flop: float) -> str:
    """``"12.3 GFLOP/s"`` when the work is known, else the time per run."""
    if seconds is None:
        return "-"
    if flop > 0:
        return f"{flop / seconds / 1e9:.1f} GFLOP/s"
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


class Progress:
    """A tqdm bar over ``total`` trials, starting at ``initial`` (trials already in the log)."""

    def __init__(self, total: int, initial: int, description: str, flop: float, enabled: Optional[bool]) -> None:
        from tqdm.auto import tqdm

        disable: Optional[bool] = not enabled if enabled is not None else (None if sys.stderr.isatty() else True)
        self.flop = flop
        self.bar: Any = tqdm(total=total, initial=initial, desc=description, unit="trial", disable=disable,
                             dynamic_ncols=True, leave=True)

    def update(self, done: int, failures: int, best: Optional[float]) -> None:
        self.bar.set_postfix_str(f"failed={failures}, best={format_cost(best, self.flop)}", refresh=False)
        self.bar.update(done)

    def close(self) -> None:
        self.bar.close()
