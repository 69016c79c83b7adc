// Feature search: GET /api/search, by words or by meaning; each result opens its feature's page (a served
// dictionary's) or its scan's dashboards (another's).
(function () {
  "use strict";
  const { clear, byId } = window.interpDom;
  const api = window.interpWorkbench;
  const status = byId("status");
  let last = null;

  const mode = () => (byId("mode-meaning").checked ? "meaning" : "text");

  function where(r) {
    if (r.source) return api.link(api.featureUrl(r.source, r.index), r.source + " #" + r.index, { class: "feature" });
    const path = r.file.split("/").slice(0, -1).concat(["features", r.scan, ""]).join("/");
    return api.link(api.filesUrl(r.folder, path), "scan " + r.scan + " L" + r.layer + " #" + r.index + " (not served)");
  }

  function run() {
    const q = byId("query").value;
    api.remember({ q, mode: mode() });
    api.say(status, mode() === "meaning" ? "searching by meaning" : "searching");
    const url = "/api/search?q=" + encodeURIComponent(q) + "&mode=" + mode();
    return api.getJson(url).then((found) => {
      last = found;
      api.say(status, found.results.length + " of " + found.n_labels + " labels" +
        (found.mode === "meaning" ? ", by cosine similarity to the query" : ", holding every word"));
      const rows = found.results.map((r) => [r.text, where(r), api.fmt(r.score), r.kind, r.folder + "/" + r.file]);
      clear(byId("results")).appendChild(api.table(["label", "feature", "score", "kind", "from"], rows,
        { id: "result-table" }));
    }).catch((err) => api.say(status, err.message, true));
  }

  byId("go").addEventListener("click", run);
  byId("query").addEventListener("keydown", (e) => { if (e.key === "Enter") run(); });
  byId("query").value = api.param("q");
  if (api.param("mode") === "meaning") byId("mode-meaning").checked = true;
  if (api.param("q")) run();
  window.searchPage = { run, last: () => last };
})();
