"""Attribution graphs: the direct effects between transcoder features, errors, tokens and logits of a prompt.

- :mod:`~interp.circuits.features.frozen`: the local replacement model as one forward pass with hooks, patterns
  and norms frozen;
- :mod:`~interp.circuits.features.node_vectors`: active features and the vectors every node reads and writes;
- :mod:`~interp.circuits.features.targets`: logit targets (tokens or directions);
- :mod:`~interp.circuits.features.direct_effects`: :func:`attribute`, the direct effects between nodes from
  batched backward passes;
- :mod:`~interp.circuits.features.graph`: :class:`AttributionGraph`, plain data with its files;
- :mod:`~interp.circuits.features.influence`: influence, pruning and the replacement / completeness scores;
- :mod:`~interp.circuits.features.held`: the model held at a clean run's values;
- :mod:`~interp.circuits.features.intervene`: constrained and free feature interventions, generation with clamps;
- :mod:`~interp.circuits.features.heads`: an edge split exactly into the attention heads it passes through;
- :mod:`~interp.circuits.features.neuronpedia`: ``graph.json`` in Neuronpedia's schema;
- :mod:`~interp.circuits.features.labels`: labels (explanations) written into graph files' feature nodes and the
  viewer pages built from them.
"""

from interp.circuits.features.direct_effects import attribute
from interp.circuits.features.graph import AttributionGraph
from interp.circuits.features.heads import HeadLoadings, head_loadings
from interp.circuits.features.influence import Pruned
from interp.circuits.features.intervene import FeatureEdit, Intervened, generate_with_features, intervene
from interp.circuits.features.labels import Labelled, add_labels
from interp.circuits.features.targets import Target

__all__ = [
    "AttributionGraph",
    "FeatureEdit",
    "HeadLoadings",
    "Intervened",
    "Labelled",
    "Pruned",
    "Target",
    "add_labels",
    "attribute",
    "generate_with_features",
    "head_loadings",
    "intervene",
]
