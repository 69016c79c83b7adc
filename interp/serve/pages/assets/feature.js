// A feature's page: GET /api/feature for its label, its scan's dashboard (drawn by dashboard.js from the feature's
// file) or, without one, what is known without a corpus; its activations on a prompt from /v1/activation/single.
(function () {
  "use strict";
  const { el, clear, byId } = window.interpDom;
  const api = window.interpWorkbench;
  const info = api.info();
  const source = api.param("source");
  const index = api.param("index");
  let feature = null;

  function facts(f) {
    byId("title").textContent = f.source + " · feature " + f.index;
    byId("label").textContent = f.label ? f.label.text : "no explanation in the named folders";
    byId("label").classList.toggle("note", !f.label);
    const where = f.label ? " · label from " + f.label.folder + "/" + f.label.file : "";
    byId("facts").textContent = "layer " + f.layer + " of source set " + f.set + " · featureIndex " +
      f.featureIndex + " · reads " + f.reads + " · writes " + f.writes.join(", ") + where;
    byId("steer-link").href = api.steerUrl(f.source, f.index, byId("prompt").value);
  }

  function decoder(f) {
    const live = f.live;
    const logits = clear(byId("logits"));
    if (live.promotes) {
      for (const [name, tokens] of [["promotes", live.promotes], ["suppresses", live.suppresses]]) {
        const row = el("p", { class: "chips", id: name });
        row.appendChild(el("b", {}, name + " "));
        for (const t of tokens) row.appendChild(el("span", { class: "chip mono" }, api.tokenText(t)));
        logits.appendChild(row);
      }
    } else {
      logits.appendChild(el("p", { class: "note" }, "No logits: " + live.why + "."));
    }
    const rows = live.neighbours.map((n) => [
      api.link(api.featureUrl(f.source, n.index, byId("prompt").value), "#" + n.index), api.fmt(n.cosine),
      n.label || "",
    ]);
    clear(byId("neighbours")).appendChild(api.table(["feature", "cosine", "label"], rows, { id: "neighbour-table" }));
  }

  function dashboard(f) {
    const note = byId("dash-note");
    const box = byId("dashboard");
    if (!f.dashboard) {
      note.textContent = "No scan of this dictionary in the named folders holds this feature. Shown instead, " +
        "computed now: the tokens its decoder promotes and suppresses, and its nearest features by decoder " +
        "(below). The examples where it fires most need a pass over a corpus: interp dashboards MODEL " +
        "--dictionary DIR --out OUT, then serve OUT with --folder.";
      box.dataset.state = "live";
      return Promise.resolve();
    }
    const d = f.dashboard;
    const folder = api.filesUrl(d.folder, d.path);
    note.textContent = "From scan " + d.scan + " in folder " + d.folder + " (" + d.path + "/" + f.featureIndex +
      ".json).";
    return window.interpDashboard.load(folder, f.featureIndex).then((record) => {
      window.interpDashboard.render(box, record);
      box.dataset.state = "scan";
    }).catch((err) => api.say(note, f.featureIndex + ".json could not be read (" + err.message + ")", true));
  }

  function read() {
    const prompt = byId("prompt").value;
    const status = byId("acts-status");
    if (!prompt.trim()) return Promise.resolve();
    api.remember({ source, index, prompt });
    if (feature) byId("steer-link").href = api.steerUrl(feature.source, feature.index, prompt);
    api.say(status, "reading");
    const body = { prompt, model: info.model_id, source, index: String(index) };
    return api.postJson("/v1/activation/single", body).then((found) => {
      const a = found.activation;
      const box = clear(byId("acts"));
      const top = Math.max(a.max_value, 1e-12);
      found.tokens.forEach((t, i) => {
        const v = a.values[i];
        const span = el("span", { class: "act-token", title: api.fmt(v), "data-value": String(v) }, t);
        if (v > 0) span.style.backgroundColor = "rgba(230, 126, 34, " + Math.min(1, 0.15 + 0.85 * v / top).toFixed(2) + ")";
        box.appendChild(span);
      });
      api.say(status, "largest " + api.fmt(a.max_value) + " at " + JSON.stringify(found.tokens[a.max_value_index]) +
        " (the BOS token is left out, as Neuronpedia reads it)");
    }).catch((err) => api.say(status, err.message, true));
  }

  byId("read").addEventListener("click", read);
  byId("prompt").value = api.param("prompt");
  const ready = api.getJson("/api/feature?source=" + encodeURIComponent(source) + "&index=" + encodeURIComponent(index))
    .then((f) => {
      feature = f;
      facts(f);
      decoder(f);
      return Promise.all([dashboard(f), read()]);
    }).catch((err) => api.say(byId("facts"), err.message, true));
  window.featurePage = { ready, read, feature: () => feature };
})();
