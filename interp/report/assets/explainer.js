// The explainer page: one sentence's attention, step by step, for one token, drawn from the data the page embeds
// (interp.report.explain.explain_data). Every string from the data is put in with textContent, never as markup.
(function () {
  "use strict";
  const { el, clear, byId } = window.interpDom;
  const D = JSON.parse(byId("explain-data").textContent);
  const M = D.model, N = D.tokens.length, Q = D.query, P = D.pattern;
  const GROUP = M.n_heads / M.n_kv_heads;
  const S = { layer: D.layer, head: D.head, key: null };
  const RED = [202, 45, 38], BLUE = [38, 98, 176], ACC = [47, 111, 179];

  function fmt(x, p) {
    if (x === null || x === undefined) { return "\u2013"; }
    if (x === 0) { return "0"; }
    const a = Math.abs(x);
    if (a >= 1e5 || a < 1e-3) { return x.toExponential(2); }
    return String(Number(x.toPrecision(p || 3)));
  }
  function mix(c, t) {
    t = Math.max(0, Math.min(1, t));
    return [Math.round(255 + (c[0] - 255) * t), Math.round(255 + (c[1] - 255) * t),
      Math.round(255 + (c[2] - 255) * t)];
  }
  function rgb(c) { return "rgb(" + c[0] + "," + c[1] + "," + c[2] + ")"; }
  function diverging(v, scale) { return v >= 0 ? mix(RED, v / scale) : mix(BLUE, -v / scale); }
  function weightColor(w) { return mix(ACC, Math.sqrt(Math.max(w, 0))); }
  function maxAbs(rows) {
    let m = 1e-12;
    rows.forEach((r) => {
      r.forEach((v) => { if (v !== null && Math.abs(v) > m) { m = Math.abs(v); } });
    });
    return m;
  }
  function kvHead(h) { return Math.floor(h / GROUP); }
  function kvPos() { return D.kv_pos[S.layer][kvHead(S.head)]; }
  function tokLabel(pos) { return D.tokens[pos]; }

  // The attention row of token i for (layer, head): weights, or null where the page holds none (top-k).
  function patternRow(l, h, i) {
    if (P.dense) { return P.values[l][h][i]; }
    if (i === Q) { return D.row[l][h]; }
    const row = new Array(N).fill(null), vals = P.values[l][h][i];
    P.keys[l][h][i].forEach((k, j) => { row[k] = vals[j]; });
    return row;
  }

  function tokChip(pos) {
    const s = el("span", { class: "tok" });
    s.dataset.pos = String(pos);
    s.appendChild(el("span", { class: "t" }, tokLabel(pos)));
    if (pos === Q) { s.classList.add("query"); }
    return s;
  }
  function paintChip(chip, w, withNumber) {
    chip.dataset.weight = w === null ? "" : String(w);
    const c = w === null ? [246, 248, 250] : weightColor(w);
    chip.style.background = rgb(c);
    chip.classList.toggle("dark", w !== null && Math.sqrt(w) > 0.6);
    let num = chip.querySelector(".w");
    if (withNumber) {
      if (!num) { num = el("span", { class: "w" }); chip.appendChild(num); }
      num.textContent = w === null ? "<top-k" : fmt(w, 2);
    }
  }

  // Heat strips: one canvas for a [rows, dims] block, labels beside it, a readout under it.
  function matrixBlock(labels, rows, opts) {
    opts = opts || {};
    const wrap = el("div"), box = el("div", { class: "matrix" }), lab = el("div", { class: "mlabels" });
    labels.forEach((t) => { lab.appendChild(el("div", null, t)); });
    const dims = rows.length ? rows[0].length : 0;
    const cw = opts.cellW || Math.max(3, Math.min(12, Math.floor(520 / Math.max(dims, 1))));
    const ch = 14, scale = opts.scale || maxAbs(rows);
    const canvas = el("canvas");
    canvas.width = Math.max(1, dims * cw);
    canvas.height = Math.max(1, rows.length * ch);
    const ctx = canvas.getContext("2d");
    rows.forEach((r, i) => {
      r.forEach((v, j) => {
        ctx.fillStyle = rgb(v === null ? [230, 230, 230] : diverging(v, scale));
        ctx.fillRect(j * cw, i * ch, cw, ch - 1);
      });
    });
    const readout = el("div", { class: "readout" });
    canvas.addEventListener("mousemove", (ev) => {
      const r = canvas.getBoundingClientRect();
      const i = Math.floor((ev.clientY - r.top) / ch), j = Math.floor((ev.clientX - r.left) / cw);
      if (rows[i] && j >= 0 && j < dims) {
        readout.textContent = labels[i] + "  dim " + j + ": " + fmt(rows[i][j]);
      }
    });
    box.appendChild(lab);
    box.appendChild(canvas);
    if (opts.title) { wrap.appendChild(el("div", { class: "note" }, opts.title)); }
    wrap.appendChild(box);
    wrap.appendChild(readout);
    return wrap;
  }

  // A pattern as a picture: [query, key] bins of at most `size` pixels, each the largest weight in it.
  function drawPattern(canvas, l, h, size, px) {
    const n = Math.min(N, size), grid = new Float32Array(n * n);
    function put(q, k, w) {
      const a = Math.floor(q * n / N) * n + Math.floor(k * n / N);
      if (w > grid[a]) { grid[a] = w; }
    }
    for (let i = 0; i < N; i++) {
      if (P.dense) {
        P.values[l][h][i].forEach((w, k) => { put(i, k, w); });
      } else {
        const vals = P.values[l][h][i];
        P.keys[l][h][i].forEach((k, j) => { put(i, k, vals[j]); });
      }
    }
    if (!P.dense) { D.row[l][h].forEach((w, k) => { put(Q, k, w); }); }
    px = px || 1;
    canvas.width = n * px;
    canvas.height = n * px;
    const ctx = canvas.getContext("2d"), img = ctx.createImageData(n * px, n * px);
    for (let i = 0; i < n * px; i++) {
      for (let j = 0; j < n * px; j++) {
        const c = weightColor(grid[Math.floor(i / px) * n + Math.floor(j / px)]);
        const a = 4 * (i * n * px + j);
        img.data[a] = c[0]; img.data[a + 1] = c[1]; img.data[a + 2] = c[2]; img.data[a + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    return n;
  }

  function kpi(box, label, value) {
    const k = el("div", { class: "kpi" });
    k.appendChild(el("div", { class: "l" }, label));
    k.appendChild(el("div", { class: "v" }, value));
    box.appendChild(k);
  }

  function shownKeys(weights, limit) {
    const all = Array.from({ length: N }, (_, k) => k);
    if (N <= limit) { return all; }
    all.sort((a, b) => (weights[b] || 0) - (weights[a] || 0) || a - b);
    return all.slice(0, limit).sort((a, b) => a - b);
  }

  // ---- static parts: the text, tokens, embeddings, position, the head grid ----
  function renderStatic() {
    document.querySelectorAll(".qtok").forEach((e) => { e.textContent = tokLabel(Q); });
    document.querySelectorAll(".d-model").forEach((e) => { e.textContent = String(M.d_model); });
    document.querySelectorAll(".d-head").forEach((e) => { e.textContent = String(M.d_head); });
    byId("query-pos").textContent = String(Q);
    byId("sqrt-dk").textContent = fmt(Math.sqrt(M.d_head), 4);
    byId("subtitle").textContent = N + " tokens; " + M.n_layers + " layers of " + M.n_heads + " heads" +
      (M.n_kv_heads < M.n_heads ? " sharing " + M.n_kv_heads + " key/value heads" : "") +
      "; d_model " + M.d_model + ", d_head " + M.d_head + "; " + M.positional + " positions.";
    byId("causal-text").textContent = M.causal ?
      "Tokens after it are masked: a token reads only itself and what came before." :
      "This model is bidirectional: every token may read every other.";
    const sentence = byId("sentence");
    for (let i = 0; i < N; i++) {
      const chip = tokChip(i);
      chip.addEventListener("mouseenter", onHover);
      chip.addEventListener("mouseleave", () => { showRow(Q); });
      sentence.appendChild(chip);
    }
    const ls = byId("layer-select"), hs = byId("head-select");
    for (let i = 0; i < M.n_layers; i++) { ls.appendChild(new Option(String(i), String(i))); }
    for (let i = 0; i < M.n_heads; i++) { hs.appendChild(new Option(String(i), String(i))); }
    ls.addEventListener("change", () => { select(Number(ls.value), S.head); });
    hs.addEventListener("change", () => { select(S.layer, Number(hs.value)); });
    byId("key-select").addEventListener("change", () => {
      S.key = Number(byId("key-select").value);
      renderQK();
    });
    renderEmbeddings();
    renderPositionText();
    renderGrid();
  }

  function onHover(ev) { showRow(Number(ev.currentTarget.dataset.pos)); }

  function showRow(i) {
    const row = patternRow(S.layer, S.head, i);
    document.querySelectorAll("#sentence .tok").forEach((chip, k) => {
      paintChip(chip, row[k], false);
      chip.classList.toggle("source", k === i);
    });
    byId("hover-note").textContent = "Where " + JSON.stringify(tokLabel(i)) + " (position " + i +
      ") reads from in layer " + S.layer + ", head " + S.head +
      (!P.dense && i !== Q ? " (its top " + P.k + " keys)" : "") + ".";
  }

  function renderEmbeddings() {
    const box = byId("embed-view"), scroll = el("div", { class: "scroll" }), table = el("table"), head = el("tr");
    ["pos", "token", "id", "\u2016embedding\u2016"].forEach((t) => {
      head.appendChild(el("th", null, t));
    });
    table.appendChild(head);
    D.tokens.forEach((t, i) => {
      const tr = el("tr", { class: i === Q ? "query" : null });
      tr.appendChild(el("td", null, i));
      tr.appendChild(el("td", { class: "t" }, t));
      tr.appendChild(el("td", null, D.ids[i]));
      tr.appendChild(el("td", null, fmt(D.embed.norm[i])));
      table.appendChild(tr);
    });
    scroll.appendChild(table);
    const row = el("div", { class: "row2" });
    row.appendChild(scroll);
    row.appendChild(matrixBlock(D.tokens, D.embed.dims,
      { title: "first " + D.embed.dims[0].length + " of " + M.d_model + " dimensions" }));
    box.appendChild(row);
  }

  const ORDER = "Attention by itself ignores order: shuffle the keys and every score stays the same. ";

  function renderPositionText() {
    const pos = D.position, text = byId("position-text"), view = byId("position-view");
    if (pos.kind === "rotary") {
      text.textContent = ORDER + "This model adds nothing positional to the stream. Instead, in every " +
        "layer, each query and key is " +
        "rotated pair of dimensions by pair, by an angle proportional to its position (pair i turns by " +
        "position \u00d7 \u03b8_i, fast for the first pairs, slow for the last). The dot product of two " +
        "rotated vectors depends on the difference of their angles, so scores depend on how far apart two " +
        "tokens are. Left: the angle of three pairs at each position. Right: for the selected head, the " +
        "cosine between each token's query before and after its rotation (1 at position 0).";
      view.appendChild(anglePlot(pos.inv_freq));
      view.appendChild(el("div", { id: "qcos-view" }));
    } else if (pos.kind === "learned" || pos.kind === "sinusoidal") {
      const kind = pos.kind === "learned" ? "learned" : "fixed sine-and-cosine";
      text.textContent = ORDER + "This model adds a " + kind +
        " vector for each position to the token's embedding, so the stream carries where each token is. " +
        "Below, the length of each position's vector and its first dimensions.";
      const bars = el("div", { class: "bars" }), mx = Math.max(...pos.norm, 1e-12);
      pos.norm.forEach((v, i) => { bars.appendChild(bar(i + " " + tokLabel(i), v / mx, fmt(v))); });
      view.appendChild(bars);
      view.appendChild(matrixBlock(D.tokens, pos.dims, { title: "position vectors, first dimensions" }));
    } else {
      text.textContent = "This model has no position information: apart from the causal mask (if any), " +
        "attention cannot tell where a token is.";
    }
  }

  function anglePlot(invFreq) {
    // The plot area leaves room on the left and below for the axes' labels and end values.
    const wrap = el("div"), c = el("canvas"), w = 380, h = 176, x0 = 40, x1 = w - 8, y0 = 8, y1 = h - 34;
    const pairs = [0, Math.floor(invFreq.length / 2), invFreq.length - 1];
    const colors = ["#e8590c", "#2f6fb3", "#2b8a3e"];
    c.width = w; c.height = h;
    c.setAttribute("aria-label", "rotary angle of three dimension pairs against position");
    const ctx = c.getContext("2d");
    ctx.strokeStyle = "#dde1e6"; ctx.strokeRect(x0 + 0.5, y0 + 0.5, x1 - x0 - 1, y1 - y0 - 1);
    pairs.forEach((p, s) => {
      ctx.fillStyle = colors[s];
      for (let i = 0; i < N; i++) {
        const a = (i * invFreq[p]) % (2 * Math.PI);
        const x = x0 + 4 + i * (x1 - x0 - 8) / Math.max(N - 1, 1), y = y1 - 4 - a / (2 * Math.PI) * (y1 - y0 - 8);
        ctx.fillRect(x - 1.5, y - 1.5, 3, 3);
      }
    });
    ctx.fillStyle = "#5b6570"; ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    ctx.fillText("2\u03c0", x0 - 4, y0 + 4); ctx.fillText("0", x0 - 4, y1 - 4);
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    ctx.fillText("0", x0 + 4, y1 + 3); ctx.fillText(String(N - 1), x1 - 4, y1 + 3);
    ctx.fillText("position", (x0 + x1) / 2, y1 + 17);
    ctx.save(); ctx.translate(11, (y0 + y1) / 2); ctx.rotate(-Math.PI / 2);
    ctx.textBaseline = "middle"; ctx.fillText("angle (rad)", 0, 0); ctx.restore();
    wrap.appendChild(c);
    const legend = el("div", { class: "note" });
    pairs.forEach((p, s) => {
      const sp = el("span", null, "\u25a0 pair " + p + " (" + fmt(invFreq[p]) + " rad per position)  ");
      sp.style.color = colors[s];
      legend.appendChild(sp);
    });
    wrap.appendChild(legend);
    wrap.appendChild(el("div", { class: "note" }, "angle (0 to 2\u03c0) against position 0.." + (N - 1) +
      "; at the followed token: " + fmt(Q * invFreq[0]) + " rad for pair 0"));
    return wrap;
  }

  function bar(label, frac, num) {
    const b = el("div", { class: "b" }), fill = el("div", { class: "fill" });
    b.appendChild(el("span", { class: "lab" }, label));
    fill.style.width = (Math.max(frac, 0) * 12).toFixed(2) + "em";
    b.appendChild(fill);
    b.appendChild(el("span", { class: "num" }, num));
    return b;
  }

  function renderGrid() {
    const grid = byId("head-grid"), g = el("div", { class: "grid" });
    g.style.gridTemplateColumns = "auto repeat(" + M.n_heads + ", 46px)";
    g.appendChild(el("span"));
    for (let h = 0; h < M.n_heads; h++) { g.appendChild(el("span", null, "H" + h)); }
    for (let l = 0; l < M.n_layers; l++) {
      g.appendChild(el("span", null, "L" + l));
      for (let h = 0; h < M.n_heads; h++) {
        const c = el("canvas");
        c.dataset.layer = String(l); c.dataset.head = String(h);
        c.title = "layer " + l + ", head " + h;
        drawPattern(c, l, h, 48);
        c.addEventListener("click", (ev) => {
          select(Number(ev.currentTarget.dataset.layer), Number(ev.currentTarget.dataset.head));
        });
        g.appendChild(c);
      }
    }
    grid.appendChild(g);
  }

  // ---- the parts that follow the selected head ----
  function select(l, h) {
    S.layer = l; S.head = h; S.key = null;
    renderHead();
  }

  function renderHead() {
    byId("layer-select").value = String(S.layer);
    byId("head-select").value = String(S.head);
    document.querySelectorAll("#head-grid canvas").forEach((c) => {
      c.classList.toggle("sel", Number(c.dataset.layer) === S.layer && Number(c.dataset.head) === S.head);
    });
    showRow(Q);
    renderQCos();
    renderQKV();
    renderScores();
    renderPattern();
    renderQK();
    renderMixture();
    renderResidual();
    renderWhy();
  }

  function renderQCos() {
    const box = byId("qcos-view");
    if (!box) { return; }
    clear(box);
    box.appendChild(el("div", { class: "note" }, "cos(q before rotation, q after), layer " + S.layer +
      " head " + S.head));
    const chips = el("div", { class: "tokens" }), cos = D.position.q_cos[S.layer][S.head];
    cos.forEach((v, j) => {
      const chip = tokChip(D.position.q_cos_pos[j]), c = mix(ACC, (1 - v) / 2);
      chip.style.background = rgb(c);
      chip.appendChild(el("span", { class: "w" }, fmt(v, 3)));
      chips.appendChild(chip);
    });
    box.appendChild(chips);
  }

  function renderQKV() {
    const box = clear(byId("qkv-view")), g = kvHead(S.head), pos = kvPos();
    const labels = pos.map((p) => p + " " + tokLabel(p));
    let note = "";
    if (M.positional === "rotary") {
      note += "Queries and keys are shown after rotation, as the scores use them. ";
    }
    if (GROUP > 1) {
      note += "Query heads share key/value heads in groups of " + GROUP + " (grouped-query attention): " +
        "head " + S.head + " reads key/value head " + g + ". ";
    }
    if (pos.length < N) {
      note += "Keys and values of the " + pos.length + " tokens this group's heads read most.";
    }
    if (note) { box.appendChild(el("p", { class: "note" }, note)); }
    const q = D.q[S.layer][S.head], k = D.k[S.layer][g], v = D.v[S.layer][g];
    const qkScale = maxAbs([q].concat(k));
    box.appendChild(matrixBlock(["q " + tokLabel(Q)], [q],
      { title: "query of the followed token", scale: qkScale }));
    box.appendChild(matrixBlock(labels, k, { title: "keys", scale: qkScale }));
    box.appendChild(matrixBlock(labels, v, { title: "values" }));
  }

  // Softmax over the keys' scores (null: masked). With a sink logit (a key that every query sees and that
  // writes nothing, GPT-OSS) the sink joins the normalisation, and its share is the array's `sink`.
  function softmax(xs, sink) {
    let m = sink === null || sink === undefined ? -Infinity : sink, out = [], s = 0;
    xs.forEach((x) => { if (x !== null && x > m) { m = x; } });
    xs.forEach((x) => { const e = x === null ? 0 : Math.exp(x - m); out.push(e); s += e; });
    const es = sink === null || sink === undefined ? 0 : Math.exp(sink - m);
    s += es;
    out = out.map((e) => e / s);
    out.sink = es / s;
    return out;
  }
  function entropyBits(ws) {
    let h = 0;
    ws.forEach((w) => { if (w > 0) { h -= w * Math.log2(w); } });
    return h;
  }

  function renderScores() {
    const scaled = D.scores[S.layer][S.head], root = Math.sqrt(M.d_head);
    const sink = D.sinks ? D.sinks[S.layer][S.head] : null;
    const raw = scaled.map((s) => s === null ? null : s * root);
    const noDiv = softmax(raw, sink), withDiv = softmax(scaled, sink), row = D.row[S.layer][S.head];
    const kp = clear(byId("score-kpis"));
    kpi(kp, "max weight without \u00f7\u221ad", fmt(Math.max(...noDiv)));
    kpi(kp, "max weight with \u00f7\u221ad", fmt(Math.max(...withDiv)));
    kpi(kp, "entropy without (bits)", fmt(entropyBits(noDiv.concat(sink === null ? [] : [noDiv.sink]))));
    kpi(kp, "entropy with (bits)", fmt(entropyBits(withDiv.concat(sink === null ? [] : [withDiv.sink]))));
    if (sink !== null) { kpi(kp, "sink's share (with)", fmt(withDiv.sink)); }
    const box = clear(byId("score-view")), scroll = el("div", { class: "scroll" }), table = el("table"), tr = el("tr");
    ["pos", "key token", "q\u00b7k", "q\u00b7k / \u221ad", "softmax without \u00f7\u221ad", "weight (with)"]
      .forEach((t) => { tr.appendChild(el("th", null, t)); });
    table.appendChild(tr);
    const keys = shownKeys(row, 64);
    keys.forEach((k) => {
      const r = el("tr", { class: k === Q ? "query" : null });
      r.appendChild(el("td", null, k));
      r.appendChild(el("td", { class: "t" }, tokLabel(k)));
      if (scaled[k] === null) {
        r.appendChild(el("td", null, "masked"));
        r.appendChild(el("td", null, "masked"));
      } else {
        r.appendChild(el("td", null, fmt(raw[k])));
        r.appendChild(el("td", null, fmt(scaled[k])));
      }
      r.appendChild(el("td", null, fmt(noDiv[k])));
      r.appendChild(el("td", null, fmt(withDiv[k])));
      table.appendChild(r);
    });
    if (sink !== null) {
      const r = el("tr", { class: "sink" });
      r.appendChild(el("td", null, "sink"));
      r.appendChild(el("td", { class: "t" }, "(no token)"));
      r.appendChild(el("td", null, "\u2013"));
      r.appendChild(el("td", null, fmt(sink)));
      r.appendChild(el("td", null, fmt(noDiv.sink)));
      r.appendChild(el("td", null, fmt(withDiv.sink)));
      table.appendChild(r);
    }
    scroll.appendChild(table);
    box.appendChild(scroll);
    if (sink !== null) {
      box.appendChild(el("p", { class: "note" }, "This head has a sink: a learned logit (" + fmt(sink) + ") that joins every " +
        "row's softmax as one more key and writes nothing, so the tokens' weights sum to " + fmt(1 - withDiv.sink) +
        ", not 1. The sink's logit is not a q\u00b7k product: the column without \u00f7\u221ad keeps it as it is."));
    }
    if (keys.length < N) {
      box.appendChild(el("p", { class: "note" }, "the " + keys.length + " keys with the most weight, of " + N));
    }
  }

  function renderPattern() {
    const box = clear(byId("pattern-row")), row = D.row[S.layer][S.head];
    row.forEach((w, k) => {
      const chip = tokChip(k);
      paintChip(chip, w, true);
      box.appendChild(chip);
    });
    const c = byId("pattern-canvas"), px = Math.max(1, Math.floor(300 / Math.min(N, 256)));
    const n = drawPattern(c, S.layer, S.head, 256, px), ctx = c.getContext("2d");
    ctx.strokeStyle = "#e8590c";
    ctx.lineWidth = 2;
    ctx.strokeRect(1, Math.floor(Q * n / N) * px + 1, n * px - 2, Math.max(px - 2, 1));
  }

  function renderQK() {
    const sel = byId("key-select"), pos = kvPos(), row = D.row[S.layer][S.head];
    if (S.key === null || pos.indexOf(S.key) < 0) {
      let best = null;
      pos.forEach((p) => {
        if (p !== Q && p !== 0 && (best === null || row[p] > row[best])) { best = p; }
      });
      S.key = best === null ? pos[0] : best;
    }
    clear(sel);
    pos.forEach((p) => {
      const o = new Option(p + ": " + tokLabel(p) + "  (weight " + fmt(row[p], 2) + ")", String(p));
      sel.appendChild(o);
    });
    sel.value = String(S.key);
    const g = kvHead(S.head), q = D.q[S.layer][S.head], k = D.k[S.layer][g][pos.indexOf(S.key)];
    const prod = q.map((x, i) => x * k[i]);
    const sum = prod.reduce((a, b) => a + b, 0);
    const c = byId("qk-bars"), bw = Math.max(3, Math.floor(520 / prod.length)), h = 160;
    c.width = prod.length * bw; c.height = h;
    const ctx = c.getContext("2d"), m = maxAbs([prod]);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, c.width, h);
    ctx.fillStyle = "#dde1e6"; ctx.fillRect(0, h / 2, c.width, 1);
    prod.forEach((v, i) => {
      const len = v / m * (h / 2 - 4);
      ctx.fillStyle = rgb(v >= 0 ? RED : BLUE);
      ctx.fillRect(i * bw, v >= 0 ? h / 2 - len : h / 2, bw - 1, Math.abs(len));
    });
    c.onmousemove = (ev) => {
      const i = Math.floor((ev.clientX - c.getBoundingClientRect().left) / bw);
      if (i >= 0 && i < prod.length) {
        byId("qk-readout").textContent = "dim " + i + ": q " + fmt(q[i]) + " \u00d7 k " + fmt(k[i]) + " = " +
          fmt(prod[i]);
      }
    };
    byId("qk-sum").textContent = "\u03a3 q\u1d62k\u1d62 = " + fmt(sum, 4) + "; \u00f7 \u221ad = " +
      fmt(sum / Math.sqrt(M.d_head), 4) + " (the model's score: " + fmt(D.scores[S.layer][S.head][S.key], 4) +
      ")";
  }

  function renderMixture() {
    const box = clear(byId("mixture-view")), g = kvHead(S.head), pos = kvPos(), row = D.row[S.layer][S.head];
    const v = D.v[S.layer][g], z = D.z[S.layer][S.head];
    const order = pos.slice().sort((a, b) => row[b] - row[a] || a - b).slice(0, 8);
    const rows = [], labels = [], total = z.map(() => 0);
    let carried = 0;
    order.forEach((p) => {
      const w = row[p], term = v[pos.indexOf(p)].map((x) => w * x);
      term.forEach((x, i) => { total[i] += x; });
      carried += w;
      rows.push(term);
      labels.push(fmt(w, 2) + " \u00d7 v " + tokLabel(p));
    });
    rows.push(total); labels.push("sum of these");
    rows.push(z); labels.push("z (model)");
    box.appendChild(matrixBlock(labels, rows, { title: "these " + order.length + " terms carry " +
      fmt(100 * carried, 3) + "% of the attention weight" }));
  }

  function renderResidual() {
    const r = D.resid[S.layer], kp = clear(byId("resid-kpis"));
    kpi(kp, "\u2016stream\u2016 before layer " + S.layer, fmt(r.pre_norm));
    kpi(kp, "\u2016stream\u2016 after", fmt(r.post_norm));
    kpi(kp, "cos(before, after)", fmt(r.cos));
    kpi(kp, "\u2016this head's write\u2016", fmt(D.head_norm[S.layer][S.head]));
    kpi(kp, "\u2016all heads' write\u2016", fmt(r.attn_norm));
    const src = D.src_norm[S.layer][S.head], row = D.row[S.layer][S.head], box = clear(byId("sources-view"));
    const mx = Math.max(...src, 1e-12);
    box.appendChild(el("div", { class: "note" }, "\u2016weight \u00b7 v W_O\u2016 per source token (and its weight)"));
    shownKeys(src, 24).forEach((k) => {
      box.appendChild(bar(k + " " + tokLabel(k), src[k] / mx, fmt(src[k]) + "  (w " + fmt(row[k], 2) + ")"));
    });
    const lens = clear(byId("lens-view"));
    if (!D.lens) {
      lens.appendChild(el("p", { class: "note" }, "This model has no unembedding to read the stream with."));
      return;
    }
    [[S.layer, "before layer " + S.layer], [S.layer + 1, "after layer " + S.layer]].forEach((e) => {
      const col = el("div"), ol = el("ol", { class: "lens" }), item = D.lens[e[0]];
      col.appendChild(el("div", { class: "note" }, e[1]));
      item.tokens.forEach((t, i) => {
        const li = el("li");
        li.appendChild(el("span", { class: "t" }, t));
        li.appendChild(document.createTextNode(" " + fmt(item.probs[i], 2)));
        ol.appendChild(li);
      });
      col.appendChild(ol);
      lens.appendChild(col);
    });
  }

  function pairTable(title, pairs) {
    const wrap = el("div", { class: "why-block" });
    wrap.appendChild(el("h3", null, title));
    const table = el("table"), head = el("tr");
    ["query part", "key part", "term", "share"].forEach((t) => { head.appendChild(el("th", null, t)); });
    table.appendChild(head);
    pairs.forEach((p) => {
      const tr = el("tr");
      tr.appendChild(el("td", { class: "mono" }, p.query));
      tr.appendChild(el("td", { class: "mono" }, p.key));
      tr.appendChild(el("td", null, fmt(p.value)));
      tr.appendChild(el("td", null, fmt(100 * p.share, 2) + "%"));
      table.appendChild(tr);
    });
    wrap.appendChild(table);
    return wrap;
  }

  function renderWhy() {
    const box = clear(byId("why-view")), W = D.why;
    if (!W) { return; }
    if (S.layer !== W.layer || S.head !== W.head) {
      box.appendChild(el("p", { class: "note" }, "Computed for layer " + W.layer + " head " + W.head + " only; run " +
        "interp explain with --layer " + S.layer + " --head " + S.head + " to see this head's."));
      return;
    }
    W.keys.forEach((k, i) => {
      box.appendChild(pairTable((i === 0 ? "strongest key " : "runner-up ") + tokLabel(k.key) + " (" + k.key +
        "): score " + fmt(k.score), k.pairs));
    });
    if (W.difference) {
      box.appendChild(pairTable("why " + tokLabel(W.keys[0].key) + " rather than " + tokLabel(W.keys[1].key) +
        ": difference " + fmt(W.difference.total), W.difference.pairs));
    }
    if (W.twin && W.twin.note) {
      box.appendChild(el("p", { class: "note" }, "Twin: " + W.twin.note));
    } else if (W.twin) {
      box.appendChild(pairTable("what changed in the twin \u201c" + W.twin.text + "\u201d (score there " +
        fmt(W.twin.score) + "): change " + fmt(W.twin.total), W.twin.pairs));
    }
  }

  renderStatic();
  renderHead();
})();
