// The helpers every page script shares (reports, the explainer, the graph viewer, the dashboards), as
// window.interpDom. The page shell inlines this script before the page's own, so that each page builds elements,
// finds them and reads files one way; svg.js adds svg() for the pages that draw SVG. eslint.config.mjs refuses a
// second definition of these names in another page script, and the DOM calls they wrap (createElement,
// createElementNS, getElementById) outside these files.
(function () {
  "use strict";

  // ``e`` with the attributes of ``attrs`` (one whose value is null or undefined is left out) and ``text`` as
  // its text content, never as markup (null or undefined: none).
  function assign(e, attrs, text) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) e.setAttribute(k, v);
    }
    if (text !== null && text !== undefined) e.textContent = String(text);
    return e;
  }

  // A new HTML element ``tag``, with ``attrs`` and ``text`` as assign() sets them.
  function el(tag, attrs, text) {
    return assign(document.createElement(tag), attrs, text);
  }

  // ``node`` emptied, for writing into it again.
  function clear(node) {
    node.replaceChildren();
    return node;
  }

  function byId(id) {
    return document.getElementById(id);
  }

  // Whether the page was served over http(s); browsers let only a served page read the files beside it.
  function served() {
    return location.protocol === "http:" || location.protocol === "https:";
  }

  // The JSON file at ``url`` (relative to the page), parsed; a failed read rejects with its HTTP status.
  function readJson(url) {
    if (!served()) return Promise.reject(new Error("opened from a file"));
    return fetch(url).then((r) => {
      if (!r.ok) throw new Error(r.status + " " + r.statusText);
      return r.json();
    });
  }

  window.interpDom = { assign, el, clear, byId, served, readJson };
})();
