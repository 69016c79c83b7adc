// The dashboard page of one dictionary: every feature listed by density (a page of rows at a time), search by
// layer and index, and the chosen feature's dashboard, embedded or, when the folder is served, read from its
// file. Every string is put in with textContent.
(function () {
  "use strict";
  var dash = window.interpDashboard;
  var el = dash.el;
  var data = JSON.parse(document.getElementById("dashboard-data").textContent);
  var f = data.features;
  var n = f.layer.length;
  var PAGE = 200;
  var shown = [];
  var limit = PAGE;
  var selected = null;

  function cantor(layer, feature) {
    return (layer + feature) * (layer + feature + 1) / 2 + feature;
  }

  function filter(layer) {
    shown = [];
    for (var i = 0; i < n; i++) if (layer === null || f.layer[i] === layer) shown.push(i);
    limit = PAGE;
    draw();
  }

  function draw() {
    var body = document.querySelector("#features tbody");
    body.replaceChildren();
    shown.slice(0, limit).forEach(function (i) {
      var tr = el("tr", { "data-index": String(cantor(f.layer[i], f.feature[i])) });
      [f.layer[i], f.feature[i], (100 * f.density[i]).toPrecision(3) + "%", Number(f.act_max[i].toPrecision(3))].forEach(function (v) {
        tr.appendChild(el("td", {}, String(v)));
      });
      if (selected === i) tr.classList.add("selected");
      tr.addEventListener("click", function () { show(i); });
      body.appendChild(tr);
    });
    document.getElementById("more").style.display = shown.length > limit ? "" : "none";
    document.getElementById("list-note").textContent = "showing " + Math.min(limit, shown.length) + " of " +
      shown.length + " features";
  }

  function show(i) {
    selected = i;
    var index = cantor(f.layer[i], f.feature[i]);
    var box = document.getElementById("dashboard");
    var embedded = data.records[String(index)];
    draw();
    if (dash.served()) {
      box.replaceChildren(el("p", { class: "dash-note" }, "loading " + index + ".json"));
      dash.load(".", index).then(function (record) {
        if (selected === i) dash.render(box, record);
      }, function (err) {
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
    for (var i = 0; i < n; i++) if (f.layer[i] === layer && f.feature[i] === feature) return i;
    return -1;
  }

  document.getElementById("search").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var layerText = document.getElementById("layer").value;
    var featureText = document.getElementById("feature").value;
    var layer = layerText === "" ? null : Number(layerText);
    filter(layer);
    if (layer !== null && featureText !== "") {
      var i = find(layer, Number(featureText));
      if (i >= 0) show(i);
      else document.getElementById("dashboard").replaceChildren(el("p", { class: "dash-note" },
        "No feature " + featureText + " at layer " + layerText + " was written."));
    }
  });
  document.getElementById("reset").addEventListener("click", function () { filter(null); });
  document.getElementById("more").addEventListener("click", function () { limit += PAGE; draw(); });
  document.getElementById("summary").textContent = n + " features of " + data.dictionary + " over " + data.n_tokens +
    " tokens; " + Object.keys(data.records).length + " dashboards embedded" + (dash.served() ? "; others read from their files" : "");
  filter(null);
  window.dashboardPage = { show: show, find: find, filter: filter };
})();
