"""Linear probes for the referent, layer by layer, split by twin pair with a shuffled-label control.

Resolution: the label is the answer (first or second candidate), read at the pronoun and at the final
position. Agreement: the label is the antecedent's class (female, male, plural, neuter, from the correct
pronoun), read at the antecedent and at the prediction position. Both twins of a pair go to the same side
of the split (groups = schema_id), so a probe cannot pass by recognising a near-duplicate sentence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from interp.analysis import train_probe
from studies.coreference.measure import Measured

CLASSES = {
    "she": "female", "her": "female", "herself": "female",
    "he": "male", "his": "male", "him": "male", "himself": "male",
    "they": "plural", "their": "plural", "them": "plural", "themselves": "plural",
    "it": "neuter", "its": "neuter", "itself": "neuter",
}  # fmt: skip


def labels_for(records: Sequence[dict]) -> list:
    """The probe label of each record: the answer index, or the agreement target's class."""
    if "targets" in records[0]:
        return [CLASSES.get(r["targets"][r["answer"]].strip(), r["targets"][r["answer"]]) for r in records]
    return [r["answer"] for r in records]


def probe_table(
    measured: Sequence[Measured], records: Sequence[dict], roles: Sequence[str], seed: int, steps: int = 100
) -> pd.DataFrame:
    """One row per role and layer: test accuracy with its interval (a bootstrap over the held-out schemas,
    twins together), the control's, and chance."""
    labels = labels_for(records)
    groups = [r["schema_id"] for r in records]
    rows = []
    for role in roles:
        if role not in measured[0].features:
            continue
        stack = torch.from_numpy(np.stack([m.features[role] for m in measured]))  # [item, layer, d_model]
        for layer in range(stack.shape[1]):
            result = train_probe(stack[:, layer], labels, groups, seed=seed, steps=steps)
            rows.append({"role": role, "layer": layer, **result.to_dict()})
    return pd.DataFrame(rows)
