"""Training sparse dictionaries: the trainer, one optimisation step, the data stream, and the resumable state.

- ``trainer.py``: :func:`train` and :class:`TrainSettings`;
- ``step.py``: one step (loss, sparsity, dead-feature handling);
- ``data.py``: rows from a tensor or an activation store, sharded by rank, resumable;
- ``state.py``: checkpoints written atomically, and what a resumed run must match.
"""

from interp.sae.training.trainer import TrainSettings, train

__all__ = ["TrainSettings", "train"]
