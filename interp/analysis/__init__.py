"""Analysis over a model and its activations: decompositions, attribution, patching, head scores, probes,
steering, QK attribution (why a head attends where it does), and mixture-of-experts routing (statistics, each
expert's direct effect, routing patching).

The statistics reports put next to these numbers (intervals over groups, sign-flip, binomial and permutation
tests, twin differences, corrections over a family) are in :mod:`interp.analysis.stats`.

Every function that measures a behaviour (patching, attribution patching, steering sweeps, and circuits
above this package) takes one kind of metric, ``metric(logits, batch) -> [batch]``:
:mod:`interp.analysis.metric`.

Functions take ``(model, cache)`` or ``(model, tokens)`` and return tensors or pandas DataFrames with named
columns (``layer``, ``head``, ``position``, ``value``...). Each needs specific hooks in the cache; a missing
one raises :class:`MissingHooksError` naming the hooks and the ``names_filter`` that captures them.
"""

from interp.analysis.ablation import ablate, ablation_hooks
from interp.analysis.attribution_patching import attribution_patch, verify_top_k
from interp.analysis.checks import MissingHooksError
from interp.analysis.decompose import decompose_names, decompose_resid, decompose_stream
from interp.analysis.effect import normalised_effect
from interp.analysis.expert_attribution import expert_logit_attribution, expert_names
from interp.analysis.expert_writes import expert_writes
from interp.analysis.head_scores import (
    duplicate_token_scores,
    first_token_scores,
    head_table,
    induction_scores,
    previous_token_scores,
    repeated_tokens,
    span_attention,
)
from interp.analysis.lens import accumulated_resid, logit_lens, logit_lens_top, unembed_stream
from interp.analysis.logit_attribution import component_table, direct_logit_attribution, dla_names
from interp.analysis.metric import Batch, Metric, logit_difference
from interp.analysis.norms import apply_norm, linearise_norm
from interp.analysis.patching import Slot, hook_names_for, patch, run_patched
from interp.analysis.probes import ProbeResult, probe_layers, train_probe
from interp.analysis.qk import (
    QKAttribution,
    QKDifference,
    qk_attribution,
    qk_key_difference,
    qk_names,
    qk_twin_difference,
)
from interp.analysis.routing import RoutingStats, routing_statistics
from interp.analysis.routing_patching import RoutingEdit, routing_effects, routing_patch
from interp.analysis.source_contributions import attention_norms, source_contributions
from interp.analysis.stats import (
    Comparison,
    Correction,
    Interval,
    binomial_test,
    bootstrap_mean_interval,
    correct_intervals,
    correct_tests,
    group_interval,
    holm,
    label_permutation_test,
    mean_interval,
    sign_flip_interval,
    sign_flip_test,
    twin_difference_test,
    wilson_interval,
)
from interp.analysis.steering import (
    Steer,
    SteeringVector,
    load_steering_vector,
    steer,
    steering_vector,
    steering_vectors,
)
from interp.analysis.steering_sweep import steering_sweep

__all__ = [
    "Batch",
    "Comparison",
    "Correction",
    "Interval",
    "Metric",
    "MissingHooksError",
    "ProbeResult",
    "QKAttribution",
    "QKDifference",
    "RoutingEdit",
    "RoutingStats",
    "Slot",
    "Steer",
    "SteeringVector",
    "ablate",
    "ablation_hooks",
    "accumulated_resid",
    "apply_norm",
    "attention_norms",
    "attribution_patch",
    "binomial_test",
    "bootstrap_mean_interval",
    "component_table",
    "correct_intervals",
    "correct_tests",
    "decompose_names",
    "decompose_resid",
    "decompose_stream",
    "direct_logit_attribution",
    "dla_names",
    "duplicate_token_scores",
    "expert_logit_attribution",
    "expert_names",
    "expert_writes",
    "first_token_scores",
    "group_interval",
    "head_table",
    "holm",
    "hook_names_for",
    "induction_scores",
    "label_permutation_test",
    "linearise_norm",
    "load_steering_vector",
    "logit_difference",
    "logit_lens",
    "logit_lens_top",
    "mean_interval",
    "normalised_effect",
    "patch",
    "previous_token_scores",
    "probe_layers",
    "qk_attribution",
    "qk_key_difference",
    "qk_names",
    "qk_twin_difference",
    "repeated_tokens",
    "routing_effects",
    "routing_patch",
    "routing_statistics",
    "run_patched",
    "sign_flip_interval",
    "sign_flip_test",
    "source_contributions",
    "span_attention",
    "steer",
    "steering_sweep",
    "steering_vector",
    "steering_vectors",
    "train_probe",
    "twin_difference_test",
    "unembed_stream",
    "verify_top_k",
    "wilson_interval",
]
