// The home page: the model and its source sets, a form that traces a new graph, and what each named folder holds
// (graphs, dashboard scans, reports, other pages, explanations), each opening from the server.
(function () {
  "use strict";
  const { el, byId } = window.interpDom;
  const api = window.interpWorkbench;
  const info = api.info();
  const catalogue = api.pageData();

  function about() {
    const box = byId("about");
    if (!info.sets.length) {
      box.appendChild(el("p", { class: "note" }, "No dictionary is served (interp serve MODEL --dictionary DIR)."));
    }
    const rows = info.sets.map((s) => {
      const layers = s.sources.map((src) => src.layer);
      const widths = Array.from(new Set(s.sources.map((src) => src.n_features)));
      const use = s.name === info.transcoders ? "traces graphs" : "";
      return [s.name, layers.join(", "), widths.join(", "), s.sources[0].reads, use];
    });
    if (rows.length) box.appendChild(api.table(["source set", "layers", "features", "reads (first)", ""], rows,
      { id: "sets" }));
    const go = el("p");
    go.append(api.link("/prompt", "features of a prompt"), " · ", api.link("/search", "search the explanations"),
      " · ", api.link("/steer", "steer"));
    box.appendChild(go);
  }

  function graphs(folder) {
    return folder.graphs.map((g) => {
      const open = el("span");
      if (g.page) open.append(api.link(api.liveUrl(folder.name, g.folder), "open live", { class: "live" }), " · ",
        api.link(api.filesUrl(folder.name, g.folder === "." ? "" : g.folder + "/"), "offline page"), " · ");
      open.appendChild(api.link(api.filesUrl(folder.name, (g.folder === "." ? "" : g.folder + "/") + g.file),
        "graph file"));
      return [g.slug, g.prompt || "", open];
    });
  }

  function scans(folder) {
    return folder.scans.map((s) => [
      api.link(api.filesUrl(folder.name, s.folder + "/"), s.scan), s.set ? s.set : "(not a served dictionary)",
      s.complete ? "finished" : "still writing",
    ]);
  }

  function section(title, head, rows, id) {
    if (!rows.length) return null;
    const div = el("div", { class: "listing", id });
    div.append(el("h3", {}, title), api.table(head, rows));
    return div;
  }

  function folders() {
    const box = byId("folders");
    if (!catalogue.folders.length) {
      box.appendChild(el("p", { class: "note" }, "No folder is served (interp serve MODEL --folder DIR)."));
      return;
    }
    for (const f of catalogue.folders) {
      const div = el("div", { class: "folder", "data-folder": f.name });
      div.appendChild(el("h2", {}, "Folder " + f.name));
      const parts = [
        section("Graphs", ["graph", "prompt", ""], graphs(f), "graphs-" + f.name),
        section("Dashboards", ["scan", "source set", ""], scans(f), "scans-" + f.name),
        section("Reports", ["report", "folder"], f.reports.map((r) => [
          api.link(api.filesUrl(f.name, r.folder + "/"), r.title || r.folder), r.folder]), "reports-" + f.name),
        section("Pages", ["page", "file"], f.pages.map((p) => [
          api.link(api.filesUrl(f.name, (p.folder === "." ? "" : p.folder + "/") + p.file), p.title || p.file),
          p.file]), "pages-" + f.name),
        section("Explanations", ["file", ""], f.explanations.map((x) => [
          api.link(api.filesUrl(f.name, (x.folder === "." ? "" : x.folder + "/") + x.file), x.folder + "/" + x.file),
          api.link("/search", "search them")]), "explanations-" + f.name),
      ].filter(Boolean);
      if (!parts.length) div.appendChild(el("p", { class: "note" }, "nothing interp wrote"));
      div.append(...parts);
      box.appendChild(div);
    }
  }

  about();
  if (info.graphs) {
    const box = byId("trace-box");
    box.hidden = false;
    window.interpTrace.form(box, { model_id: info.model_id, max_feature_nodes: info.limits.max_feature_nodes,
      url: "/api/trace" });
  }
  folders();
})();
