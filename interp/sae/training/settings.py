"""TrainSettings: every setting of a training run, checked before any data or model is read.

:class:`TrainSettings` checks itself in ``__post_init__``, so that the library and ``interp sae train`` refuse the
same settings in the same words: the command builds one from its flags before it reads the corpus or loads the
model. A refusal is a :class:`SettingError`, which carries the setting's name and value, so that a command can
say it with its flag (``--lr -1.0; ...``) without reading the message. The order of the checks matters for the
message: a ``d_sae`` of 0 is named as such, not as "k is larger than d_sae".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from interp.sae.config import ARCHITECTURES

_AT_LEAST_ONE = ("d_sae", "batch_size", "buffer_rows", "init_rows", "log_every")


class SettingError(ValueError):
    """A training setting no run can use.

    Attributes:
        name: the :class:`TrainSettings` field, e.g. ``"lr"``.
        value: the value given.
        reason: what follows ``name=value`` in the message (``"; the learning rate must be ..."``).
    """

    def __init__(self, name: str, value: Any, reason: str) -> None:
        super().__init__(f"{name}={value!r}{reason}")
        self.name, self.value, self.reason = name, value, reason


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    """Every setting of a training run (recorded in checkpoints and in the dictionary's metadata).

    Raises:
        SettingError: the first setting no run can use (see :func:`check_train_settings`).
    """

    d_sae: int
    architecture: Literal["topk", "batchtopk", "standard", "jumprelu"] = "topk"
    k: int | None = None
    lr: float | None = None
    tokens: int | None = None
    batch_size: int = 4096
    seed: int = 0
    b_dec_init: Literal["geometric_median", "mean", "zeros"] = "geometric_median"
    normalize: bool = True
    aux_coefficient: float = 1 / 32
    l1_coefficient: float = 3e-3
    l0_coefficient: float = 2e-3
    jumprelu_init_threshold: float = 0.01
    jumprelu_bandwidth: float = 0.05
    batchtopk_threshold_lr: float = 0.01
    dead_after_tokens: int | None = None
    warmup_steps: int | None = None
    decay_fraction: float = 0.2
    buffer_rows: int = 262144
    init_rows: int = 16384
    min_position: int = 0
    checkpoint_every: int | None = None
    log_every: int = 25

    def __post_init__(self) -> None:
        check_train_settings(self)

    def learning_rate(self) -> float:
        return self.lr if self.lr is not None else 2e-4 / math.sqrt(self.d_sae / 2**14)


def check_train_settings(settings: Any) -> None:
    """Raise :class:`SettingError` for the first setting of ``settings`` that no training run can use.

    Args:
        settings: A :class:`TrainSettings` (anything with its fields).

    Raises:
        SettingError: An architecture not known, a count below 1 (``d_sae``, ``batch_size``, ``buffer_rows``,
            ``tokens``, ``checkpoint_every``...), a learning rate that is not a finite number above 0, a negative
            ``min_position``, a ``k`` a TopK architecture cannot use, or a decay fraction outside ``[0, 1)``.
    """
    if settings.architecture not in ARCHITECTURES:
        raise SettingError("architecture", settings.architecture, f"; expected one of {list(ARCHITECTURES)}")
    for name in _AT_LEAST_ONE:
        value = getattr(settings, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SettingError(name, value, "; it must be a whole number of at least 1")
    lr = settings.lr
    if lr is not None and (
        isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0
    ):
        raise SettingError("lr", lr, "; the learning rate must be a finite number above 0, such as 3e-4")
    if settings.tokens is not None and settings.tokens < 1:
        raise SettingError("tokens", settings.tokens, "; train on at least one token")
    if settings.checkpoint_every is not None and settings.checkpoint_every < 1:
        raise SettingError("checkpoint_every", settings.checkpoint_every, "; give a positive number of steps")
    if settings.min_position < 0:
        raise SettingError("min_position", settings.min_position, "; give a position from 0")
    if settings.architecture in ("topk", "batchtopk"):
        k = settings.k
        if k is None or k < 1:
            raise SettingError(
                "k", k, f"; architecture={settings.architecture!r} needs k >= 1 active latents"
            )
        if k > settings.d_sae:
            raise SettingError("k", k, f" is larger than d_sae={settings.d_sae}; pick k <= d_sae")
    if not 0 <= settings.decay_fraction < 1:
        raise SettingError("decay_fraction", settings.decay_fraction, "; it must lie in [0, 1)")
