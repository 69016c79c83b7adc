"""Run eai-delphi 0.1.3's own scorers on given examples and recorded answers (in delphi's environment).

Usage: ``python delphi_reference.py IN.json OUT.json`` with the interpreter of the ``delphi`` reference
environment (:mod:`tests.reference_envs`). The input holds cases; each is scored by delphi's own classes and
functions, and what they produced is written out for the test to compare:

- ``detection`` / ``fuzzing``: a latent record (explanation, activating test examples, non-activating examples)
  scored by ``DetectionScorer`` / ``FuzzingScorer`` with a client that answers from the recorded answers: for
  each example it reads in the prompt, it looks up the answer recorded for that example's plain text (marks
  removed); a prompt of one example gets the recorded answer text as it was, with its recorded token
  alternatives when ``log_prob`` is on; a longer prompt gets the list of the examples' recorded 0s and 1s. The
  output: each example's text as delphi showed it, its prediction, probability and truth, and delphi's metrics
  (``compute_confusion``, ``compute_classification_metrics``, ``compute_auc``) over them;
- ``embedding``: ``EmbeddingScorer`` with sentence-transformers' ``SentenceTransformer`` on a model folder; the
  output: the query text it embedded, each example's similarity, and scikit-learn's ROC AUC of them;
- ``metrics``: delphi's metric functions on given truths, predictions and probabilities.

delphi's scorer modules are reached through its package, whose ``__init__`` chain imports its vLLM client; that
client is never used here (the answers are recorded), so an empty ``vllm`` module stands in for the package,
which does not install without a GPU toolchain.
"""

from __future__ import annotations

import asyncio
import importlib.machinery
import json
import re
import sys
import types
from dataclasses import dataclass


def _stub(name: str) -> None:
    class Module(types.ModuleType):
        def __getattr__(self, attr: str):
            if attr.startswith("__"):
                raise AttributeError(attr)
            return type(attr, (), {})

    module = Module(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__path__ = []
    sys.modules[name] = module


for _name in ("vllm", "vllm.inputs", "vllm.distributed", "vllm.distributed.parallel_state"):
    _stub(_name)

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from delphi.clients.client import Client, Response  # noqa: E402
from delphi.latents import ActivatingExample, Latent, LatentRecord, NonActivatingExample  # noqa: E402
from delphi.log.result_analysis import compute_auc, compute_classification_metrics, compute_confusion  # noqa: E402
from delphi.scorers import DetectionScorer, EmbeddingScorer, FuzzingScorer  # noqa: E402

_EXAMPLE = re.compile(r"^Example (\d+): (.*)$", flags=re.M)


@dataclass
class Alternative:
    token: str
    logprob: float


@dataclass
class Step:
    token: str
    top_logprobs: list[Alternative]


class ReplayClient(Client):
    """Answers from recorded answers, keyed by each example's plain text; keeps what it was shown."""

    def __init__(self, answers: dict[str, dict]) -> None:
        super().__init__("recorded")
        self.answers = answers
        self.shown: list[str] = []

    async def generate(self, prompt, **kwargs) -> Response:
        last = prompt[-1]["content"]
        texts = [m[2] for m in _EXAMPLE.finditer(last)]
        self.shown.extend(texts)
        recorded = [self.answers[t.replace("<<", "").replace(">>", "")] for t in texts]
        if len(recorded) == 1:
            steps = None
            if kwargs.get("logprobs") and recorded[0]["tokens"] is not None:
                steps = [
                    Step(tok, [Alternative(a, lp) for a, lp in top]) for tok, top in recorded[0]["tokens"]
                ]
            return Response(text=recorded[0]["text"], logprobs=steps)
        return Response(text="[" + ", ".join(str(int(r["label"])) for r in recorded) + "]")


def _record(case: dict) -> LatentRecord:
    record = LatentRecord(Latent("layer", 0), explanation=case["explanation"])
    record.test = [
        ActivatingExample(
            tokens=torch.zeros(len(e["tokens"]), dtype=torch.long),
            activations=torch.tensor(e["activations"]),
            str_tokens=e["tokens"],
            quantile=e["quantile"],
        )
        for e in case["test"]
    ]
    record.not_active = [
        NonActivatingExample(
            tokens=torch.zeros(len(e["tokens"]), dtype=torch.long),
            activations=torch.tensor(e["activations"]),
            str_tokens=e["tokens"],
            distance=-1.0,
        )
        for e in case["negatives"]
    ]
    record.examples = record.test
    return record


def _metrics(frame: pd.DataFrame) -> dict:
    confusion = compute_confusion(frame)
    numbers = compute_classification_metrics(confusion)
    try:
        auc = compute_auc(frame) if frame.probability.notna().any() else None
    except ValueError:  # scikit-learn's answer when the examples with a probability are all of one class
        auc = None
    keep = ("accuracy", "precision", "recall", "f1_score", "total_positives", "total_negatives")
    return {**{k: float(numbers[k]) for k in keep}, "auc": None if auc is None else float(auc)}


def classify(case: dict) -> dict:
    client = ReplayClient(case["answers"])
    kind = DetectionScorer if case["kind"] == "detection" else FuzzingScorer
    scorer = kind(client, n_examples_shown=case["per_prompt"], log_prob=case["log_prob"])
    outputs = asyncio.run(scorer(_record(case))).score
    frame = pd.DataFrame(
        [
            {
                "text": "".join(o.str_tokens),
                "activating": o.activating,
                "prediction": o.prediction,
                "probability": o.probability,
            }
            for o in outputs
        ]
    )
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return {"shown": client.shown, "samples": rows, "metrics": _metrics(frame)}


def embed(case: dict) -> dict:
    from sentence_transformers import SentenceTransformer
    from sklearn.metrics import roc_auc_score

    model = SentenceTransformer(case["model"], device="cpu")
    queries: list[str] = []

    class Recording:
        def encode(self, texts, **kwargs):
            if isinstance(texts, str):
                queries.append(texts)
            return model.encode(texts, **kwargs)

        def similarity(self, a, b):
            return model.similarity(a, b)

    scorer = EmbeddingScorer(Recording())
    outputs = asyncio.run(scorer(_record(case))).score
    similarity = {o.text: float(o.similarity) for o in outputs}
    truth = {"".join(e["tokens"]): True for e in case["test"]} | {
        "".join(e["tokens"]): False for e in case["negatives"]
    }
    texts = list(similarity)
    auc = roc_auc_score([truth[t] for t in texts], [similarity[t] for t in texts])
    return {"query": queries[0], "similarity": similarity, "auc": float(auc)}


def metrics(case: dict) -> dict:
    frame = pd.DataFrame(
        {"activating": case["truth"], "prediction": case["predictions"], "probability": case["probabilities"]}
    )
    frame["prediction"] = frame["prediction"].astype(object)
    frame["probability"] = frame["probability"].astype(float)
    return _metrics(frame)


def main(source: str, target: str) -> None:
    cases = json.loads(open(source).read())
    run = {"detection": classify, "fuzzing": classify, "embedding": embed, "metrics": metrics}
    results = [run[case["kind"]](case) for case in cases]
    with open(target, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
