// The offline attribution-graph viewer. Every string from the data is put in with textContent, never as markup.
(function () {
  "use strict";
  const { el, svg, clear, byId, served } = window.interpDom;
  const data = JSON.parse(byId("graph-data").textContent);
  const nodes = data.nodes;
  const nodeById = new Map(nodes.map((n) => [n.uid, n]));
  const inputs = new Map(nodes.map((n) => [n.uid, []]));
  const outputs = new Map(nodes.map((n) => [n.uid, []]));
  for (const link of data.links) {
    if (!nodeById.has(link.source) || !nodeById.has(link.target)) continue;
    inputs.get(link.target).push(link);
    outputs.get(link.source).push(link);
  }
  const stateKey = "interp-graph:" + (data.metadata.slug || "graph");
  let state = { pinned: [], supernodes: [] };
  let selected = null;

  function kind(n) {
    return { embedding: "token", logit: "logit", "mlp reconstruction error": "error" }[n.feature_type] || "feature";
  }

  // Where a node is: layer, feature and position.
  function place(n) {
    const k = kind(n);
    const tokens = data.metadata.prompt_tokens;
    if (k === "token") return "token " + JSON.stringify(tokens[n.ctx_idx] || "");
    if (k === "logit") return n.clerp;
    if (k === "error") return "error L" + n.layer + " @" + n.ctx_idx;
    return "L" + n.layer + " F" + (data.features[n.uid] || {}).index + " @" + n.ctx_idx;
  }

  // What a reader calls it: a feature's explanation (its clerp, from interp autointerp) where it has one.
  function label(n) {
    return kind(n) === "feature" && n.clerp ? n.clerp + " @" + n.ctx_idx : place(n);
  }

  // The names of the supernodes the file holds as proposals still awaiting a decision (interp attribute
  // --supernodes auto writes them into the extension's supernode_criterion).
  function proposedInFile() {
    const criterion = data.interp && data.interp.supernode_criterion;
    return new Set((criterion && criterion.proposed) || []);
  }

  // The subgraph a graph file holds: its extension (interp's names), else its qParams (Neuronpedia ids).
  function subgraphOf(doc) {
    const own = doc.interp && doc.interp.subgraph;
    if (own) return { pinned: own.pinned || [], supernodes: own.supernodes || [] };
    const q = doc.qParams || {};
    const uids = new Map(nodes.map((n) => [n.node_id, n.uid]));
    const name = (id) => uids.get(id) || id;
    return { pinned: (q.pinnedIds || []).map(name), supernodes: (q.supernodes || []).map((s) => [s[0]].concat(s.slice(1).map(name))) };
  }

  // The page's state from a file's subgraph: members pinned, groups marked proposed as the file says.
  function stateOf(sub, proposed) {
    const groups = sub.supernodes.filter((s) => Array.isArray(s) && s.length > 1).map((s) => ({
      name: String(s[0]), members: s.slice(1).filter((id) => nodeById.has(id)), proposed: proposed.has(String(s[0])),
    })).filter((s) => s.members.length);
    const pinned = sub.pinned.concat(...groups.map((s) => s.members)).filter((id) => nodeById.has(id));
    return { pinned: Array.from(new Set(pinned)), supernodes: groups };
  }

  let hadSavedState = false;
  function title(n) {
    return label(n) === place(n) ? place(n) : label(n) + " (" + place(n) + ")";
  }

  // Labels changed (a graph file opened in the page): the nodes' titles and the panels follow.
  function redrawLabels() {
    for (const [id, c] of nodeEls) c.querySelector("title").textContent = title(nodeById.get(id));
    if (selected) select(selected);
    else draw();
  }

  function loadState() {
    try {
      const fromHash = decodeURIComponent(location.hash.slice(1));
      const saved = fromHash ? JSON.parse(fromHash) : JSON.parse(localStorage.getItem(stateKey) || "null");
      if (saved && Array.isArray(saved.pinned) && Array.isArray(saved.supernodes)) {
        hadSavedState = true;
        state.pinned = saved.pinned.filter((id) => nodeById.has(id));
        state.supernodes = saved.supernodes.filter((s) => s && typeof s.name === "string" && Array.isArray(s.members))
          .map((s) => ({ name: s.name, members: s.members, proposed: Boolean(s.proposed) }));
        return;
      }
    } catch (e) {
      /* an unreadable saved state: start from the file's */
    }
    state = stateOf(subgraphOf({ interp: data.interp, qParams: data.qParams }), proposedInFile());
  }

  // Replace the state (a graph file opened in the page) and show it.
  function setState(next) {
    state = next;
    saveState();
    if (selected) select(selected);
    else draw();
  }

  function saveState() {
    const text = JSON.stringify(state);
    history.replaceState(null, "", "#" + encodeURIComponent(text));
    try {
      localStorage.setItem(stateKey, text);
    } catch (e) {
      /* storage may be unavailable for file: pages; the address keeps the state */
    }
  }

  // layout: a column per position, a row per layer (tokens at the bottom, logits on top)
  const nLayers = data.n_layers;
  const nPos = data.metadata.prompt_tokens.length;
  const colW = 110, rowH = 70, pad = 40;
  const cells = new Map();
  function row(n) {
    const k = kind(n);
    return k === "token" ? 0 : k === "logit" ? nLayers + 1 : Number(n.layer) + 1;
  }
  for (const n of nodes) {
    const key = row(n) + ":" + n.ctx_idx;
    if (!cells.has(key)) cells.set(key, []);
    cells.get(key).push(n);
  }
  const pos = new Map();
  for (const [key, members] of cells) {
    const [r, c] = key.split(":").map(Number);
    members.forEach((n, i) => {
      const x = pad + c * colW + ((i + 1) * colW) / (members.length + 1);
      pos.set(n.uid, [x, pad + (nLayers + 1 - r) * rowH]);
    });
  }
  const plot = byId("graph");
  plot.setAttribute("width", pad * 2 + nPos * colW);
  plot.setAttribute("height", pad * 2 + (nLayers + 1) * rowH);
  const maxW = Math.max(1e-12, ...data.links.map((l) => Math.abs(l.weight)));
  const maxSize = Math.max(1e-12, ...nodes.map((n) => data.sizes[n.uid] || 0));
  const linkEls = [];
  for (const link of data.links) {
    const a = pos.get(link.source), b = pos.get(link.target);
    if (!a || !b) continue;
    const line = svg("line", {
      x1: a[0], y1: a[1], x2: b[0], y2: b[1],
      class: "link " + (link.weight >= 0 ? "pos" : "neg"),
      "data-source": link.source, "data-target": link.target,
      "stroke-width": (0.3 + 3 * Math.abs(link.weight) / maxW).toFixed(2),
      "stroke-opacity": (0.15 + 0.7 * Math.abs(link.weight) / maxW).toFixed(2),
    });
    linkEls.push([line, link]);
    plot.appendChild(line);
  }
  const nodeEls = new Map();
  for (const n of nodes) {
    const [x, y] = pos.get(n.uid);
    const r = 4 + 10 * Math.sqrt((data.sizes[n.uid] || 0) / maxSize);
    const c = svg("circle", { cx: x, cy: y, r: r.toFixed(1), class: "node " + kind(n), "data-id": n.uid });
    c.appendChild(svg("title", {}, title(n)));
    c.addEventListener("click", () => select(n.uid));
    nodeEls.set(n.uid, c);
    plot.appendChild(c);
  }
  for (let r = 0; r <= nLayers + 1; r++) {
    const name = r === 0 ? "tokens" : r === nLayers + 1 ? "logits" : "L" + (r - 1);
    plot.appendChild(svg("text", { x: 4, y: pad + (nLayers + 1 - r) * rowH + 4, class: "axis" }, name));
  }
  for (let p = 0; p < nPos; p++) {
    const t = svg("text", { x: pad + p * colW + colW / 2, y: pad * 2 + (nLayers + 1) * rowH - 8, class: "axis",
      "text-anchor": "middle" }, data.metadata.prompt_tokens[p]);
    plot.appendChild(t);
  }

  function table(title, links, other) {
    const box = el("div");
    box.appendChild(el("h2", {}, title));
    const t = el("table");
    const sorted = links.slice().sort((a, b) => Math.abs(b.weight) - Math.abs(a.weight)).slice(0, 10);
    for (const link of sorted) {
      const tr = el("tr");
      const name = el("td", {}, label(nodeById.get(link[other])));
      name.addEventListener("click", () => select(link[other]));
      tr.appendChild(name);
      tr.appendChild(el("td", { class: "w " + (link.weight >= 0 ? "pos" : "neg") }, link.weight.toPrecision(3)));
      t.appendChild(tr);
    }
    if (!sorted.length) box.appendChild(el("p", { class: "note" }, "none"));
    box.appendChild(t);
    return box;
  }

  function select(id) {
    selected = id;
    const n = nodeById.get(id);
    const box = clear(byId("details"));
    box.appendChild(el("h2", {}, label(n)));
    const facts = ["kind: " + kind(n)];
    if (label(n) !== place(n)) facts.unshift(place(n));
    if (n.activation !== null && n.activation !== undefined) facts.push("activation: " + n.activation.toPrecision(3));
    if (n.influence !== null && n.influence !== undefined) facts.push("cumulative influence: " + n.influence.toPrecision(3));
    box.appendChild(el("p", { class: "note" }, facts.join(" · ")));
    const group = state.supernodes.find((s) => s.members.includes(id));
    const pin = el("button", { id: "pin" }, group ? "pinned in supernode " + group.name :
      state.pinned.includes(id) ? "unpin" : "pin");
    if (group) pin.disabled = true;  // a member stays pinned until it leaves its supernode
    else pin.addEventListener("click", () => togglePin(id));
    box.appendChild(pin);
    const info = data.features[id];
    if (info && info.promotes && info.promotes.length) {
      box.appendChild(el("h2", {}, "Decoder promotes"));
      for (const tok of info.promotes) box.appendChild(el("span", { class: "chip mono" }, tok));
    }
    if (info && info.contexts && info.contexts.length) {
      box.appendChild(el("h2", {}, "Top activating contexts"));
      for (const ctx of info.contexts) box.appendChild(el("p", { class: "mono" }, ctx));
    }
    if (info && (info.dashboard || data.dashboards)) {
      box.appendChild(el("h2", {}, "Dashboard"));
      const dash = el("div", { id: "dashboard" });
      box.appendChild(dash);
      showDashboard(dash, id, info);
    }
    box.appendChild(table("Strongest inputs", inputs.get(id), "source"));
    box.appendChild(table("Strongest outputs", outputs.get(id), "target"));
    draw();
  }

  // The feature's full dashboard file when the folder is served; else (or if it cannot be read) the compact
  // one embedded in the page.
  function showDashboard(box, id, info) {
    const dash = window.interpDashboard;
    const offline = "Embedded summary (a few examples per group): serve this folder (python -m http.server) to " +
      "read the feature's full dashboard from " + data.dashboards + "/" + info.featureIndex + ".json.";
    function fallback(why) {
      if (info.dashboard) dash.render(box, info.dashboard, why || offline);
      else box.replaceChildren(el("p", { class: "note" }, why || "No dashboard of this feature is embedded."));
    }
    if (!data.dashboards || !served()) {
      fallback();
      return;
    }
    box.replaceChildren(el("p", { class: "note" }, "loading " + info.featureIndex + ".json"));
    dash.load(data.dashboards, info.featureIndex).then(
      (record) => { if (selected === id) dash.render(box, record); },
      (err) => { if (selected === id) fallback(info.featureIndex + ".json could not be read (" + err.message + ")"); }
    );
  }

  function togglePin(id) {
    const i = state.pinned.indexOf(id);
    if (i >= 0) state.pinned.splice(i, 1);
    else state.pinned.push(id);
    saveState();
    if (selected) select(selected);
    else draw();
  }

  function draw() {
    const pinnedSet = new Set(allPinned());
    for (const [id, c] of nodeEls) {
      c.classList.toggle("pinned", pinnedSet.has(id));
      c.classList.toggle("selected", id === selected);
    }
    for (const [line, link] of linkEls) {
      const inSub = !pinnedSet.size || (pinnedSet.has(link.source) && pinnedSet.has(link.target));
      line.style.display = inSub ? "" : "none";
    }
    const list = clear(byId("pin-list"));
    for (const id of pinnedSet) {
      const chip = el("span", { class: "chip", "data-id": id }, label(nodeById.get(id)));
      chip.addEventListener("click", () => select(id));
      list.appendChild(chip);
    }
    if (window.supernodeEditor) window.supernodeEditor.render();
  }

  byId("clear").addEventListener("click", () => setState({ pinned: [], supernodes: [] }));

  // the subgraph as a file `interp attribute --subgraph FILE` reads (Neuronpedia's qParams, interp's names)
  function subgraphJson() {
    return JSON.stringify({
      pinnedIds: allPinned(),
      supernodes: state.supernodes.map((s) => [s.name].concat(s.members)),
    });
  }

  // The pinned nodes, every supernode's members among them (the frontends group pinned nodes).
  function allPinned() {
    return Array.from(new Set(state.pinned.concat(...state.supernodes.map((s) => s.members))));
  }
  const exportButton = el("button", { id: "export" }, "download subgraph");
  exportButton.addEventListener("click", () => {
    const a = el("a", { href: "data:application/json," + encodeURIComponent(subgraphJson()),
      download: (data.metadata.slug || "graph") + "-subgraph.json" });
    a.click();
  });
  byId("clear").after(exportButton);

  const m = data.metadata;
  byId("summary").textContent =
    nodes.length + " nodes, " + data.links.length + " links (pruned at node threshold " + m.node_threshold +
    "); replacement score " + data.scores.replacement.toFixed(3) + ", completeness " +
    data.scores.completeness.toFixed(3);
  loadState();
  draw();
  window.graphViewer = {
    select, togglePin, state: () => state, setState, saveState, draw, subgraphJson, allPinned, subgraphOf, stateOf,
    label, nodeById, data, hadSavedState: () => hadSavedState, redrawLabels, selected: () => selected, kind,
  };
})();
