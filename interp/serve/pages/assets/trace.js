// Tracing a new graph, as window.interpTrace.form(container, settings): a prompt, the number of feature nodes to
// keep, a button, and a progress bar fed by the server's events (POST /api/trace: queued, each backward pass,
// drawing, done), then the new graph opens in the live viewer. On the home page and in the live viewer.
(function () {
  "use strict";
  const { el } = window.interpDom;
  const api = window.interpWorkbench;

  // ``settings``: model_id, max_feature_nodes (the server's limit), url (the trace route), prompt (a first one).
  function form(container, settings) {
    const prompt = el("textarea", { id: "trace-prompt", rows: "2", placeholder: "a prompt to trace" });
    prompt.value = settings.prompt || "";
    const nodes = el("input", { id: "trace-nodes", type: "number", min: "1", max: String(settings.max_feature_nodes),
      value: String(Math.min(200, settings.max_feature_nodes)) });
    const run = el("button", { id: "trace-run", type: "button" }, "trace");
    const bar = el("progress", { id: "trace-progress", max: "1", value: "0" });
    const status = el("p", { id: "trace-status", class: "note" });
    const label = el("label", {}, "feature nodes ");
    label.appendChild(nodes);
    container.append(prompt, el("br"), label, " ", run, " ", bar, status);
    const seen = [];
    run.addEventListener("click", () => {
      const text = prompt.value;
      if (!text.trim()) {
        api.say(status, "give a prompt to trace", true);
        return;
      }
      run.disabled = true;
      bar.value = 0;
      api.say(status, "sending");
      const body = {
        prompt: text, model_id: settings.model_id, max_feature_nodes: Number(nodes.value),
        slug_identifier: "traced-" + Date.now(),
      };
      let finished = false;
      api.events(settings.url, body, (e) => {
        seen.push(e);
        if (e.state === "queued") api.say(status, e.ahead ? "waiting: " + e.ahead + " computations ahead" : "starting");
        else if (e.state === "tracing") {
          bar.max = Math.max(1, e.total);
          bar.value = e.done;
          api.say(status, "attributing: " + e.done + " of " + e.total + " feature rows");
        } else if (e.state === "drawing") {
          bar.value = bar.max;
          api.say(status, "drawing the graph");
        } else if (e.state === "done") {
          finished = true;
          api.say(status, "done: opening the new graph");
          if (!settings.stay) location.href = e.url;
        } else if (e.state === "failed") {
          finished = true;
          api.say(status, e.error, true);
        }
      }).then(() => {
        if (!finished) api.say(status, "the server stopped before the graph was done", true);
      }).catch((err) => api.say(status, err.message, true)).finally(() => { run.disabled = false; });
    });
    return { seen };
  }

  window.interpTrace = { form };
})();
