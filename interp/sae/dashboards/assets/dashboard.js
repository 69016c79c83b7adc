// One feature's dashboard, drawn from a record in circuit-tracer's feature-file schema: the histogram, the
// tokens the decoder promotes and suppresses, and the example groups, each token shaded by the activation.
// Every string of the record (tokens above all) is put in with textContent, never as markup. Shared by the
// dashboard page and the graph viewer.
(function () {
  "use strict";
  const { el, svg, clear, readJson } = window.interpDom;

  function fmt(x) {
    return typeof x === "number" ? Number(x.toPrecision(3)).toString() : String(x);
  }

  function histogram(record) {
    const counts = record.histogram || [];
    const box = el("div", { class: "dash-hist" });
    if (!counts.length) return box;
    const w = 320, h = 90, pad = 16, max = Math.max(...counts, 1);
    const plot = svg("svg", { width: w, height: h + pad, class: "dash-hist-svg", role: "img",
      "aria-label": "activation histogram" });
    const bw = (w - 2) / counts.length;
    counts.forEach((c, i) => {
      const bh = c > 0 ? Math.max(1, (h - 4) * c / max) : 0;
      const bar = svg("rect", { x: (1 + i * bw).toFixed(1), y: (h - bh).toFixed(1), width: Math.max(0.5, bw - 0.5).toFixed(1),
        height: bh.toFixed(1), class: "dash-bar" });
      bar.appendChild(svg("title", {}, c + " tokens"));
      plot.appendChild(bar);
    });
    const range = record.histogram_range || [0, record.act_max];
    plot.appendChild(svg("text", { x: 1, y: h + pad - 3, class: "dash-axis" }, fmt(range[0])));
    plot.appendChild(svg("text", { x: w - 1, y: h + pad - 3, class: "dash-axis", "text-anchor": "end" }, fmt(range[1])));
    box.appendChild(plot);
    return box;
  }

  function logits(record) {
    const box = el("div", { class: "dash-logits" });
    for (const [name, tokens] of [["promotes", record.top_logits], ["suppresses", record.bottom_logits]]) {
      if (!tokens || !tokens.length) continue;
      const row = el("div", { class: "dash-logit-row" });
      row.appendChild(el("b", {}, name + " "));
      for (const t of tokens) row.appendChild(el("span", { class: "dash-chip" }, t));
      box.appendChild(row);
    }
    return box;
  }

  function example(e, actMax) {
    const line = el("div", { class: "dash-example" + (e.is_repeated_datapoint ? " repeated" : "") });
    line.appendChild(el("span", { class: "dash-act" }, fmt(e.activation !== undefined ? e.activation : e.tokens_acts_list[e.train_token_ind])));
    e.tokens.forEach((t, i) => {
      const a = e.tokens_acts_list[i] || 0;
      const span = el("span", { class: "dash-token" + (i === e.train_token_ind ? " chosen" : "") }, t);
      if (a > 0 && actMax > 0) span.style.backgroundColor = "rgba(230, 126, 34, " + Math.min(1, 0.15 + 0.85 * a / actMax).toFixed(2) + ")";
      span.setAttribute("title", fmt(a));
      line.appendChild(span);
    });
    return line;
  }

  function render(container, record, note) {
    clear(container);
    const head = el("div", { class: "dash-head" });
    head.appendChild(el("h3", {}, "L" + record.layer + " F" + record.feature));
    const facts = "featureIndex " + record.index + " · active on " + (100 * record.activation_frequency).toPrecision(3) +
      "% of " + record.n_tokens + " tokens · activations " + fmt(record.act_min) + " to " + fmt(record.act_max);
    head.appendChild(el("p", { class: "dash-note" }, facts));
    container.appendChild(head);
    if (!record.examples_quantiles || !record.examples_quantiles.length) {
      container.appendChild(el("p", { class: "dash-note" }, "This feature never fired on these tokens."));
    }
    container.appendChild(histogram(record));
    container.appendChild(logits(record));
    for (const group of record.examples_quantiles || []) {
      const box = el("div", { class: "dash-group" });
      box.appendChild(el("div", { class: "dash-group-title" }, group.quantile_name));
      for (const e of group.examples) box.appendChild(example(e, record.act_max));
      container.appendChild(box);
    }
    if (note) container.appendChild(el("p", { class: "dash-note" }, note));
  }

  // A feature's full record from the folder beside the page; browsers let only a served page read it.
  function load(folder, index) {
    return readJson(folder + "/" + index + ".json");
  }

  window.interpDashboard = { render, load };
})();
