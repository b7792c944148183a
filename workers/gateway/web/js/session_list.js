// The session list, refreshed every few seconds. Rows are kept across refreshes and only
// their words change: a row rebuilt between a click's press and its release takes no click
// (the browser sends it to the list instead), and a ticked compare box would be rebuilt too.

import { el, setText } from "./dom.js";
import { forkOf } from "./fork.js";
import { ago, setBadge, shortId } from "./words.js";

class SessionRow {
  constructor(id, { compare, onOpen }) {
    this.title = el("span", { class: "title" });
    this.meta = el("span", { class: "meta" });
    this.badge = el("span");
    this.node = el(
      "li",
      { dataset: { testid: "session-row", session: id }, onclick: () => onOpen(id) },
      compare.box(id),
      el("div", { class: "row-main" }, this.title, this.meta),
      this.badge,
    );
  }

  update(s, currentId) {
    this.node.className = s.id === currentId ? "current" : "";
    this.node.dataset.status = s.status;
    setText(this.title, s.parent_id ? `↳ ${s.title}` : s.title);
    setText(this.meta, `${s.agent} agent · ${shortId(s.id)}${forkOf(s)} · ${ago(s.updated_at)}`);
    setBadge(this.badge, s.status, s.checked);
  }
}

export class SessionList {
  constructor(list, { compare, onOpen }) {
    this.list = list;
    this.parts = { compare, onOpen };
    this.rows = new Map(); // session id -> SessionRow
  }

  /** Show `sessions` (GET /v1/sessions's, newest first); `currentId`: the open one. */
  show(sessions, currentId) {
    const wanted = sessions.map((s) => {
      let row = this.rows.get(s.id);
      if (!row) {
        row = new SessionRow(s.id, this.parts);
        this.rows.set(s.id, row);
      }
      row.update(s, currentId);
      return row;
    });
    const keep = new Set(wanted.map((row) => row.node));
    for (const [id, row] of this.rows) if (!keep.has(row.node)) this.rows.delete(id);
    const now = [...this.list.children];
    // Only when the order or the set changed: a row moved while it is pressed takes no click.
    if (now.length !== wanted.length || now.some((node, i) => node !== wanted[i].node)) {
      this.list.replaceChildren(...wanted.map((row) => row.node));
    }
  }

  clear() {
    this.rows.clear();
    this.list.replaceChildren();
  }
}
