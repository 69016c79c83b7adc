// The page and its graph file (SLUG.json): open the file to read its labels and subgraph into the page, and save
// the page's pinned nodes and supernodes into it. The page embeds a bounded, rounded copy of the graph, so the
// file written is the graph file itself with only its subgraph replaced: qParams.pinnedIds and
// qParams.supernodes (Neuronpedia ids, as both frontends read them), the interp extension's subgraph (interp's
// names) and the names of the proposals still awaiting a decision. Served over http, the page reads the file
// beside it when it opens; from the file system a browser lets it read only a file the reader chooses.
(function () {
  "use strict";
  const { el, byId, served, readJson } = window.interpDom;
  const viewer = window.graphViewer;
  const data = viewer.data;
  const slug = data.metadata.slug || "graph";
  const fileName = slug + ".json";
  let base = null;  // the graph file, parsed, once opened or fetched

  const box = el("div", { id: "graph-file-box" });
  box.appendChild(el("h2", {}, "Graph file"));
  const input = el("input", { type: "file", id: "graph-file", accept: ".json,application/json" });
  // the file to write into, chosen when the save button needs it (opened from the file system); the page's
  // state is kept
  const into = el("input", { type: "file", id: "graph-file-into", accept: ".json,application/json",
    class: "offscreen" });
  const save = el("button", { id: "save-graph" }, "download " + fileName);
  const status = el("p", { class: "note", id: "graph-file-status" },
    "Open " + fileName + " to read its labels and subgraph into the page; download it with the page's subgraph.");
  const openLabel = el("label", {}, "open " + fileName + ": ");
  openLabel.appendChild(input);
  box.append(openLabel, el("br"), save, into, status);
  byId("pins").after(box);

  // A graph file of this page's graph, or why not.
  function check(doc) {
    if (!doc || typeof doc !== "object" || !Array.isArray(doc.nodes) || !doc.metadata) {
      return "not a graph file: it has no metadata and nodes";
    }
    if (doc.metadata.slug !== data.metadata.slug) {
      return "this file holds graph " + JSON.stringify(doc.metadata.slug) + "; the page shows " + JSON.stringify(slug);
    }
    return null;
  }

  // The file's labels and (unless the page kept a state of its own, when ``keepState``) its subgraph.
  function adopt(doc, keepState) {
    const bad = check(doc);
    if (bad) throw new Error(bad);
    base = doc;
    const byNodeId = new Map(doc.nodes.map((n) => [n.uid || n.node_id, n]));
    for (const n of data.nodes) {
      const found = byNodeId.get(n.uid) || byNodeId.get(n.node_id);
      if (found && typeof found.clerp === "string") n.clerp = found.clerp;
    }
    if (!keepState) {
      const criterion = doc.interp && doc.interp.supernode_criterion;
      viewer.setState(viewer.stateOf(viewer.subgraphOf(doc), new Set((criterion && criterion.proposed) || [])));
    }
    viewer.redrawLabels();
  }

  // ``doc`` with the page's subgraph; nothing else changes.
  function withSubgraph(doc) {
    const out = JSON.parse(JSON.stringify(doc));
    const ids = new Map(data.nodes.map((n) => [n.uid, n.node_id]));
    for (const n of out.nodes) if (n.uid) ids.set(n.uid, n.node_id);
    const id = (name) => {
      if (!ids.has(name)) throw new Error("node " + name + " is not in " + fileName);
      return ids.get(name);
    };
    const state = viewer.state();
    const pinned = viewer.allPinned();
    const groups = state.supernodes.map((s) => [s.name].concat(s.members));
    out.qParams = out.qParams || {};
    out.qParams.pinnedIds = pinned.map(id);
    out.qParams.supernodes = groups.map((g) => [g[0]].concat(g.slice(1).map(id)));
    out.interp = out.interp || { version: 1 };
    out.interp.subgraph = { pinned, supernodes: groups };
    const proposed = state.supernodes.filter((s) => s.proposed).map((s) => s.name);
    if (out.interp.supernode_criterion) out.interp.supernode_criterion.proposed = proposed;
    else if (proposed.length) out.interp.supernode_criterion = { proposed };
    return out;
  }

  function savedText() {
    if (!base) throw new Error("open " + fileName + " first: the page holds only a bounded copy of the graph");
    return JSON.stringify(withSubgraph(base)) + "\n";
  }

  function download(text, name) {
    const url = window.URL.createObjectURL(new window.Blob([text], { type: "application/json" }));
    const a = el("a", { href: url, download: name });
    a.click();
    window.setTimeout(() => window.URL.revokeObjectURL(url), 1000);
  }

  // Read the file chosen in ``chooser``, adopt it, then ``then()``; a refusal is said in the status line.
  function read(chooser, keepState, then) {
    const file = chooser.files[0];
    if (!file) return;
    file.text().then((text) => {
      adopt(JSON.parse(text), keepState);
      then(file.name);
    }).catch((err) => { status.textContent = file.name + ": " + err.message; });
    chooser.value = "";
  }

  function saveNow() {
    try {
      api.download(savedText(), fileName);
      status.textContent = "downloaded " + fileName + " with this page's subgraph";
    } catch (err) {
      status.textContent = err.message;
    }
  }

  input.addEventListener("change", () => read(input, false, (name) => {
    status.textContent = "opened " + name + ": its labels and subgraph are shown";
  }));
  into.addEventListener("change", () => read(into, true, saveNow));
  save.addEventListener("click", () => {
    if (base) {
      saveNow();
      return;
    }
    status.textContent = "choose " + fileName + " to write this page's subgraph into (the page holds only a " +
      "bounded copy of the graph)";
    into.click();
  });

  if (served()) {
    readJson(fileName).then((doc) => {
      adopt(doc, viewer.hadSavedState());
      status.textContent = "read " + fileName + " beside this page";
    }).catch((err) => { status.textContent = fileName + " could not be read (" + err.message + ")"; });
  }

  const api = { withSubgraph, savedText, download, adopt, loaded: () => base !== null };
  window.graphFile = api;
})();
