"""SAELens's ``tutorials/basic_loading_and_analysing.ipynb`` (SAELens 6.18.0), transcribed cell by cell.

The notebook is not in SAELens's PyPI distributions, so its cells are transcribed here as written, with what
the runner would change changed: the model name (``"gpt2-small"``) is the golden checkpoint, the SAE release
(``"gpt2-small-res-jb"``) the folder of SAEs SAELens wrote for the tests (the id ``"standard"`` for
``"blocks.8.hook_resid_pre"``), and the hub dataset (``"NeelNanda/pile-10k"``) a local one. Plots are drawn with
plotly in the notebook; their data are computed here. The SAEDashboard cells (a separate library) and the
Neuronpedia cell (the network) are left out. Each cell's results are checked against a computation written here;
the one line that does not run on interp (a hook that returns a tensor of another shape) is checked to fail
with its message.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from functools import partial

import pytest
import torch
from torch.testing import assert_close

from hooks import HookEditError
from tests.compat.models import CHECKPOINT, GOLDEN

RELEASE = str(GOLDEN / "saes")
TEXTS = [
    "The cat sat on the mat. The dog sat on the mat, and John and Mary went to the store.",
    "After John and Mary went to the store, Mary gave a bottle of milk to John. Hello World.",
    "Claire went to the store then gave a bottle of milk to Mary. The quick brown fox jumped over the lazy dog.",
] * 12


def test_basic_loading_and_analysing_cell_by_cell(monkeypatch):
    datasets = pytest.importorskip("datasets")
    import interp.compat.sae_lens

    for name in ("sae_lens", "transformer_lens"):
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)
    interp.compat.sae_lens.install()
    torch.set_grad_enabled(False)
    try:
        # Cell 1: the device.
        device = "cuda" if torch.cuda.is_available() else "cpu"
        device = "cpu"  # the golden values are on the CPU

        # Cell 3: a TransformerLens model and a pretrained SAE.
        from sae_lens import SAE
        from transformer_lens import HookedTransformer

        model = HookedTransformer.from_pretrained(CHECKPOINT, device=device)
        sae = SAE.from_pretrained(release=RELEASE, sae_id="standard", device=device)

        # Cell 4: the dataset, tokenized and concatenated to the SAE's context.
        from transformer_lens.utils import tokenize_and_concatenate

        dataset = datasets.Dataset.from_dict({"text": TEXTS})
        token_dataset = tokenize_and_concatenate(
            dataset=dataset,
            tokenizer=model.tokenizer,
            streaming=True,
            max_length=sae.cfg.metadata.context_size,
            add_bos_token=sae.cfg.metadata.prepend_bos,
        )
        assert token_dataset[0]["tokens"].shape == (sae.cfg.metadata.context_size,)
        assert int(token_dataset[0]["tokens"][0]) == model.tokenizer.bos_token_id

        # Cell 5: L0 and the SAE's reconstruction of the cached activation.
        sae.eval()
        with torch.no_grad():
            batch_tokens = token_dataset[:32]["tokens"]
            _, cache = model.run_with_cache(batch_tokens, prepend_bos=True)
            feature_acts = sae.encode(cache[sae.cfg.metadata.hook_name])
            sae_out = sae.decode(feature_acts)
            x = cache[sae.cfg.metadata.hook_name]
            del cache
            l0 = (feature_acts[:, 1:] > 0).float().sum(-1).detach()
            pre = (x - sae.b_dec) @ sae.W_enc + sae.b_enc  # a standard SAE, written out
            assert_close(l0, (pre[:, 1:] > 0).float().sum(-1))
            assert 0 < l0.mean().item() < sae.cfg.d_sae
            histogram_data = l0.flatten().cpu().numpy()  # what px.histogram draws
            assert histogram_data.shape == (batch_tokens.shape[0] * (batch_tokens.shape[1] - 1),)

        # Cell 6: the loss with the reconstruction and with zeros in place of the activation.
        from transformer_lens import utils

        def reconstr_hook(activation, hook, sae_out):
            return sae_out

        def zero_abl_hook(activation, hook):
            return torch.zeros_like(activation)

        orig = model(batch_tokens, return_type="loss").item()
        reconstr = model.run_with_hooks(
            batch_tokens,
            fwd_hooks=[(sae.cfg.metadata.hook_name, partial(reconstr_hook, sae_out=sae_out))],
            return_type="loss",
        ).item()
        zero = model.run_with_hooks(
            batch_tokens, return_type="loss", fwd_hooks=[(sae.cfg.metadata.hook_name, zero_abl_hook)]
        ).item()
        assert reconstr == pytest.approx(
            model.run_with_saes(batch_tokens, saes=[sae], return_type="loss").item()
        )
        assert len({round(orig, 4), round(reconstr, 4), round(zero, 4)}) == 3

        # Cell 7: a specific capability, with and without the reconstruction.
        example_prompt = "When John and Mary went to the shops, John gave the bag to"
        example_answer = " Mary"
        printed = io.StringIO()
        with redirect_stdout(printed):
            utils.test_prompt(example_prompt, example_answer, model, prepend_bos=True)
        assert "Rank:" in printed.getvalue() and "Tokenized answer: [' Mary']" in printed.getvalue()

        logits, cache = model.run_with_cache(example_prompt, prepend_bos=True)
        tokens = model.to_tokens(example_prompt)
        sae_out = sae(cache[sae.cfg.metadata.hook_name])
        hook_name = sae.cfg.metadata.hook_name
        orig = model(tokens, return_type="loss").item()
        reconstr = model.run_with_hooks(
            tokens, fwd_hooks=[(hook_name, partial(reconstr_hook, sae_out=sae_out))], return_type="loss"
        ).item()
        assert reconstr == pytest.approx(model.run_with_saes(tokens, saes=[sae], return_type="loss").item())
        # The cell's last lines splice the prompt's 15-position reconstruction into test_prompt's run of prompt
        # and answer, 16 positions. TransformerLens takes the shorter tensor as it is (the run goes on with 15
        # positions, and test_prompt reads shifted ones); interp refuses a hook's tensor of another shape.
        with model.hooks(fwd_hooks=[(hook_name, partial(reconstr_hook, sae_out=sae_out))]):
            with pytest.raises(
                HookEditError, match=r"shape \(1, 15, 32\); the activation has shape \(1, 16, 32\)"
            ):
                utils.test_prompt(example_prompt, example_answer, model, prepend_bos=True)
        assert model(tokens, return_type="loss").item() == pytest.approx(
            orig
        )  # the hooks left with the block
    finally:
        torch.set_grad_enabled(True)
