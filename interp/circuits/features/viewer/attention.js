// Explained attention edges, from the graph file's interp extension: click an edge for the heads that carry
// it, a head for its score split into query-node x key-node terms, a node name to select it in the graph.
// Every string from the data is put in with textContent, never as markup.
(function () {
  "use strict";
  const { el, clear, byId } = window.interpDom;
  const data = JSON.parse(byId("graph-data").textContent);
  const records = (data.interp && data.interp.attention) || [];
  const viewer = window.graphViewer;
  const drawn = new Set(data.nodes.map((n) => n.uid));
  const box = el("div", { id: "attention" });
  byId("panel").appendChild(box);

  const edgeKey = (target, source) => target + "\u0000" + source;
  const byEdge = new Map(records.map((r) => [edgeKey(r.target, r.source), r]));
  const num = (x) => (x === null || x === undefined ? "" : Number(x).toPrecision(3));

  function nodeCell(name) {
    const td = el("td", { class: "mono" }, name);
    if (drawn.has(name)) {
      td.classList.add("node-link");
      td.setAttribute("data-node", name);
      td.addEventListener("click", () => viewer.select(name));
    }
    return td;
  }

  function title(text) {
    clear(box).appendChild(el("h2", {}, text));
  }

  function list() {
    title("Explained attention edges");
    if (!records.length) {
      box.appendChild(el("p", { class: "note" }, "none in this file (interp attribute --explain-attention N)"));
      return;
    }
    for (const r of records) {
      const p = el("p", { class: "edge-link mono" }, r.source + " \u2192 " + r.target + "  (" + num(r.edge) + ")");
      p.addEventListener("click", () => showEdge(r.target, r.source));
      box.appendChild(p);
    }
  }

  function showEdge(target, source) {
    const r = byEdge.get(edgeKey(target, source));
    title("Attention: " + source + " \u2192 " + target);
    if (!r) {
      box.appendChild(el("p", { class: "note", id: "attention-none" }, "this edge was not explained"));
      return;
    }
    box.appendChild(el("p", { class: "note" }, "edge " + num(r.edge) + " = direct " + num(r.direct) + " + heads"));
    const t = el("table", { id: "attention-heads" });
    t.appendChild(headerRow(["head", "loading", "score", "pattern"]));
    r.heads.forEach((h, i) => {
      const tr = el("tr", { class: "head-row", "data-head": "L" + h.layer + "H" + h.head });
      const name = el("td", { class: "node-link" }, "L" + h.layer + "H" + h.head + " " + h.query + "\u2190" + h.key);
      name.addEventListener("click", () => showHead(r, i));
      tr.append(name, el("td", { class: "w" }, num(h.loading)), el("td", { class: "w" }, num(h.score)),
        el("td", { class: "w" }, num(h.pattern)));
      t.appendChild(tr);
    });
    box.appendChild(t);
    const back = el("button", {}, "all explained edges");
    back.addEventListener("click", list);
    box.appendChild(back);
  }

  function headerRow(names) {
    const tr = el("tr");
    for (const n of names) tr.appendChild(el("th", {}, n));
    return tr;
  }

  function terms(part, caption, id) {
    box.appendChild(el("h2", {}, caption));
    const t = el("table", { id });
    t.appendChild(headerRow(["query node", "key node", "term"]));
    for (const [i, j, v] of part.terms) {
      const tr = el("tr");
      tr.append(nodeCell(part.query_nodes[i]), nodeCell(part.key_nodes[j]),
        el("td", { class: "w " + (v >= 0 ? "pos" : "neg") }, num(v)));
      t.appendChild(tr);
    }
    box.appendChild(t);
    box.appendChild(el("p", { class: "note" }, "the other terms add up to " + num(part.rest)));
  }

  function showHead(r, i) {
    showEdge(r.target, r.source);
    const h = r.heads[i];
    terms(h, "L" + h.layer + "H" + h.head + ": score " + num(h.score) + " from " + h.query + " to " + h.key +
      " in graph nodes", "attention-terms");
    const d = (r.differences || []).find((x) => x.layer === h.layer && x.head === h.head);
    if (d) terms(d, "against key " + d.second_key + ": difference " + num(d.difference), "attention-difference");
  }

  for (const line of document.querySelectorAll("svg .link")) {
    line.addEventListener("click", () => showEdge(line.getAttribute("data-target"), line.getAttribute("data-source")));
  }
  list();
  window.attentionViewer = { showEdge, showHead: (t, s, i) => showHead(byEdge.get(edgeKey(t, s)), i) };
})();
