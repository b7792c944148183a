// The approvals inbox across the tenant's sessions. Each waiting call is one compact line
// (tool, what it would do, session, agent, how long it has waited) that opens to show its
// arguments and the decision: approve, reject with a reason, or approve with edited
// arguments (checked against the tool's schema here, every problem listed, then on the
// server, which lists every problem too).

import { api, enc } from "./api.js";
import { el, pretty, setText } from "./dom.js";
import { age, argumentLine, shortId } from "./words.js";
import { checkArguments } from "./validate.js";

export class Inbox {
  constructor(list, empty, count, { onDecided, onOpen, onBudgets }) {
    this.list = list;
    this.empty = empty;
    this.count = count;
    this.onDecided = onDecided;
    this.onOpen = onOpen;
    this.onBudgets = onBudgets; // the sessions parked at their budget, from the same answer
    this.rows = new Map(); // "session/call" -> {node, update(call)}
  }

  clear() {
    this.rows.clear();
    this.list.replaceChildren();
    setText(this.count, "");
  }

  async refresh() {
    const inbox = await api("/v1/approvals");
    // Rows are kept across refreshes (an entry opened, an edit or a reason being typed stay);
    // only new calls get rows, decided ones lose theirs, and each row's age moves on.
    const wanted = [];
    for (const entry of inbox.entries) {
      for (const call of entry.pending) {
        const key = `${entry.session.id}/${call.tool_call_id}`;
        let row = this.rows.get(key);
        if (!row) {
          row = this.row(entry.session, call, key);
          this.rows.set(key, row);
        }
        row.update(entry.session, call);
        wanted.push(row.node);
      }
    }
    const keep = new Set(wanted);
    // A session whose workflow did not answer this time is not known to be decided: its rows
    // stay where they are, with whatever is being typed in them.
    const unanswered = new Set(inbox.unanswered || []);
    const now = [...this.list.children];
    now.forEach((node, i) => {
      if (!keep.has(node) && unanswered.has(node.dataset.session)) {
        wanted.splice(Math.min(i, wanted.length), 0, node);
        keep.add(node);
      }
    });
    for (const [key, row] of this.rows) {
      if (!keep.has(row.node)) this.rows.delete(key);
    }
    // Only when the order or the set changed: moving a node would blur a field being typed in.
    if (now.length !== wanted.length || now.some((node, i) => node !== wanted[i])) {
      this.list.replaceChildren(...wanted);
    }
    this.empty.hidden = wanted.length > 0;
    setText(this.count, wanted.length ? String(wanted.length) : "");
    if (this.onBudgets) this.onBudgets(inbox.budgets || []);
  }

  row(session, call, key) {
    const base = `/v1/sessions/${enc(session.id)}/calls/${enc(call.tool_call_id)}`;
    const error = el("ul", { class: "error problems", role: "alert", dataset: { testid: "decision-error" } });
    const showProblems = (problems) => {
      error.replaceChildren(...problems.map((p) => el("li", {}, p)));
      if (problems.length) error.scrollIntoView({ block: "nearest" });
    };
    const editor = el("textarea", { rows: 5, spellcheck: "false", dataset: { testid: "edit-arguments" } });
    editor.value = pretty(call.arguments ?? {});
    const reason = el("input", { type: "text", placeholder: "Why? The agent is told.", dataset: { testid: "reject-reason" } });
    const editBox = el(
      "div",
      { class: "subform", hidden: true },
      el("label", {}, "Run it with these arguments (JSON)"),
      editor,
      el("button", { type: "button", dataset: { testid: "approve-edited" }, onclick: () => approveEdited() }, "Approve with these arguments"),
    );
    const rejectBox = el(
      "div",
      { class: "subform", hidden: true },
      el("label", {}, "Reason"),
      reason,
      el("button", { type: "button", class: "danger", dataset: { testid: "reject-confirm" }, onclick: () => decide("reject", { reason: reason.value }) }, "Reject"),
    );
    const decide = async (verb, body) => {
      showProblems([]);
      try {
        await api(`${base}/${verb}`, { method: "POST", body });
        node.remove();
        this.rows.delete(key);
        this.onDecided(session.id);
      } catch (err) {
        showProblems(err.problems && err.problems.length ? err.problems : [err.message]);
      }
    };
    const approveEdited = () => {
      const checked = checkArguments(editor.value, call.schema);
      if (checked.errors.length) {
        showProblems(checked.errors);
        return;
      }
      decide("approve", { arguments: checked.value });
    };

    const tool = el("span", { class: "tool" }, call.name);
    const what = el("span", { class: "what", dataset: { testid: "argument-line" } });
    const waited = el("span", { class: "age", dataset: { testid: "waiting-for" } });
    const title = el("span", { class: "session-title" });
    const meta = el("span", { class: "meta" });
    const summary = el(
      "summary",
      { dataset: { testid: "inbox-summary" } },
      el("div", { class: "line" }, tool, title, waited),
      el("div", { class: "line sub" }, what, meta),
    );
    const args = el("pre", { dataset: { testid: "pending-arguments" } });
    const about = el("div", { class: "muted" });
    const details = el(
      "details",
      {},
      summary,
      el(
        "div",
        { class: "body" },
        about,
        args,
        el(
          "div",
          { class: "actions" },
          el("button", { type: "button", dataset: { testid: "approve" }, onclick: () => decide("approve", {}) }, "Approve"),
          el("button", { type: "button", class: "secondary", dataset: { testid: "edit" }, onclick: () => { editBox.hidden = !editBox.hidden; } }, "Edit arguments…"),
          el("button", { type: "button", class: "secondary", dataset: { testid: "reject" }, onclick: () => { rejectBox.hidden = !rejectBox.hidden; } }, "Reject…"),
          el("a", { class: "session-link", dataset: { testid: "open-session" }, onclick: () => this.onOpen(session.id) }, "Open the session"),
        ),
        editBox,
        rejectBox,
        error,
      ),
    );
    const node = el(
      "li",
      { dataset: { testid: "inbox-entry", session: session.id, call: call.tool_call_id, tool: call.name } },
      details,
    );
    const update = (s, c) => {
      setText(what, argumentLine(c.arguments));
      const since = c.waiting_since || s.updated_at;
      setText(waited, age(since));
      waited.title = `waiting since ${new Date(since).toLocaleString()}`;
      setText(title, s.title || "(untitled task)");
      setText(meta, `${s.agent} agent · session ${shortId(s.id)}`);
      const step = Number.isInteger(c.step) ? `Step ${c.step + 1} of the task. ` : "";
      const rerun = c.rerun ? "It may have run already, before a crash: approving runs it again. " : "";
      setText(about, `${step}${rerun}The agent wants to use these arguments:`);
      setText(args, pretty(c.arguments ?? {}));
    };
    return { node, update };
  }
}
