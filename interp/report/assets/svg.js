// svg(), added to window.interpDom for the pages that draw SVG (the graph viewer, the dashboards): a new SVG
// element ``tag`` with ``attrs`` and ``text`` as dom.js's assign() sets them. A page that draws none leaves this
// file out, and with it the namespace's address.
(function () {
  "use strict";
  const NAMESPACE = "http://www.w3.org/2000/svg";

  function svg(tag, attrs, text) {
    return window.interpDom.assign(document.createElementNS(NAMESPACE, tag), attrs, text);
  }

  window.interpDom.svg = svg;
})();
