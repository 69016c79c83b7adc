"""Dashboards for every feature of a dictionary, in one streaming pass, written as circuit-tracer's feature files.

A dashboard is what a reader needs to say what a feature is: examples of the tokens where it fires (the top
ones, and examples from each quantile of its activations), each with the feature's activation at every token
of the context; its activation histogram, density, smallest and largest activation; the tokens its decoder
promotes and suppresses through the unembedding.

The method (one pass, memory fixed by the features and the examples kept, never by the corpus):

- counts, extremes and two histograms per feature, binned below a power of two that follows the largest
  activation, so their counts are exact (:mod:`.histogram`); quantiles come from the log histogram;
- the top examples and a uniform sample of the active tokens, each a bounded table of the smallest keys
  (:mod:`.reservoir`): the activation for the top, a hash of the token for the sample. Quantile boundaries are
  only known at the end, and a uniform sample restricted to any range is a uniform sample of that range, so
  each quantile's examples are the sampled tokens that fall in it, drawn without a second pass;
- each kept token carries its window of activations and token codes, captured when it enters.

Files (:mod:`.folder`): ``OUT/features/SCAN/<featureIndex>.json`` in circuit-tracer 0.5's feature schema
(:class:`FeatureFile`), ``index.json`` and a standalone page, ``index.html``; a graph in ``OUT`` whose
``metadata.scan`` is ``./data/features/SCAN`` opens in circuit-tracer's own local server with these dashboards.

The modules, by job: what is read of the dictionary (:mod:`.reading`) and of the data (:mod:`.data`, over
:mod:`.sources`); the pass (:mod:`.stream`, into :mod:`.collector`); the run and its identity (:mod:`.write`,
:mod:`.identity`, :mod:`.checkpoints`, :mod:`.progress`); the files (:mod:`.feature_files` from the tables,
:mod:`.schema` the type, :mod:`.folder` writing and :mod:`.reader` reading them, :mod:`.page`, :mod:`.link`);
a dictionary's folder read for a model (:mod:`.loading`).

- :func:`collect`: the pass, in memory; :func:`write_dashboards`: the pass (resumable) and the files;
- :class:`Data`: the tokens read; :class:`Settings`: what is kept; :func:`load_dictionary`: a dictionary's
  folder, read for a model and checked against it; :func:`as_dictionary`: any
  :class:`~interp.dictionary.SparseDictionary` (an SAE read as an :class:`~interp.sae.SAESet`);
- :class:`FeatureFile`: one feature's file; :func:`find_scans` and :class:`Scan`: reading a folder of them.
"""

from interp.sae.dashboards.collector import Collector, Settings
from interp.sae.dashboards.data import Data
from interp.sae.dashboards.folder import DashboardMismatchError
from interp.sae.dashboards.loading import load_dictionary
from interp.sae.dashboards.reader import Scan, find_scans
from interp.sae.dashboards.reading import as_dictionary
from interp.sae.dashboards.schema import FeatureFile, FeatureFileError
from interp.sae.dashboards.stream import Collected, collect
from interp.sae.dashboards.write import Written, write_dashboards

__all__ = [
    "Collected",
    "Collector",
    "DashboardMismatchError",
    "Data",
    "FeatureFile",
    "FeatureFileError",
    "Scan",
    "Settings",
    "Written",
    "as_dictionary",
    "collect",
    "find_scans",
    "load_dictionary",
    "write_dashboards",
]
