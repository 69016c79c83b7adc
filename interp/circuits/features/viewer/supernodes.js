// Supernodes in the viewer: group pinned nodes, and accept, reject, rename, split or merge groups, proposed ones
// (interp attribute --supernodes auto) included. The rules are those of the graph file's subgraph: names are
// unique and not empty, a node joins one supernode, every member is pinned. Every string from the data is put in
// with textContent, never as markup.
(function () {
  "use strict";
  const { el, byId } = window.interpDom;
  const viewer = window.graphViewer;
  const box = byId("supernodes");
  const message = el("p", { id: "supernode-message", class: "note" });
  box.before(message);

  const groups = () => viewer.state().supernodes;
  const find = (name) => groups().find((s) => s.name === name);

  function done(text) {
    message.textContent = text;
    viewer.saveState();
    viewer.draw();
    return true;
  }

  function refuse(text) {
    message.textContent = text;
    return false;
  }

  // A name a new or renamed supernode may take, or why not.
  function badName(name, except) {
    if (!name.trim()) return "a supernode needs a name";
    if (groups().some((s) => s.name === name && s !== except)) return "a supernode is already named " + name;
    return null;
  }

  function group(name) {
    const taken = new Set(groups().flatMap((s) => s.members));
    const members = viewer.state().pinned.filter((id) => !taken.has(id));
    if (!members.length) return refuse("pin nodes that are in no supernode to group them");
    const chosen = name.trim() || "supernode " + (groups().length + 1);
    const bad = badName(chosen);
    if (bad) return refuse(bad);
    groups().push({ name: chosen, members, proposed: false });
    return done("grouped " + members.length + " nodes as " + chosen);
  }

  function accept(name) {
    const s = find(name);
    if (!s) return refuse("no supernode " + name);
    s.proposed = false;
    return done("accepted " + name);
  }

  // A rejected proposal is gone, its members unpinned (the proposal pinned them); a group of one's own is
  // dissolved into single nodes, which stay pinned.
  function reject(name) {
    const s = find(name);
    if (!s) return refuse("no supernode " + name);
    const state = viewer.state();
    state.supernodes = groups().filter((g) => g !== s);
    if (s.proposed) state.pinned = state.pinned.filter((id) => !s.members.includes(id));
    return done((s.proposed ? "rejected " : "ungrouped ") + name);
  }

  function rename(name, next) {
    const s = find(name);
    if (!s) return refuse("no supernode " + name);
    const bad = badName(next, s);
    if (bad) return refuse(bad);
    s.name = next;
    return done("renamed " + name + " to " + next);
  }

  // Members of ``name`` leave it: into a new supernode ``into``, or back to single (pinned) nodes when ``into``
  // is empty. A group left without members is removed.
  function split(name, members, into) {
    const s = find(name);
    if (!s) return refuse("no supernode " + name);
    const moving = s.members.filter((id) => members.includes(id));
    if (!moving.length) return refuse("tick the members of " + name + " to split off");
    if (into) {
      if (moving.length === s.members.length) return refuse("leave some members in " + name + ", or rename it");
      const bad = badName(into);
      if (bad) return refuse(bad);
    }
    s.members = s.members.filter((id) => !moving.includes(id));
    const state = viewer.state();
    for (const id of moving) if (!state.pinned.includes(id)) state.pinned.push(id);
    if (!s.members.length) state.supernodes = groups().filter((g) => g !== s);
    if (into) groups().splice(groups().indexOf(s) + 1, 0, { name: into, members: moving, proposed: false });
    return done(moving.length + " nodes of " + name + (into ? " now form " + into : " are single nodes again"));
  }

  // ``other``'s members join ``name``; ``other`` is gone. The result is the reader's own group.
  function merge(name, other) {
    const s = find(name), t = find(other);
    if (!s || !t || s === t) return refuse("choose two different supernodes to merge");
    s.members = s.members.concat(t.members);
    s.proposed = false;
    viewer.state().supernodes = groups().filter((g) => g !== t);
    return done("merged " + other + " into " + name);
  }

  function button(text, cls, fn) {
    const b = el("button", { class: cls }, text);
    b.addEventListener("click", fn);
    return b;
  }

  function row(s) {
    const div = el("div", { class: "supernode" + (s.proposed ? " proposed" : "") });
    div.dataset.name = s.name;
    const head = el("p");
    head.append(el("b", { class: "sn-name" }, s.name), " ");
    if (s.proposed) head.append(el("span", { class: "sn-status" }, "proposed"));
    div.appendChild(head);
    const members = el("div", { class: "sn-members" });
    for (const id of s.members) {
      const chip = el("label", { class: "chip" });
      const box = el("input", { type: "checkbox", class: "sn-member", value: id });
      chip.append(box, " ", viewer.nodeById.has(id) ? viewer.label(viewer.nodeById.get(id)) : id);
      members.appendChild(chip);
    }
    div.appendChild(members);
    const ticked = () => [...div.querySelectorAll(".sn-member:checked")].map((b) => b.value);
    const name = el("input", { class: "sn-new-name", placeholder: "name", maxlength: "60" });
    const others = el("select", { class: "sn-merge-with" });
    for (const t of groups()) if (t !== s) others.appendChild(el("option", { value: t.name }, t.name));
    const actions = el("p", { class: "sn-actions" });
    if (s.proposed) {
      actions.append(button("accept", "sn-accept", () => accept(s.name)),
        button("reject", "sn-reject", () => reject(s.name)));
    } else {
      actions.append(button("ungroup", "sn-reject", () => reject(s.name)));
    }
    actions.append(" ", name, button("rename", "sn-rename", () => rename(s.name, name.value.trim())),
      button("split ticked off", "sn-split", () => split(s.name, ticked(), name.value.trim())),
      button("ticked to single nodes", "sn-single", () => split(s.name, ticked(), "")));
    if (others.options.length) actions.append(" ", others, button("merge in", "sn-merge", () => merge(s.name, others.value)));
    div.appendChild(actions);
    return div;
  }

  function render() {
    box.replaceChildren(...groups().map(row));
  }

  byId("group").addEventListener("click", () => group(byId("group-name").value));
  window.supernodeEditor = { render, group, accept, reject, rename, split, merge };
  render();
})();
