"""Training sparse dictionaries of every kind: one trainer, one step, the data stream, and the resumable state.

- ``trainer.py``: :func:`train` (SAEs and transcoders alike) and the loop every kind shares;
- ``settings.py``: :class:`TrainSettings`, checked before anything loads (:class:`SettingError` names the
  setting);
- ``kinds.py``: what differs between the kinds: the rows read, the initial dictionary, the finished one;
- ``step.py``: one step of any kind (loss, sparsity, dead-feature handling), over ``parts.py``'s view of the
  dictionary by layer; ``sparsity.py``: the activations' training forms and the AuxK loss; ``selected.py``:
  TopK's gradient through the chosen features alone;
- ``data.py``: rows from a tensor or an activation store, sharded by rank, resumable;
- ``state.py``: checkpoints written atomically, and what a resumed run must match;
- ``run_folder.py``: a whole run in one folder (``interp sae train``): the run record, resume, cache, train
  and save, the same for every kind.
"""

from interp.sae.training.settings import SettingError, TrainSettings
from interp.sae.training.trainer import TrainingWarning, train, train_transcoders

__all__ = ["SettingError", "TrainSettings", "TrainingWarning", "train", "train_transcoders"]
