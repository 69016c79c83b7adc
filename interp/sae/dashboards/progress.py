"""What a dashboards run shows while it works: a heading for each phase, and a bar with the phase's real total.

The phases: reading the data (texts are tokenized once to fingerprint them and count their tokens), the pass
(tokens, out of what the data holds or ``--tokens`` allows, whichever is fewer), and writing the feature files
(features). Each starts with one line on stderr saying what it does and how much, so that a run that takes
minutes says at every moment what it is doing and how far it has got.
"""

from __future__ import annotations

import sys
from typing import Any


class _Silent:
    """A bar that shows nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


class Progress:
    """Headings and bars on stderr, or nothing when ``show`` is false."""

    def __init__(self, show: bool, name: str = "dashboards") -> None:
        self.show, self.name = show, name

    def say(self, line: str) -> None:
        """One line: ``name: line``."""
        if self.show:
            print(f"{self.name}: {line}", file=sys.stderr, flush=True)

    def phase(self, heading: str, *, total: int | None, unit: str, label: str, initial: int = 0) -> Any:
        """Say ``heading``, then a bar labelled ``label`` counting ``unit`` up to ``total`` (``None``: unknown),
        starting at ``initial`` (what an earlier run already did). Close it when the phase ends."""
        if not self.show:
            return _Silent()
        from tqdm.auto import tqdm

        self.say(heading)
        return tqdm(
            total=total, initial=initial, unit=unit, desc=label, unit_scale=unit == "tok", file=sys.stderr
        )
