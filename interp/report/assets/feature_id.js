// A feature's number in the files every page reads, as window.interpFeatureId: feature ``feature`` of layer
// ``layer`` is featureIndex (layer + feature)(layer + feature + 1) / 2 + feature, the Cantor pairing
// circuit-tracer numbers graph nodes and feature files with (its frontend's graph_models.py; the Python twin is
// FeatureId.index). The one place page scripts compute it; eslint.config.mjs refuses the formula elsewhere.
(function () {
  "use strict";

  function index(layer, feature) {
    for (const [name, v] of [["layer", layer], ["feature", feature]]) {
      if (!Number.isSafeInteger(v) || v < 0) {
        throw new RangeError(name + " " + JSON.stringify(v) + " is not a non-negative integer");
      }
    }
    // sum (sum + 1) is even and below 2^54 wherever the index is below 2^53, so a double holds it exactly
    const sum = layer + feature;
    const found = (sum * (sum + 1)) / 2 + feature;
    if (!Number.isSafeInteger(found)) {
      throw new RangeError("featureIndex of layer " + layer + ", feature " + feature + " is past 2^53");
    }
    return found;
  }

  window.interpFeatureId = { index };
})();
