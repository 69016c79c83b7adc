// The prompt page: POST /api/prompt, then one row per token with its strongest features of the chosen source set,
// each a link to the feature's page (with the prompt, so that the page shows its activations there).
(function () {
  "use strict";
  const { el, clear, byId } = window.interpDom;
  const api = window.interpWorkbench;
  const info = api.info();
  const set = byId("set");
  for (const s of info.sets) set.appendChild(el("option", { value: s.name }, s.name));
  const status = byId("status");
  let last = null;

  function chip(f, prompt) {
    const a = api.link(api.featureUrl(f.source, f.index, prompt), "", { class: "feature", "data-source": f.source,
      "data-index": String(f.index) });
    a.append(el("b", {}, f.source + " #" + f.index), " " + api.fmt(f.value));
    if (f.label) a.append(" ", el("span", { class: "label" }, f.label));
    return a;
  }

  function show(found, prompt) {
    const box = clear(byId("result"));
    const rows = [];
    found.tokens.forEach((t, p) => {
      if (p === 0 && found.special[0] && !byId("show-bos").checked) return;
      const cell = el("div", { class: "chips" });
      for (const f of found.positions[p]) cell.appendChild(chip(f, prompt));
      if (!found.positions[p].length) cell.appendChild(el("span", { class: "note" }, "no feature fires"));
      rows.push([el("span", { class: "mono token" }, api.tokenText(t)), String(p), cell]);
    });
    box.appendChild(api.table(["token", "position", "features (activation, label)"], rows, { id: "features" }));
  }

  function run() {
    const prompt = byId("prompt").value;
    const body = { prompt, source_set: set.value, top_k: Number(byId("top-k").value) };
    api.remember({ prompt, set: set.value, k: body.top_k });
    api.say(status, "reading " + set.value + " on the prompt");
    return api.postJson("/api/prompt", body).then((found) => {
      last = found;
      api.say(status, found.tokens.length + " tokens");
      show(found, prompt);
    }).catch((err) => api.say(status, err.message, true));
  }

  byId("go").addEventListener("click", run);
  byId("show-bos").addEventListener("change", () => { if (last) show(last, byId("prompt").value); });
  if (!info.sets.length) api.say(status, "this server serves no dictionary (interp serve MODEL --dictionary DIR)", true);
  byId("prompt").value = api.param("prompt");
  if (api.param("set")) set.value = api.param("set");
  if (api.param("k")) byId("top-k").value = api.param("k");
  if (api.param("prompt") && info.sets.length) run();
  window.promptPage = { run, last: () => last };
})();
