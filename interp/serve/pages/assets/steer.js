// The steering page: features (by source and index) or a vector, a strength, and POST /api/steer (Neuronpedia's
// steering request): the default and the steered completion side by side, and how the next token's logits move.
(function () {
  "use strict";
  const { el, clear, byId } = window.interpDom;
  const api = window.interpWorkbench;
  const info = api.info();
  const status = byId("status");
  const sources = info.sets.flatMap((s) => s.sources.map((src) => src.name));
  let last = null;

  function addRow(source, index, strength) {
    const row = el("p", { class: "feature-row" });
    const pick = el("select", { class: "source" });
    for (const name of sources) pick.appendChild(el("option", { value: name }, name));
    if (source) pick.value = source;
    const feature = el("input", { class: "index", type: "number", min: "0", value: index === undefined ? "0" : String(index) });
    const amount = el("input", { class: "strength", type: "number", step: "any", value: String(strength === undefined ? 4 : strength) });
    const remove = el("button", { type: "button", class: "remove" }, "remove");
    remove.addEventListener("click", () => row.remove());
    const l1 = el("label", {}, "source "), l2 = el("label", {}, " feature "), l3 = el("label", {}, " strength ");
    l1.appendChild(pick);
    l2.appendChild(feature);
    l3.appendChild(amount);
    row.append(l1, l2, l3, " ", remove);
    byId("feature-rows").appendChild(row);
  }

  function toggle() {
    byId("features-box").hidden = byId("with-vector").checked;
    byId("vector-box").hidden = !byId("with-vector").checked;
  }

  function request() {
    const prompt = byId("prompt").value;
    const body = {
      prompt, model: info.model_id, steer_method: byId("method").value, normalize_steering: byId("normalize").checked,
      types: ["STEERED", "DEFAULT"], n_completion_tokens: Number(byId("n-tokens").value), temperature: 0,
      strength_multiplier: 1, freq_penalty: 0, seed: 0,
    };
    if (byId("with-vector").checked) {
      let vector;
      try {
        vector = JSON.parse(byId("vector").value);
      } catch (err) {
        throw new Error("the vector is not a JSON list of numbers (" + err.message + ")", { cause: err });
      }
      body.vectors = [{ hook: byId("hook").value.trim(), steering_vector: vector,
        strength: Number(byId("vector-strength").value) }];
    } else {
      body.features = [...byId("feature-rows").querySelectorAll(".feature-row")].map((row) => ({
        model: info.model_id, source: row.querySelector(".source").value,
        index: Number(row.querySelector(".index").value), strength: Number(row.querySelector(".strength").value),
      }));
    }
    return body;
  }

  function show(found) {
    const box = clear(byId("outputs"));
    for (const kind of ["DEFAULT", "STEERED"]) {
      const out = found.outputs.find((o) => o.type === kind);
      const div = el("div", { class: "output", id: "output-" + kind.toLowerCase() });
      div.append(el("h3", {}, kind === "DEFAULT" ? "default" : "steered"), el("pre", { class: "mono" }, out.output));
      box.appendChild(div);
    }
    const logits = clear(byId("logits"));
    logits.appendChild(el("h2", {}, "The next token after the prompt"));
    logits.appendChild(api.nextToken(found.next_token));
  }

  function run() {
    const body = api.built(request, status);
    if (body === null) return Promise.resolve();
    const first = body.features && body.features[0];
    api.remember({ prompt: body.prompt, source: first && first.source, index: first && first.index,
      strength: first && first.strength });
    api.say(status, "generating, default and steered");
    return api.postJson("/api/steer", { completion: body, top_k: 10 }).then((found) => {
      last = found;
      api.say(status, "done");
      show(found);
    }).catch((err) => api.say(status, err.message, true));
  }

  byId("add").addEventListener("click", () => addRow());
  byId("with-features").addEventListener("change", toggle);
  byId("with-vector").addEventListener("change", toggle);
  byId("go").addEventListener("click", run);
  byId("prompt").value = api.param("prompt");
  const strength = api.param("strength");
  addRow(api.param("source") || sources[0], api.param("index") || 0, strength === "" ? undefined : Number(strength));
  if (!sources.length) api.say(status, "this server serves no dictionary: steer with a vector", true);
  window.steerPage = { run, addRow, last: () => last };
})();
