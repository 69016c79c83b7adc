// The viewer's live panel, on a page interp serve draws (its data block graph-live; an offline page has none and
// this script is not in it): choose feature nodes (the selected node, the pinned ones, or a supernode), ablate,
// scale or set them, and see the next token before and after, constrained (attention patterns, norms and every
// other feature held at their values on the prompt, as the graph's edges assume) or free (the whole model
// responds), and, if asked, the text generated with the edits; and trace a new graph of another prompt. Every
// string from the data or the server is put in with textContent, never as markup.
(function () {
  "use strict";
  const { el, clear, byId } = window.interpDom;
  const live = JSON.parse(byId("graph-live").textContent);
  const viewer = window.graphViewer;
  const api = window.interpWorkbench;
  const box = el("div", { id: "live" });
  byId("panel").prepend(box);
  box.appendChild(el("h2", {}, "Live interventions"));
  const home = el("p", { class: "note" });
  home.append("served by interp serve (" + live.model_id + ") · ", api.link(live.home, "workbench home"));
  box.appendChild(home);
  let last = null;

  // The feature nodes a choice names, and the other nodes it holds (errors and tokens are not edited).
  function chosen(target) {
    let ids = [];
    if (target === "selected") ids = viewer.selected() ? [viewer.selected()] : [];
    else if (target === "pinned") ids = viewer.allPinned();
    else if (target.startsWith("supernode:")) {
      const group = viewer.state().supernodes.find((s) => "supernode:" + s.name === target);
      ids = group ? group.members.slice() : [];
    }
    const known = ids.filter((id) => viewer.nodeById.has(id));
    const isFeature = (id) => viewer.kind(viewer.nodeById.get(id)) === "feature";
    return { features: known.filter(isFeature), others: known.filter((id) => !isFeature(id)) };
  }

  const target = el("select", { id: "live-target" });
  const describe = el("p", { class: "note", id: "live-nodes" });

  // The choices, with the supernodes the page has now.
  function refreshTargets() {
    const current = target.value;
    clear(target);
    target.appendChild(el("option", { value: "selected" }, "the selected node"));
    target.appendChild(el("option", { value: "pinned" }, "the pinned nodes"));
    for (const s of viewer.state().supernodes) {
      target.appendChild(el("option", { value: "supernode:" + s.name }, "supernode " + s.name));
    }
    if ([...target.options].some((o) => o.value === current)) target.value = current;
    showChoice();
  }

  function showChoice() {
    const { features, others } = chosen(target.value);
    const names = features.map((id) => viewer.label(viewer.nodeById.get(id)));
    let text = features.length ? features.length + " feature node" + (features.length > 1 ? "s" : "") + ": " +
      names.slice(0, 6).join(", ") + (names.length > 6 ? ", ..." : "") : "no feature node chosen";
    if (others.length) text += " (" + others.length + " error or token node" + (others.length > 1 ? "s" : "") +
      " left out: only features are edited)";
    describe.textContent = text;
  }

  function off(why) {
    box.appendChild(el("p", { class: "note error", id: "live-off" }, "Interventions are off: " + why + "."));
  }

  const op = el("select", { id: "live-op" });
  for (const [v, t] of [["ablate", "ablate (scale 0)"], ["scale", "scale by"], ["set", "set to"]]) {
    op.appendChild(el("option", { value: v }, t));
  }
  const amount = el("input", { id: "live-amount", type: "number", step: "any", value: "2" });
  const mode = el("select", { id: "live-mode" });
  mode.appendChild(el("option", { value: "free" }, "free: the whole model responds"));
  mode.appendChild(el("option", { value: "constrained" },
    "constrained: patterns, norms and other features held (the graph's linear world)"));
  const nTokens = el("input", { id: "live-tokens", type: "number", min: "0", max: String(live.max_new_tokens), value: "0" });
  const hold = el("input", { id: "live-hold", type: "checkbox" });
  const run = el("button", { id: "live-run", type: "button" }, "run");
  const status = el("p", { class: "note", id: "live-status" });
  const result = el("div", { id: "live-result" });

  function request() {
    const { features } = chosen(target.value);
    if (!features.length) throw new Error("choose feature nodes: select one, pin some, or group a supernode");
    const body = { tokens: live.tokens, nodes: features, constrained: mode.value === "constrained", top_k: 10,
      n_tokens: Number(nTokens.value) };
    if (body.n_tokens > 0) body.hold_attention = hold.checked;
    if (op.value === "ablate") body.scale = 0;
    else if (op.value === "scale") body.scale = Number(amount.value);
    else body.value = Number(amount.value);
    return body;
  }

  function show(found) {
    clear(result);
    result.appendChild(el("p", { class: "note" }, found.nodes.length + " node(s) edited, " + found.mode));
    result.appendChild(api.nextToken(found.next_token));
    if (found.generated) {
      const gen = el("div", { class: "side-by-side" });
      for (const [name, text] of [["default", found.generated.default], ["edited", found.generated.edited]]) {
        const div = el("div", { class: "output", id: "live-generated-" + name });
        div.append(el("h3", {}, name), el("pre", { class: "mono" }, text));
        gen.appendChild(div);
      }
      result.appendChild(gen);
    }
  }

  function go() {
    const body = api.built(request, status);
    if (body === null) return Promise.resolve();
    run.disabled = true;
    api.say(status, "running");
    return api.postJson(live.intervene, body).then((found) => {
      last = { request: body, answer: found };
      api.say(status, "done");
      show(found);
    }).catch((err) => api.say(status, err.message, true)).finally(() => { run.disabled = false; });
  }

  if (live.on) {
    const line = (...parts) => {
      const p = el("p");
      p.append(...parts);
      box.appendChild(p);
    };
    const label = (text, input) => {
      const l = el("label", {}, text);
      l.appendChild(input);
      return l;
    };
    line(label("edit ", target));
    box.appendChild(describe);
    line(label("", op), " ", amount);
    line(label("", mode));
    line(label("generate ", nTokens), " tokens ", label(" ", hold), " hold the prompt's attention");
    line(run);
    box.append(status, result);
    target.addEventListener("focus", refreshTargets);
    target.addEventListener("change", showChoice);
    op.addEventListener("change", () => { amount.disabled = op.value === "ablate"; });
    amount.disabled = true;
    run.addEventListener("click", go);
    for (const node of document.querySelectorAll("svg .node")) node.addEventListener("click", showChoice);
    refreshTargets();
  } else {
    off(live.why);
  }

  if (live.trace && window.interpTrace) {
    const traceBox = el("div", { id: "live-trace" });
    traceBox.appendChild(el("h2", {}, "Trace a new graph"));
    box.appendChild(traceBox);
    window.interpTrace.form(traceBox, { model_id: live.model_id, max_feature_nodes: live.max_feature_nodes,
      url: live.trace, prompt: viewer.data.metadata.prompt || "" });
  }

  window.graphLive = { run: go, refreshTargets, chosen, last: () => last };
})();
