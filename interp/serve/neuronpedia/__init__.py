"""Neuronpedia's inference API (``/v1/...``), as its published client ``neuronpedia-inference-client`` speaks it:
:mod:`.models` (the requests), :mod:`.activations`, :mod:`.steering` and :mod:`.utilities` (the routes)."""
