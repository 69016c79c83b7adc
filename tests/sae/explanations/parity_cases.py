"""The examples and explanations on which the scorers are compared with delphi's, shared by the test and the
script that records a real scorer model's answers to them (``golden/record_answers.py``).

For each planted feature: its held-out activating examples and as many non-activating ones (windows of 32
tokens, as the pipeline cuts them), and two explanations: its own and the next feature's (a shuffled one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from interp.sae.explanations import Example, FeatureFiles
from tests.sae.explanations.planted import PLANTED, Planted, write_folder

N_TEST = 8
CONTEXT = 32
SEED = 0
ANSWERS = Path(__file__).parent / "golden" / "smollm2_answers.json"


@dataclass(frozen=True)
class Case:
    feature: Planted
    explanation: str
    test: list[Example]
    negatives: list[Example]

    @property
    def name(self) -> str:
        return f"{self.feature.kind}|{self.explanation}"


def cases(root: Path) -> list[Case]:
    """Each planted feature with its own explanation and with the next feature's."""
    folder = FeatureFiles.open(write_folder(root))
    found = []
    for i, feature in enumerate(PLANTED):
        record = folder.record(feature.id)
        _, test = record.split(4, N_TEST, SEED)
        test = [e.window(CONTEXT) for e in test]
        negatives = record.negatives(len(test), CONTEXT, SEED)
        for explanation in (feature.explanation, PLANTED[(i + 1) % len(PLANTED)].explanation):
            found.append(Case(feature, explanation, test, negatives))
    return found


def plain(text: str) -> str:
    """A passage without its marks."""
    return text.replace("<<", "").replace(">>", "")
