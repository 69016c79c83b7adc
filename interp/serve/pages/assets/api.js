// What every workbench page script uses, as window.interpWorkbench: the server's JSON routes (a refusal becomes an
// Error whose message is the server's one line), its server-sent events, the addresses of its pages and files,
// and the small pieces every page draws. Pages are served by interp serve and call nothing but its routes. Every
// string from the server (tokens, labels, file names) is put in with textContent, never as markup.
(function () {
  "use strict";
  const { el, byId } = window.interpDom;

  // The JSON a data block of the page holds (null where the page has none).
  function block(id) {
    const found = byId(id);
    return found ? JSON.parse(found.textContent) : null;
  }

  // A failed response as an Error carrying the server's message.
  function failure(response) {
    return response.text().then((text) => {
      let message = response.status + " " + response.statusText;
      try {
        message = JSON.parse(text).error || message;
      } catch (err) {
        /* not JSON: the status says it */
      }
      throw new Error(message);
    });
  }

  function getJson(url) {
    return fetch(url, { headers: { Accept: "application/json" } }).then((r) => (r.ok ? r.json() : failure(r)));
  }

  function postJson(url, body) {
    return fetch(url, {
      method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    }).then((r) => (r.ok ? r.json() : failure(r)));
  }

  // POST ``body`` and call ``onEvent`` with each server-sent event's data as it arrives; resolves at the end.
  function events(url, body, onEvent) {
    return fetch(url, {
      method: "POST", headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
    }).then((r) => {
      if (!r.ok) return failure(r);
      const reader = r.body.getReader();
      const decoder = new window.TextDecoder();
      let buffer = "";
      const pump = () => reader.read().then(({ done, value }) => {
        if (value) buffer += decoder.decode(value, { stream: true });
        for (let at = buffer.indexOf("\n\n"); at >= 0; at = buffer.indexOf("\n\n")) {
          const frame = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          for (const line of frame.split("\n")) if (line.startsWith("data: ")) onEvent(JSON.parse(line.slice(6)));
        }
        return done ? undefined : pump();
      });
      return pump();
    });
  }

  const path = (p) => (p === "." || p === "" ? "" : p.split("/").map(encodeURIComponent).join("/"));

  // A named folder's file (or folder) as /files/ serves it.
  function filesUrl(folder, file) {
    const rest = path(file);
    return "/files/" + encodeURIComponent(folder) + "/" + rest;
  }

  // A graph folder's viewer, live.
  function liveUrl(folder, graphFolder) {
    const rest = path(graphFolder);
    return "/live/graph/" + encodeURIComponent(folder) + "/" + (rest ? rest + "/" : "");
  }

  function query(params) {
    const q = new window.URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, String(v));
    const text = q.toString();
    return text ? "?" + text : "";
  }

  function featureUrl(source, index, prompt) {
    return "/feature" + query({ source, index, prompt });
  }

  function steerUrl(source, index, prompt) {
    return "/steer" + query({ source, index, prompt });
  }

  // The page's address parameter ``name`` ("" when absent).
  function param(name) {
    return new window.URLSearchParams(location.search).get(name) || "";
  }

  // Keep the page's inputs in its address, so that it can be reloaded or shared as it is.
  function remember(params) {
    history.replaceState(null, "", location.pathname + query(params));
  }

  function fmt(x) {
    return typeof x === "number" ? Number(x.toPrecision(3)).toString() : String(x);
  }

  // A token as text, with its spaces and line breaks visible.
  function tokenText(t) {
    return JSON.stringify(String(t)).slice(1, -1);
  }

  // A table of ``rows`` (cells: text or elements) under ``head``.
  function table(head, rows, attrs) {
    const t = el("table", attrs || {});
    const tr = el("tr");
    for (const h of head) tr.appendChild(el("th", {}, h));
    t.appendChild(tr);
    for (const row of rows) {
      const r = el("tr");
      for (const cell of row) {
        const td = el("td");
        if (cell instanceof window.Node) td.appendChild(cell);
        else td.textContent = cell === null || cell === undefined ? "" : String(cell);
        r.appendChild(td);
      }
      t.appendChild(r);
    }
    return t;
  }

  function link(href, text, attrs) {
    return el("a", Object.assign({ href }, attrs || {}), text);
  }

  // Say ``text`` in the status line ``node`` (an error in red).
  function say(node, text, error) {
    node.textContent = text;
    node.classList.toggle("error", Boolean(error));
  }

  // The next token before and after an edit (the server's next_token_changes), as tables.
  // What build() returns, or null once its error (a field of the form that will not do) is said in node.
  function built(build, node) {
    try {
      return build();
    } catch (err) {
      say(node, err.message, true);
      return null;
    }
  }

  function nextToken(found) {
    const box = el("div", { class: "next-token" });
    const probs = (rows) => rows.map((r) => [tokenText(r.token), fmt(r.prob), fmt(r.logit)]);
    const moved = (rows) => rows.map((r) => [tokenText(r.token), fmt(r.before), fmt(r.after),
      (r.change >= 0 ? "+" : "") + fmt(r.change)]);
    const part = (title, t) => {
      const div = el("div");
      div.append(el("h3", {}, title), t);
      box.appendChild(div);
    };
    part("likeliest before", table(["token", "prob", "logit"], probs(found.before), { class: "before" }));
    part("likeliest after", table(["token", "prob", "logit"], probs(found.after), { class: "after" }));
    part("logits raised most", table(["token", "before", "after", "change"], moved(found.raised), { class: "raised" }));
    part("logits lowered most", table(["token", "before", "after", "change"], moved(found.lowered),
      { class: "lowered" }));
    return box;
  }

  window.interpWorkbench = {
    info: () => block("workbench"), pageData: () => block("page-data"), getJson, postJson, events, filesUrl,
    liveUrl, featureUrl, steerUrl, param, remember, fmt, tokenText, table, link, say, built,
    nextToken,
  };
})();
