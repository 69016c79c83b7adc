"""Switch sensitivity and bias of the model's behaviour, per data set and scoring method: the study's primary
behavioural measure (:mod:`studies.data.switch` defines it).

Per comparable twin pair (same candidates, or same two pronouns, so a preference means the same in both
twins): the preference for label 0 in each twin, the first candidate minus the second (the log-probability
sums of each scoring method, nats) or the first pronoun of the pair minus the other (" she" − " he",
" they" − " it": logits at the next-token position). Its twin difference toward the expected answer is tested by
sign flips over pairs (twins one unit, pairs of one schema together), with its interval; the bias (the mean
preference over both twins) is reported apart; "right in both twins" follows, against its chance 0.25.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from studies.coreference.behaviour import LABELS, METHODS, schema_ids
from studies.data.switch import SwitchSummary, summarise, switch_pair

RESOLUTION_LABELS = ("the first candidate", "the second")
AGREEMENT_LABELS = ("the first pronoun of the pair (she, her, herself; they, their)", "the other")


def _preference(record: dict, method: str | None) -> float:
    """Label 0 minus label 1 in one record: a scoring method's two scores, or the two target logits."""
    values = record[method] if method is not None else record["target_logits"]
    return float(values[0]) - float(values[1])


def switch_summaries(
    records: Sequence[dict], pairs: Sequence[tuple[int, int]], kind: str, seed: int = 0
) -> dict[str, SwitchSummary]:
    """Per scoring method (resolution) or prompt set (agreement: all, two-person), the switch summary over
    the comparable twin ``pairs`` (indices into ``records``) whose preferences are all finite.

    Resolution records carry ``full``, ``partial``, ``question``, ``lm_eval`` (one score per candidate);
    agreement records ``target_logits``. A set with no usable pair is left out."""
    schemas = schema_ids(records)
    if kind == "resolution":
        sets = {LABELS[m]: (m, pairs) for m in METHODS}
        labels, unit = RESOLUTION_LABELS, "nats"
    else:
        two = [(a, b) for a, b in pairs if records[a]["two_people"] and records[b]["two_people"]]
        sets = {"model, all prompts": (None, pairs), "model, two-person prompts": (None, two)}
        labels, unit = AGREEMENT_LABELS, "logits"
    out = {}
    for name, (method, chosen) in sets.items():
        scored, groups = [], []
        for a, b in chosen:
            pa, pb = _preference(records[a], method), _preference(records[b], method)
            if math.isfinite(pa) and math.isfinite(pb):
                scored.append(switch_pair(pa, pb, int(records[a]["answer"])))
                groups.append(schemas[a])
        if scored:
            out[name] = summarise(scored, groups, labels=labels, unit=unit, seed=seed)
    return out


def switch_table(summaries: dict[str, SwitchSummary]) -> pd.DataFrame:
    """One row per set: the sensitivity with its interval and p-value, the bias likewise, and right in both
    with its chance."""
    rows = []
    for name, s in summaries.items():
        sens, bias = s.sensitivity, s.bias
        rows.append(
            {
                "method": name,
                "pairs": s.n_pairs,
                "sensitivity": sens.estimate,
                "sens_low": sens.interval.low,
                "sens_high": sens.interval.high,
                "sens_p": sens.p_value,
                "positive": s.sensitive,
                "bias": bias.estimate,
                "bias_low": bias.interval.low,
                "bias_high": bias.interval.high,
                "bias_p": bias.p_value,
                "mean_abs_bias": s.mean_abs_bias,
                "right_both": s.right_both,
                "right_both_fraction": s.right_both / s.n_pairs,
                "right_both_chance": s.chance,
                "right_both_p": s.right_both_p,
                "unit": s.unit,
            }
        )
    return pd.DataFrame(rows)
