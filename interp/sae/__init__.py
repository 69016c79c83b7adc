"""Sparse dictionaries: load, splice, train and evaluate sparse autoencoders and transcoders.

An :class:`SAE` maps an activation ``[..., d_in]`` to latents ``[..., d_sae]`` (``encode``) and back
(``decode``); a transcoder decodes into another hook instead. The package is one file per concern:

- ``config.py``, ``module.py``: :class:`SAEConfig` and :class:`SAE` (SAELens's input normalisation;
  transcoders); ``activation.py``: ReLU, JumpReLU, TopK and BatchTopK, once for every dictionary, with each
  published format's convention;
- ``sae_set.py``: :class:`SAESet`, SAEs by layer as a :class:`~interp.dictionary.SparseDictionary`, the
  interface transcoders share;
- ``formats/``: one module per published format, each a ``load``/``save`` pair; :func:`load_dictionary`
  reads any dictionary, told from its files, :func:`save_dictionary` writes one in its kind's format;
  :func:`load` recognises SAELens, sparsify and Gemma Scope files, :func:`save` writes SAELens's;
- ``transcoder/``: :class:`TranscoderSet` and :class:`CrossLayerTranscoder` (one interface);
- ``splice.py``: :func:`spliced`, the one splice of every dictionary: ``model.saes([...])``,
  ``model.run_with_saes(...)`` and ``model.transcoders(tc)`` (the replacement model) run it;
- ``training/``: :func:`train`, one trainer for every kind (SAEs and transcoders), on a tensor or an activation
  store, resumable, under torchrun;
- ``evaluate.py``: :func:`evaluate`, of every dictionary, per layer (L0, explained variance, dead and dense
  features) and spliced in whole (CE loss recovered, KL);
- ``dashboards/``: every feature's dashboard in one streaming pass (quantile examples, histogram, density,
  logits), written as circuit-tracer's feature files with a page to browse them;
- ``feature_report.py``: the dashboards of a few features as a report section;
- ``feature_patching.py``: attribution patching of a metric to features and the error node, checked by exact
  patching of features.

Example:
    >>> import interp, interp.sae  # doctest: +SKIP
    >>> model = interp.load("smollm2-135m")  # doctest: +SKIP
    >>> sae = interp.sae.load("saes/blocks.26.hook_resid_post")  # doctest: +SKIP
    >>> with model.saes([sae], use_error_term=True):  # doctest: +SKIP
    ...     logits, cache = model.run_with_cache(text, names_filter="*.hook_sae_acts_post")
"""

from interp.sae.config import SAEConfig
from interp.sae.evaluate import evaluate, evaluate_transcoders
from interp.sae.feature_patching import feature_attribution, patch_features
from interp.sae.feature_report import add_feature_section, feature_stats, logit_effects
from interp.sae.formats import load, load_dictionary, save, save_dictionary
from interp.sae.formats.build import SAEFormatError
from interp.sae.formats.transcoders import load_transcoders, save_transcoders
from interp.sae.module import SAE, SAE_HOOKS
from interp.sae.sae_set import SAESet
from interp.sae.splice import spliced, spliced_transcoders
from interp.sae.training import TrainSettings, train, train_transcoders
from interp.sae.transcoder import CrossLayerTranscoder, Transcoder, TranscoderSet

__all__ = [
    "CrossLayerTranscoder",
    "SAE",
    "SAEConfig",
    "SAEFormatError",
    "SAE_HOOKS",
    "SAESet",
    "TrainSettings",
    "Transcoder",
    "TranscoderSet",
    "add_feature_section",
    "evaluate",
    "evaluate_transcoders",
    "feature_attribution",
    "feature_stats",
    "load",
    "load_dictionary",
    "load_transcoders",
    "logit_effects",
    "patch_features",
    "save",
    "save_dictionary",
    "save_transcoders",
    "spliced",
    "spliced_transcoders",
    "train",
    "train_transcoders",
]
