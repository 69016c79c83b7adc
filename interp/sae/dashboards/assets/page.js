// The dashboard page of one dictionary: every feature listed by density (a page of rows at a time), search by
// layer and index, and the chosen feature's dashboard, embedded or, when the folder is served, read from its
// file. Every string is put in with textContent.
(function () {
  "use strict";
  const { el, clear, byId, served } = window.interpDom;
  const featureId = window.interpFeatureId;
  const dash = window.interpDashboard;
  const data = JSON.parse(byId("dashboard-data").textContent);
  const f = data.features;
  const n = f.layer.length;
  const PAGE = 200;
  let shown = [];
  let limit = PAGE;
  let selected = null;

  function filter(layer) {
    shown = [];
    for (let i = 0; i < n; i++) if (layer === null || f.layer[i] === layer) shown.push(i);
    limit = PAGE;
    draw();
  }

  function draw() {
    const body = clear(document.querySelector("#features tbody"));
    for (const i of shown.slice(0, limit)) {
      const tr = el("tr", { "data-index": String(featureId.index(f.layer[i], f.feature[i])) });
      for (const v of [f.layer[i], f.feature[i], (100 * f.density[i]).toPrecision(3) + "%", Number(f.act_max[i].toPrecision(3))]) {
        tr.appendChild(el("td", {}, String(v)));
      }
      if (selected === i) tr.classList.add("selected");
      tr.addEventListener("click", () => show(i));
      body.appendChild(tr);
    }
    byId("more").style.display = shown.length > limit ? "" : "none";
    byId("list-note").textContent = "showing " + Math.min(limit, shown.length) + " of " +
      shown.length + " features";
  }

  function show(i) {
    selected = i;
    const index = featureId.index(f.layer[i], f.feature[i]);
    const box = byId("dashboard");
    const embedded = data.records[String(index)];
    draw();
    if (served()) {
      box.replaceChildren(el("p", { class: "dash-note" }, "loading " + index + ".json"));
      dash.load(".", index).then((record) => {
        if (selected === i) dash.render(box, record);
      }, (err) => {
        if (selected !== i) return;
        if (embedded) dash.render(box, embedded, "The full file could not be read (" + err.message + "); this is the embedded summary.");
        else box.replaceChildren(el("p", { class: "dash-note" }, index + ".json could not be read: " + err.message));
      });
      return;
    }
    if (embedded) {
      dash.render(box, embedded, data.compact_note);
    } else {
      box.replaceChildren(el("p", { class: "dash-note" }, "The dashboard of this feature is in " + index +
        ".json beside this page. A page opened from a file may not read other files: serve this folder " +
        "(python -m http.server) and open it over http to see every feature."));
    }
  }

  function find(layer, feature) {
    for (let i = 0; i < n; i++) if (f.layer[i] === layer && f.feature[i] === feature) return i;
    return -1;
  }

  byId("search").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const layerText = byId("layer").value;
    const featureText = byId("feature").value;
    const layer = layerText === "" ? null : Number(layerText);
    filter(layer);
    if (layer !== null && featureText !== "") {
      const i = find(layer, Number(featureText));
      if (i >= 0) show(i);
      else byId("dashboard").replaceChildren(el("p", { class: "dash-note" },
        "No feature " + featureText + " at layer " + layerText + " was written."));
    }
  });
  byId("reset").addEventListener("click", () => filter(null));
  byId("more").addEventListener("click", () => { limit += PAGE; draw(); });
  byId("summary").textContent = n + " features of " + data.dictionary + " over " + data.n_tokens +
    " tokens; " + Object.keys(data.records).length + " dashboards embedded" + (served() ? "; others read from their files" : "");
  filter(null);
  window.dashboardPage = { show, find, filter };
})();
