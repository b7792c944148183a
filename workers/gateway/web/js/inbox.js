// The approvals inbox across the tenant's sessions: approve, reject with a reason, or
// approve with edited arguments (checked against the tool's schema here, then on the server).

import { api, enc } from "./api.js";
import { el, pretty, setText } from "./dom.js";
import { checkArguments } from "./validate.js";

export class Inbox {
  constructor(list, empty, { onDecided, onOpen }) {
    this.list = list;
    this.empty = empty;
    this.onDecided = onDecided;
    this.onOpen = onOpen;
    this.shown = "";
  }

  async refresh() {
    const inbox = await api("/v1/approvals");
    // Re-render only on change: a re-render would throw away an edit being typed.
    const key = JSON.stringify(inbox.entries.map((e) => [e.session.id, e.pending.map((p) => p.tool_call_id)]));
    if (key === this.shown) return;
    this.shown = key;
    const rows = [];
    for (const entry of inbox.entries) {
      for (const call of entry.pending) rows.push(this.row(entry.session, call));
    }
    this.list.replaceChildren(...rows);
    this.empty.hidden = rows.length > 0;
  }

  row(session, call) {
    const base = `/v1/sessions/${enc(session.id)}/calls/${enc(call.tool_call_id)}`;
    const error = el("p", { class: "error", role: "alert", dataset: { testid: "decision-error" } });
    const editor = el("textarea", { rows: 5, spellcheck: "false", dataset: { testid: "edit-arguments" } });
    editor.value = pretty(call.arguments ?? {});
    const reason = el("input", { type: "text", placeholder: "why (told to the model)", dataset: { testid: "reject-reason" } });
    const editBox = el(
      "div",
      { hidden: true },
      el("label", {}, "Edited arguments (JSON)"),
      editor,
      el("button", { type: "button", dataset: { testid: "approve-edited" }, onclick: () => approveEdited() }, "Approve with these arguments"),
    );
    const rejectBox = el(
      "div",
      { hidden: true },
      el("label", {}, "Reason"),
      reason,
      el("button", { type: "button", class: "danger", dataset: { testid: "reject-confirm" }, onclick: () => decide("reject", { reason: reason.value }) }, "Reject"),
    );
    const decide = async (verb, body) => {
      setText(error, "");
      try {
        await api(`${base}/${verb}`, { method: "POST", body });
        node.remove();
        this.shown = "";
        this.onDecided(session.id);
      } catch (err) {
        setText(error, err.message);
      }
    };
    const approveEdited = () => {
      const checked = checkArguments(editor.value, call.schema);
      if (checked.error) {
        setText(error, checked.error);
        return;
      }
      decide("approve", { arguments: checked.value });
    };
    const node = el(
      "li",
      { dataset: { testid: "inbox-entry", session: session.id, call: call.tool_call_id, tool: call.name } },
      el("a", { class: "session-link", onclick: () => this.onOpen(session.id) }, session.title || session.id),
      el("div", { class: "call" }, `${call.name} · step ${call.step}${call.rerun ? " · re-run" : ""}`),
      el("pre", { dataset: { testid: "pending-arguments" } }, pretty(call.arguments ?? {})),
      el(
        "div",
        { class: "actions" },
        el("button", { type: "button", dataset: { testid: "approve" }, onclick: () => decide("approve", {}) }, "Approve"),
        el("button", { type: "button", class: "secondary", dataset: { testid: "edit" }, onclick: () => { editBox.hidden = !editBox.hidden; } }, "Edit arguments"),
        el("button", { type: "button", class: "secondary", dataset: { testid: "reject" }, onclick: () => { rejectBox.hidden = !rejectBox.hidden; } }, "Reject…"),
      ),
      editBox,
      rejectBox,
      error,
    );
    return node;
  }
}
