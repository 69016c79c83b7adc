"""The checks on a training run's settings that need no data and no model, run before anything loads.

:class:`interp.sae.training.TrainSettings` calls :func:`check_train_settings` first thing, so that the library and
``interp sae train`` refuse the same settings in the same words; the command calls it (through
``TrainSettings``) before it reads the corpus or loads the model. The order matters for the message: a
``d_sae`` of 0 is named as such, not as "k is larger than d_sae".
"""

from __future__ import annotations

import math
from typing import Any

_AT_LEAST_ONE = ("d_sae", "batch_size", "buffer_rows", "init_rows", "log_every")


def check_train_settings(settings: Any) -> None:
    """Raise ``ValueError`` for the first setting of ``settings`` that no training run can use.

    Args:
        settings: A :class:`~interp.sae.training.TrainSettings` (anything with its fields).

    Raises:
        ValueError: A count below 1 (``d_sae``, ``batch_size``, ``buffer_rows``, ``tokens``,
            ``checkpoint_every``...), a learning rate that is not a finite number above 0, a negative
            ``min_position``, or a ``k`` a TopK architecture cannot use.
    """
    for name in _AT_LEAST_ONE:
        value = getattr(settings, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r}; it must be a whole number of at least 1")
    lr = settings.lr
    if lr is not None and (
        isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0
    ):
        raise ValueError(f"lr={lr!r}; the learning rate must be a finite number above 0, such as 3e-4")
    if settings.tokens is not None and settings.tokens < 1:
        raise ValueError(f"tokens={settings.tokens}; train on at least one token")
    if settings.checkpoint_every is not None and settings.checkpoint_every < 1:
        raise ValueError(f"checkpoint_every={settings.checkpoint_every}; give a positive number of steps")
    if settings.min_position < 0:
        raise ValueError(f"min_position={settings.min_position}; give a position from 0")
    if settings.architecture in ("topk", "batchtopk"):
        k = settings.k
        if k is None or k < 1:
            raise ValueError(f"architecture={settings.architecture!r} needs k >= 1, got k={k!r}")
        if k > settings.d_sae:
            raise ValueError(f"k={k} is larger than d_sae={settings.d_sae}; pick k <= d_sae")
