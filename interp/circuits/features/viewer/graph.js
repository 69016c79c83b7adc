// The offline attribution-graph viewer. Every string from the data is put in with textContent, never as markup.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("graph-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const nodes = data.nodes;
  const byId = new Map(nodes.map((n) => [n.uid, n]));
  const inputs = new Map(nodes.map((n) => [n.uid, []]));
  const outputs = new Map(nodes.map((n) => [n.uid, []]));
  for (const link of data.links) {
    if (!byId.has(link.source) || !byId.has(link.target)) continue;
    inputs.get(link.target).push(link);
    outputs.get(link.source).push(link);
  }
  const stateKey = "interp-graph:" + (data.metadata.slug || "graph");
  let state = { pinned: [], supernodes: [] };
  let selected = null;

  function el(tag, attrs, text) {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function kind(n) {
    return { embedding: "token", logit: "logit", "mlp reconstruction error": "error" }[n.feature_type] || "feature";
  }

  function label(n) {
    const k = kind(n);
    const tokens = data.metadata.prompt_tokens;
    if (k === "token") return "token " + JSON.stringify(tokens[n.ctx_idx] || "");
    if (k === "logit") return n.clerp;
    if (k === "error") return "error L" + n.layer + " @" + n.ctx_idx;
    return "L" + n.layer + " F" + (data.features[n.uid] || {}).index + " @" + n.ctx_idx;
  }

  function loadState() {
    try {
      const fromHash = decodeURIComponent(location.hash.slice(1));
      const saved = fromHash ? JSON.parse(fromHash) : JSON.parse(localStorage.getItem(stateKey) || "null");
      const file = data.interp && data.interp.subgraph;  // the subgraph saved in the graph file
      const seed = saved || (file && {
        pinned: file.pinned,
        supernodes: file.supernodes.map((s) => ({ name: s[0], members: s.slice(1) })),
      });
      if (seed && Array.isArray(seed.pinned) && Array.isArray(seed.supernodes)) {
        state.pinned = seed.pinned.filter((id) => byId.has(id));
        state.supernodes = seed.supernodes.filter((s) => s && Array.isArray(s.members));
      }
    } catch (e) {
      state = { pinned: [], supernodes: [] };
    }
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
  const svg = document.getElementById("graph");
  svg.setAttribute("width", pad * 2 + nPos * colW);
  svg.setAttribute("height", pad * 2 + (nLayers + 1) * rowH);
  const maxW = Math.max(1e-12, ...data.links.map((l) => Math.abs(l.weight)));
  const maxSize = Math.max(1e-12, ...nodes.map((n) => data.sizes[n.uid] || 0));
  const linkEls = [];
  for (const link of data.links) {
    const a = pos.get(link.source), b = pos.get(link.target);
    if (!a || !b) continue;
    const line = el("svg:line", {
      x1: a[0], y1: a[1], x2: b[0], y2: b[1],
      class: "link " + (link.weight >= 0 ? "pos" : "neg"),
      "data-source": link.source, "data-target": link.target,
      "stroke-width": (0.3 + 3 * Math.abs(link.weight) / maxW).toFixed(2),
      "stroke-opacity": (0.15 + 0.7 * Math.abs(link.weight) / maxW).toFixed(2),
    });
    linkEls.push([line, link]);
    svg.appendChild(line);
  }
  const nodeEls = new Map();
  for (const n of nodes) {
    const [x, y] = pos.get(n.uid);
    const r = 4 + 10 * Math.sqrt((data.sizes[n.uid] || 0) / maxSize);
    const c = el("svg:circle", { cx: x, cy: y, r: r.toFixed(1), class: "node " + kind(n), "data-id": n.uid });
    c.appendChild(el("svg:title", {}, label(n)));
    c.addEventListener("click", () => select(n.uid));
    nodeEls.set(n.uid, c);
    svg.appendChild(c);
  }
  for (let r = 0; r <= nLayers + 1; r++) {
    const name = r === 0 ? "tokens" : r === nLayers + 1 ? "logits" : "L" + (r - 1);
    svg.appendChild(el("svg:text", { x: 4, y: pad + (nLayers + 1 - r) * rowH + 4, class: "axis" }, name));
  }
  for (let p = 0; p < nPos; p++) {
    const t = el("svg:text", { x: pad + p * colW + colW / 2, y: pad * 2 + (nLayers + 1) * rowH - 8, class: "axis",
      "text-anchor": "middle" }, data.metadata.prompt_tokens[p]);
    svg.appendChild(t);
  }

  function table(title, links, other) {
    const box = el("div");
    box.appendChild(el("h2", {}, title));
    const t = el("table");
    const sorted = links.slice().sort((a, b) => Math.abs(b.weight) - Math.abs(a.weight)).slice(0, 10);
    for (const link of sorted) {
      const tr = el("tr");
      const name = el("td", {}, label(byId.get(link[other])));
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
    const n = byId.get(id);
    const box = document.getElementById("details");
    box.replaceChildren();
    box.appendChild(el("h2", {}, label(n)));
    const facts = ["kind: " + kind(n)];
    if (n.activation !== null && n.activation !== undefined) facts.push("activation: " + n.activation.toPrecision(3));
    if (n.influence !== null && n.influence !== undefined) facts.push("cumulative influence: " + n.influence.toPrecision(3));
    box.appendChild(el("p", { class: "note" }, facts.join(" · ")));
    const pin = el("button", { id: "pin" }, state.pinned.includes(id) ? "unpin" : "pin");
    pin.addEventListener("click", () => togglePin(id));
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
    if (!data.dashboards || !dash.served()) {
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
    for (const [id, c] of nodeEls) {
      c.classList.toggle("pinned", state.pinned.includes(id));
      c.classList.toggle("selected", id === selected);
    }
    const pinnedSet = new Set(state.pinned);
    for (const [line, link] of linkEls) {
      const inSub = !pinnedSet.size || (pinnedSet.has(link.source) && pinnedSet.has(link.target));
      line.style.display = inSub ? "" : "none";
    }
    const list = document.getElementById("pin-list");
    list.replaceChildren();
    for (const id of state.pinned) {
      const chip = el("span", { class: "chip", "data-id": id }, label(byId.get(id)));
      chip.addEventListener("click", () => select(id));
      list.appendChild(chip);
    }
    const sn = document.getElementById("supernodes");
    sn.replaceChildren();
    for (const s of state.supernodes) {
      const p = el("p");
      p.appendChild(el("b", {}, s.name + ": "));
      p.appendChild(document.createTextNode(s.members.map((m) => (byId.has(m) ? label(byId.get(m)) : m)).join(", ")));
      sn.appendChild(p);
    }
  }

  document.getElementById("group").addEventListener("click", () => {
    if (!state.pinned.length) return;
    const name = document.getElementById("group-name").value.trim() || "supernode " + (state.supernodes.length + 1);
    state.supernodes.push({ name: name, members: state.pinned.slice() });
    saveState();
    draw();
  });
  document.getElementById("clear").addEventListener("click", () => {
    state = { pinned: [], supernodes: [] };
    saveState();
    draw();
  });

  // the subgraph as a file `interp attribute --subgraph FILE` reads (Neuronpedia's qParams, interp's names)
  function subgraphJson() {
    return JSON.stringify({
      pinnedIds: state.pinned,
      supernodes: state.supernodes.map((s) => [s.name].concat(s.members)),
    });
  }
  const exportButton = el("button", { id: "export" }, "download subgraph");
  exportButton.addEventListener("click", () => {
    const a = el("a", { href: "data:application/json," + encodeURIComponent(subgraphJson()),
      download: (data.metadata.slug || "graph") + "-subgraph.json" });
    a.click();
  });
  document.getElementById("clear").after(exportButton);

  const m = data.metadata;
  document.getElementById("summary").textContent =
    nodes.length + " nodes, " + data.links.length + " links (pruned at node threshold " + m.node_threshold +
    "); replacement score " + data.scores.replacement.toFixed(3) + ", completeness " +
    data.scores.completeness.toFixed(3);
  loadState();
  draw();
  window.graphViewer = { select: select, togglePin: togglePin, state: () => state, subgraphJson: subgraphJson };
})();
