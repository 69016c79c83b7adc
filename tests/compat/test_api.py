"""The rest of the face: tokens helpers, return types, persistent hooks, stacked weights, folding, bad input."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch
from torch.testing import assert_close

import interp.compat.transformer_lens as transformer_lens
from interp.compat.transformer_lens import utils
from tests.compat.models import gqa_model, tl_model

TEXT = "After John and Mary went to the store, Mary gave a bottle of milk to"


@pytest.fixture(scope="module")
def model():
    return tl_model(process=True)


def test_get_act_name_follows_transformer_lens_3():
    assert utils.get_act_name("in", 3) == "blocks.3.hook_in"
    assert utils.get_act_name("resid_pre", torch.tensor(2)) == "blocks.2.hook_resid_pre"
    assert utils.get_act_name("attn", 1) == "blocks.1.attn.hook_pattern"
    assert utils.get_act_name("normalized", 27, "ln2") == "blocks.27.ln2.hook_normalized"
    assert utils.get_act_name("blocks.0.hook_in") == "blocks.0.hook_in"
    assert transformer_lens.utilities.get_act_name("k6") == "blocks.6.attn.hook_k"


def test_tokens_helpers(model):
    tokens = model.to_tokens(TEXT)
    assert isinstance(tokens, torch.Tensor) and tokens.shape == (1, 17)
    assert len(model.to_tokens(TEXT)[0]) == 17
    ids, mask = model.to_tokens(["The cat", "The cat sat on the mat"], return_mask=True)
    assert ids.shape == mask.shape == (2, 7) and mask[0].tolist() == [1, 1, 1, 0, 0, 0, 0]
    assert model.to_str_tokens(tokens)[:3] == ["<|endoftext|>", "After", " John"]
    assert model.to_string(tokens[0, 2]) == " John"
    assert model.to_string(tokens[0, 1:3]) == "After John"
    assert model.to_string(tokens[:, 1:3]) == ["After John"]
    assert model.to_string(2 * [5]) == model.to_string(torch.tensor([5, 5]))
    john = model.to_single_token(" John")
    assert tokens[0, 2] == john
    assert model.get_token_position(" Mary", TEXT) == 4
    assert model.get_token_position(" Mary", TEXT, mode="last") == 10
    assert model.get_token_position(" Mary", TEXT, prepend_bos=False) == 3


def test_text_input_and_prepend_bos(model):
    assert model("The cat sat").shape == (1, 4, 64)
    assert model("The cat sat", prepend_bos=False).shape == (1, 3, 64)
    assert_close(model("The cat sat"), model(model.to_tokens("The cat sat")))
    loss = model(["The cat", "The cat sat on the mat"], return_type="loss")
    tokens, mask = model.to_tokens(["The cat", "The cat sat on the mat"], return_mask=True)
    per_token = model.loss_fn(model(tokens, attention_mask=mask), tokens, per_token=True)
    keep = (mask[:, 1:] * mask[:, :-1]).bool()
    assert_close(loss, per_token[keep].mean())


def test_bad_input_says_what_to_do(model):
    with pytest.raises(ValueError, match=r"it is 2 tokens.*prepend_bos=False"):
        model.to_single_token(" John Mary")
    with pytest.raises(ValueError, match="return_type='logits'"):
        transformer_lens.HookedTransformer.from_interp(gqa_model(lm_head="none", tie_embeddings=False))(
            torch.tensor([[1, 2]]), return_type="loss"
        )
    with pytest.raises(ValueError, match="expected 'logits', 'loss', 'both' or None"):
        model(torch.tensor([[1, 2]]), return_type="logit")


def test_persistent_hooks_and_hook_layer(model):
    seen: list[int] = []
    model.blocks[1].attn.hook_pattern.add_hook(lambda x, hook: seen.append(hook.layer()))
    model.add_hook("blocks.0.hook_in", lambda x, hook: seen.append(hook.layer))
    model(torch.tensor([[1, 2, 3]]))
    model(torch.tensor([[1, 2, 3]]))
    assert seen == [0, 1, 0, 1]
    model.reset_hooks()
    model(torch.tensor([[1, 2, 3]]))
    assert seen == [0, 1, 0, 1]
    assert not any(point.active for point in model.hook_dict.values())


def test_run_with_cache_remove_batch_dim(model):
    tokens = model.to_tokens(TEXT)
    _, batched = model.run_with_cache(tokens)
    _, single = model.run_with_cache(tokens, remove_batch_dim=True)
    assert_close(single["pattern", 0, "attn"], batched["pattern", 0][0])
    assert_close(single["resid_pre", torch.tensor(1)], batched["blocks.1.hook_resid_pre"][0])
    stack = single.accumulated_resid(apply_ln=True)
    assert_close(stack, batched.accumulated_resid(apply_ln=True)[:, 0])


def test_stacked_weights_and_ungroup():
    model = transformer_lens.HookedTransformer.from_interp(gqa_model())
    assert model.W_Q.shape == (2, 4, 32, 8) and model.W_K.shape == (2, 2, 32, 8)
    assert model.W_O.shape == (2, 4, 8, 32) and model.W_gate.shape == (2, 32, 128) and model.b_Q is None
    model.set_ungroup_grouped_query_attention(True)
    assert model.W_K.shape == (2, 4, 32, 8)
    assert torch.equal(model.W_K[1, 3], model.blocks[1].attn.W_K[1])  # query head 3 reads key head 1
    qk = model.QK[1, 2].AB
    assert_close(qk, model.blocks[1].attn.W_Q[2] @ model.blocks[1].attn.W_K[1].T)
    assert model.unembed.W_U is not None and torch.equal(model.unembed.W_U, model.embed.W_E.T)
    names = dict(model.tl_named_parameters())
    assert names["unembed.W_U"] is not None and torch.equal(names["unembed.W_U"], model.embed.W_E.T)


def test_folding_keeps_the_function_of_a_gqa_rmsnorm_tied_model():
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    plain = gqa_model()
    before = plain(tokens).log_softmax(-1)
    w_e = plain.embed.W_E.detach().clone()
    model = transformer_lens.HookedTransformer.from_interp(plain).process_weights(
        center_writing_weights=False
    )
    assert_close(model(tokens).log_softmax(-1), before, atol=1e-5, rtol=1e-5)
    assert torch.equal(model.embed.W_E, w_e)  # untied before folding: the embedding is unchanged
    assert_close(model.blocks[0].ln1.gain, torch.ones(32))


def test_hooked_root_module():
    class Square(transformer_lens.HookedRootModule):
        def __init__(self):
            super().__init__()
            self.hook_in = transformer_lens.HookPoint()
            self.hook_out = transformer_lens.HookPoint()
            self.setup()

        def forward(self, x):
            return self.hook_out(self.hook_in(x) ** 2)

    module = Square()
    out, cache = module.run_with_cache(torch.tensor(3.0))
    assert out.item() == 9.0 and cache["hook_in"].item() == 3.0
    assert (
        module.run_with_hooks(torch.tensor(3.0), fwd_hooks=[("hook_in", lambda x, h: x + 1)]).item() == 16.0
    )


def test_generate_text_in_text_out(model):
    prompt = "After John and Mary"
    text = model.generate(prompt, max_new_tokens=4, do_sample=False, verbose=False)
    tokens = model.to_tokens(prompt)
    for _ in range(4):  # greedy decoding by full forwards
        tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)], dim=1)
    expected = model.to_string(tokens[0])
    assert isinstance(text, str) and text == expected
    assert torch.equal(model.generate(model.to_tokens(prompt), max_new_tokens=4, do_sample=False), tokens)


def test_induction_loss_refuses_what_transformer_lens_cannot_run(model):
    # TransformerLens draws ids 100..19999: a 64-token vocabulary cannot embed them (it fails there too)
    with pytest.raises(ValueError, match="d_vocab=64; use a model with at least 20000 tokens"):
        transformer_lens.evals.induction_loss(model, batch_size=2, subseq_len=8)


@pytest.mark.slow  # a fresh interpreter imports interp
def test_install_makes_import_transformer_lens_give_the_face():
    code = (
        "import interp.compat.transformer_lens as t; t.install(); import transformer_lens.utilities as utils; "
        "from transformer_lens.hook_points import HookPoint; from transformer_lens.HookedRootModule import "
        "HookedRootModule; from transformer_lens.model_bridge import TransformerBridge; "
        "from transformer_lens import FactoredMatrix, HookedTransformer, evals; "
        "assert HookedTransformer is t.HookedTransformer and HookPoint is t.HookPoint; "
        "print(utils.get_act_name('in', 0))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "blocks.0.hook_in"


def test_cfg_view(model):
    import copy

    assert model.cfg.device == torch.device("cpu") and model.cfg.normalization_type == "LN"
    assert model.cfg.n_layers == 2 and model.cfg.act_fn == "gelu_new" and model.cfg.n_key_value_heads is None
    twin = copy.deepcopy(model)
    assert twin.cfg == model.cfg and twin.cfg._model_ref is twin
    with pytest.raises(AttributeError, match="frozen"):
        model.cfg.n_layers = 3


def test_value_biases_are_not_folded_under_attention_sinks():
    from tests.analysis.moe_models import model as moe_model

    model = transformer_lens.HookedTransformer.from_interp(copy.deepcopy(moe_model("gpt-oss")))
    before = {name: p.clone() for name, p in model.named_parameters()}
    with pytest.raises(ValueError, match=r"attention sinks \(attn_sinks=True\).*fold_value_biases=False"):
        model.process_weights(fold_value_biases=True)
    assert all(
        torch.equal(p, before[name]) for name, p in model.named_parameters()
    )  # refused before any fold
    # the sink takes a share of each row that depends on the input, so b_V's write is not constant
    tokens = torch.randint(2, 60, (2, 7), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens, names_filter="blocks.0.attn.hook_pattern")
    row_sums = cache["blocks.0.attn.hook_pattern"].sum(-1)  # [batch, head, query]
    assert float(row_sums.min()) < 0.9 and float(row_sums.max() - row_sums.min()) > 0.1
