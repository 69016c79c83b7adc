"""Training sparse dictionaries: the trainer, one optimisation step, the data stream, and the resumable state.

- ``trainer.py``: :func:`train` and :class:`TrainSettings`, and the loop every kind shares;
- ``transcoders.py``, ``transcoder_step.py``: :func:`train_transcoders` (per-layer, skip, cross-layer);
- ``step.py``: one step (loss, sparsity, dead-feature handling);
- ``data.py``: rows from a tensor or an activation store, sharded by rank, resumable;
- ``state.py``: checkpoints written atomically, and what a resumed run must match;
- ``run_folder.py``: a whole run in one folder (``interp sae train``): the run record, resume, cache, train
  and save, the same for SAEs and transcoders.
"""

from interp.sae.training.trainer import TrainSettings, train
from interp.sae.training.transcoders import train_transcoders

__all__ = ["TrainSettings", "train", "train_transcoders"]
