"""Record the packaged SmolLM2-135M-Instruct's answers as a scorer, the golden answers of the delphi parity test.

Run it from the repository root with the project's environment::

    python -m tests.sae.explanations.golden.record_answers

For each case of :mod:`tests.sae.explanations.parity_cases` (a planted feature, its own or a shuffled
explanation) and each scorer (detection, fuzzing), every example is put to the model alone (one example per
prompt, greedy, the five likeliest tokens at each step) through :class:`~interp.sae.explanations.LocalBackend`,
and its answer is kept under the example's plain text: the raw text, the tokens with their alternatives, and
the answer read as 0 or 1 (0 where it cannot be read). The parity test feeds these same answers to delphi's
scorers and to this package's, so both judge the same model output.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

import interp
from interp.sae.explanations import DetectionScorer, FuzzingScorer, LocalBackend, chat_template_of
from interp.sae.explanations.classifier import read_answer
from tests.sae.explanations.parity_cases import ANSWERS, cases, plain


def main() -> None:
    torch.set_num_threads(2)
    model = interp.load("smollm2-135m")
    backend = LocalBackend(
        model, name="smollm2-135m", chat_template=chat_template_of("smollm2-135m"), batch_size=16
    )
    recorded: dict[str, dict[str, dict]] = {}
    with tempfile.TemporaryDirectory() as root:
        for case in cases(Path(root)):
            for scorer in (DetectionScorer(per_prompt=1), FuzzingScorer(per_prompt=1)):
                prepared = scorer.prepare(
                    case.explanation, case.test, case.negatives, key=case.feature.id.index
                )
                replies = backend.complete(prepared.requests)
                answers = {}
                for (sample,), reply in zip(prepared.batches, replies, strict=True):
                    label = read_answer(reply.text, 1)
                    answers[plain(sample.text)] = {
                        "text": reply.text,
                        "tokens": [[t.token, [[a, round(lp, 5)] for a, lp in t.top]] for t in reply.tokens],
                        "label": int(bool(label and label[0])),
                    }
                recorded[f"{scorer.name}|{case.name}"] = answers
                print(scorer.name, case.name, sorted({a["text"] for a in answers.values()})[:4], flush=True)
    ANSWERS.write_text(json.dumps(recorded, ensure_ascii=False, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
