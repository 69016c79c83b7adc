"""Routing edits against the reference model routed by hand: its router module is replaced, for one layer, by a
function written here that chooses and weights the experts as each edit says (``-inf`` for a removed expert,
the lightest choice swapped for a forced one, a twin's choice), and the reference's logit difference is
compared with the edited runs' metric."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F

from interp.analysis import Batch, logit_difference
from interp.analysis.routing_patching import RoutingEdit, routing_effects, routing_patch
from tests.analysis.moe_models import padded, pair, tokens

N_POS = 6


@contextlib.contextmanager
def routed(reference, layer: int, choose):
    """The reference with layer ``layer``'s router replaced: ``choose(logits [rows, expert]) -> (weights,
    indices)``, rows in flat ``batch * pos`` order."""
    gate = reference.model.layers[layer].mlp.gate

    def forward(hidden):
        logits = F.linear(hidden.reshape(-1, gate.weight.shape[1]), gate.weight)
        weights, indices = choose(logits)
        return logits, weights.to(logits.dtype), indices

    gate.forward = forward
    try:
        yield
    finally:
        del gate.forward


def _weights(model, probs: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    w = probs.gather(-1, indices)
    return w / w.sum(-1, keepdim=True) if model.cfg.expert_weights == "softmax_topk" else w


def _at(positions, n_rows: int) -> torch.Tensor:
    """``[rows]`` True at the rows of ``positions`` (``None``: all)."""
    pos = torch.arange(n_rows) % N_POS
    return (
        torch.ones(n_rows, dtype=torch.bool)
        if positions is None
        else torch.isin(pos, torch.tensor(positions))
    )


def _naive_choice(model, edit: RoutingEdit, twin_logits: torch.Tensor | None):
    k = model.cfg.experts_per_token

    def choose(logits):
        rows = _at(edit.positions, logits.shape[0])
        probs = logits.float().softmax(-1)
        if edit.kind == "remove":
            logits = logits.clone()
            logits[rows, edit.expert] = float("-inf")
            probs = logits.float().softmax(-1)
            indices = probs.topk(k, -1).indices
        elif edit.kind == "force":
            indices = probs.topk(k, -1).indices
            for r in range(len(indices)):
                if rows[r] and edit.expert not in indices[r].tolist():
                    indices[r, k - 1] = edit.expert
        else:
            twin_probs = twin_logits.float().softmax(-1)
            indices = torch.where(rows[:, None], twin_probs.topk(k, -1).indices, probs.topk(k, -1).indices)
            if edit.weights:
                theirs = _weights(model, twin_probs, indices)
                return torch.where(rows[:, None], theirs, _weights(model, probs, indices)), indices
        return _weights(model, probs, indices), indices

    return choose


def _reference_metric(name, ids, edit, labels, twin_ids=None):
    reference, model = pair(name)
    twin_logits = None
    if twin_ids is not None:
        with torch.no_grad():
            out = reference(input_ids=twin_ids, output_router_logits=True)
        moe = [l for l, kind in enumerate(model.cfg.mlp_types) if kind == "moe"]
        twin_logits = out.router_logits[moe.index(edit.layer)]
    with routed(reference, edit.layer, _naive_choice(model, edit, twin_logits)), torch.no_grad():
        logits = reference(input_ids=ids).logits[:, -1]
    rows = torch.arange(len(ids))
    return float((logits[rows, labels["answer"]] - logits[rows, labels["foil"]]).mean())


def _used(model, ids, layer, position=None):
    """Experts of ``layer`` chosen somewhere (at ``position``), and one not chosen at ``position``."""
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names_filter=f"blocks.{layer}.mlp.hook_expert_indices")
    chosen = cache[f"blocks.{layer}.mlp.hook_expert_indices"]
    at = chosen if position is None else chosen[:, position]
    return sorted(set(at.flatten().tolist())), [
        e for e in range(model.cfg.n_experts) if not (at == e).any(-1).all()
    ]


@pytest.mark.parametrize("name", ["mixtral", "qwen2-moe"])
def test_edits_match_the_reference_routed_by_hand(name):
    _, model = pair(name)
    ids, twin_ids = tokens(2, N_POS, seed=4), tokens(2, N_POS, seed=5)
    labels = {"answer": torch.tensor([3, 9]), "foil": torch.tensor([7, 4])}
    last = [l for l, kind in enumerate(model.cfg.mlp_types) if kind == "moe"][-1]
    used0, _ = _used(model, ids, 0)
    used_last, unused_last = _used(model, ids, last, N_POS - 1)
    _, unused = _used(model, ids, 0, 1)
    edits = [
        RoutingEdit.remove(0, used0[0]),
        RoutingEdit.remove(last, used_last[-1], positions=[2, N_POS - 1]),
        RoutingEdit.force(0, unused[0], positions=1),
        RoutingEdit.force(last, unused_last[0]),
        RoutingEdit.twin(last),
        RoutingEdit.twin(0, positions=[0, 4], weights=True),
    ]
    frame = routing_effects(
        model, ids, edits, logit_difference, twin_tokens=twin_ids, labels=labels, batch_size=4
    )
    with torch.no_grad():
        base = logit_difference(model(ids), Batch(ids, labels=labels)).mean()
    assert frame.attrs["metric"] == pytest.approx(float(base), abs=1e-6)
    for edit, row in zip(edits, frame.itertuples(), strict=True):
        expected = _reference_metric(name, ids, edit, labels, twin_ids if edit.kind == "twin" else None)
        assert row.metric == pytest.approx(expected, abs=2e-5), str(edit)
        assert row.delta == pytest.approx(row.metric - frame.attrs["metric"], abs=1e-9)
        assert abs(row.delta) > 1e-4, f"{edit} changed nothing: a weak test"
    gap = frame.attrs["twin_metric"] - frame.attrs["metric"]
    assert frame["value"].tolist() == pytest.approx((frame["delta"] / gap).tolist())


def test_routing_patch_sweeps_twin_edits():
    """``routing_patch`` is the twin edit of each layer (and position) with the clean run as the twin."""
    _, model = pair("qwen2-moe")
    clean, corrupt = tokens(2, N_POS, seed=6), tokens(2, N_POS, seed=7)
    labels = {"answer": torch.tensor([3, 9]), "foil": torch.tensor([7, 4])}
    frame = routing_patch(model, clean, corrupt, logit_difference, "position", labels=labels, weights=True)
    assert frame[["layer", "position"]].values.tolist() == [[l, p] for l in (0, 2) for p in range(N_POS)]
    for row in frame.itertuples():
        edit = RoutingEdit.twin(row.layer, row.position, weights=True)
        expected = _reference_metric("qwen2-moe", corrupt, edit, labels, clean)
        assert row.delta == pytest.approx(expected - frame.attrs["corrupt_metric"], abs=2e-5)
    with torch.no_grad():
        clean_metric = logit_difference(model(clean), Batch(clean, labels=labels)).mean()
    assert frame.attrs["clean_metric"] == pytest.approx(float(clean_metric), abs=1e-6)
    whole = routing_patch(model, clean, corrupt, logit_difference, labels=labels)
    assert whole["layer"].tolist() == [0, 2] and "position" not in whole


def test_bad_input_is_refused_before_an_edited_forward(monkeypatch):
    _, model = pair("mixtral")
    ids = tokens(2, N_POS)
    labels = {"answer": torch.tensor([3, 9]), "foil": torch.tensor([7, 4])}
    from interp.analysis import routing_patching

    def never(*args, **kwargs):
        raise AssertionError("an edited forward ran")

    monkeypatch.setattr(routing_patching, "run_conditions", never)
    run = lambda edits, **kw: routing_effects(model, ids, edits, logit_difference, labels=labels, **kw)  # noqa: E731
    with pytest.raises(IndexError, match="expert 4 is out of range for layer 0: its experts are 0 to 3"):
        run([RoutingEdit.force(0, 4)])
    with pytest.raises(IndexError, match="expert -1 is out of range"):
        run([RoutingEdit.remove(1, -1)])
    with pytest.raises(IndexError, match="layer 2 is out of range"):
        run([RoutingEdit.remove(2, 0)])
    _, idle = _used(model, ids[:1, :1], 0, 0)
    with pytest.raises(
        ValueError, match=f"remove L0.E{idle[0]}@0: no token at the positions edited chose expert"
    ):
        routing_effects(
            model,
            ids[:1, :1],
            [RoutingEdit.remove(0, idle[0], 0)],
            logit_difference,
            labels={"answer": torch.tensor([3]), "foil": torch.tensor([7])},
        )
    chosen, _ = _used(model, ids[:1, :1], 0, 0)
    with pytest.raises(ValueError, match="already chose expert"):
        routing_effects(
            model,
            ids[:1, :1],
            [RoutingEdit.force(0, chosen[0], 0)],
            logit_difference,
            labels={"answer": torch.tensor([3]), "foil": torch.tensor([7])},
        )
    with pytest.raises(ValueError, match="twin edits take the routing of twin_tokens"):
        run([RoutingEdit.twin(0)])
    with pytest.raises(ValueError, match="same \\[batch, pos\\]"):
        run([RoutingEdit.twin(0)], twin_tokens=tokens(2, N_POS + 1))
    with pytest.raises(IndexError, match="position 6 is out of range"):
        run([RoutingEdit.twin(0, 6)], twin_tokens=tokens(2, N_POS, seed=1))
    with pytest.raises(ValueError, match="no edits"):
        run([])
    _, qwen = pair("qwen2-moe")
    with pytest.raises(ValueError, match="layer 1 has a dense MLP"):
        routing_effects(qwen, ids, [RoutingEdit.force(1, 0)], logit_difference, labels=labels)


def test_padding_is_left_alone():
    """A right-padded batch gives each row what it gives alone: the mask reaches every copy, and an edit at
    padding reaches no real token."""
    _, model = pair("mixtral")
    ids, mask = padded(2, N_POS, seed=11)
    labels = {"answer": torch.tensor([3, 9]), "foil": torch.tensor([7, 4])}
    lengths = mask.sum(1).tolist()
    both = [
        sorted(set(_used(model, ids[:1], layer)[0]) & set(_used(model, ids[1:, : lengths[1]], layer)[0]))
        for layer in (0, 1)
    ]
    edits = [RoutingEdit.remove(0, both[0][0]), RoutingEdit.remove(1, both[1][-1])]
    frame = routing_effects(model, ids, edits, logit_difference, attention_mask=mask, labels=labels)
    alone = []
    for row, n in enumerate(lengths):
        rows = {k: v[row : row + 1] for k, v in labels.items()}
        alone.append(
            routing_effects(model, ids[row : row + 1, :n], edits, logit_difference, labels=rows)["metric"]
        )
    assert frame["metric"].tolist() == pytest.approx(((alone[0] + alone[1]) / 2).tolist(), abs=1e-5)
