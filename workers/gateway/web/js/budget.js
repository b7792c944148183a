// Budgets on the page: a task parked at its budget (budget_exhausted) shows what it reached,
// and someone whose key may approve raises it here (POST /v1/sessions/{id}/budget); the task
// then goes on from the step it stopped before. Keys without the scope never see the button
// (the server refuses them with 403 anyway).

import { api, enc } from "./api.js";
import { el, setText } from "./dom.js";
import { shortId } from "./words.js";

// The API's figures, in the order and words a person reads them.
const FIGURES = [
  { name: "tool_calls", words: "Tool calls", integer: true },
  { name: "tokens", words: "Tokens", integer: true },
  { name: "cost_usd", words: "Cost (USD)", integer: false },
  { name: "seconds", words: "Seconds", integer: false },
];

/** Whether a key with these scopes may raise a budget (as the server's approve scope). */
export function mayRaise(scopes) {
  return scopes.includes("approve") || scopes.includes("admin");
}

/** The figures a park's note names, e.g. "budget reached: tool_calls 3 of 3" ->
 * {tool_calls: {spent: "3", limit: 3}}. Only our own words and numbers are in a note. */
export function reachedFigures(note) {
  const found = {};
  for (const m of String(note || "").matchAll(/\b(tool_calls|tokens|cost_usd|seconds) (\S+) of (\S+?)(?:,|$)/g)) {
    const limit = Number(m[3]);
    found[m[1]] = { spent: m[2], limit: Number.isFinite(limit) ? limit : null };
  }
  return found;
}

/** A form raising `sessionId`'s budget; each reached figure is offered at twice its limit. */
export function raiseForm(sessionId, note, { onRaised }) {
  const reached = reachedFigures(note);
  const inputs = {};
  const fields = FIGURES.map((f) => {
    const at = reached[f.name];
    const input = el("input", {
      type: "number",
      min: f.integer ? "1" : "0",
      step: f.integer ? "1" : "any",
      dataset: { testid: `raise-${f.name}` },
    });
    if (at && at.limit !== null) input.value = String(f.integer ? Math.max(1, Math.ceil(at.limit * 2)) : at.limit * 2);
    inputs[f.name] = input;
    return el("label", { class: "figure" }, f.words, input);
  });
  const error = el("p", { class: "error", role: "alert", dataset: { testid: "raise-error" } });
  const submit = async () => {
    setText(error, "");
    const body = {};
    for (const f of FIGURES) {
      const raw = inputs[f.name].value.trim();
      if (raw === "") continue;
      const value = Number(raw);
      if (!Number.isFinite(value) || (f.integer && !Number.isInteger(value))) {
        setText(error, `${f.words}: give ${f.integer ? "a whole number" : "a number"}`);
        return;
      }
      body[f.name] = value;
    }
    if (!Object.keys(body).length) {
      setText(error, "Give at least one new figure.");
      return;
    }
    try {
      const raised = await api(`/v1/sessions/${enc(sessionId)}/budget`, { method: "POST", body });
      onRaised(raised);
    } catch (err) {
      setText(error, err.problems && err.problems.length ? err.problems.join("; ") : err.message);
    }
  };
  return el(
    "div",
    { class: "subform raise", dataset: { testid: "raise-form" } },
    el("div", { class: "figures" }, ...fields),
    el("button", { type: "button", dataset: { testid: "raise-budget-confirm" }, onclick: submit }, "Raise budget"),
    error,
  );
}

/** The sessions parked at their budget (the inbox's `budgets`), one row each: what it
 * reached, and, for a key that may, the raise. Rows are kept across refreshes, so a raise
 * being typed in stays. */
export class BudgetList {
  constructor(list, title, { onRaised, onOpen }) {
    this.list = list;
    this.title = title;
    this.onRaised = onRaised;
    this.onOpen = onOpen;
    this.rows = new Map(); // session id -> row node
    this.notes = new Map(); // session id -> the park's note
    this.canRaise = false;
  }

  clear() {
    this.rows.clear();
    this.notes.clear();
    this.list.replaceChildren();
    this.title.hidden = true;
  }

  show(entries) {
    this.notes = new Map(entries.map((e) => [e.session.id, e.reached]));
    const wanted = entries.map((e) => {
      if (!this.rows.has(e.session.id)) this.rows.set(e.session.id, this.row(e));
      return this.rows.get(e.session.id);
    });
    for (const id of [...this.rows.keys()]) if (!this.notes.has(id)) this.rows.delete(id);
    const now = [...this.list.children];
    if (now.length !== wanted.length || now.some((node, i) => node !== wanted[i])) {
      this.list.replaceChildren(...wanted);
    }
    this.title.hidden = wanted.length === 0;
  }

  row(entry) {
    const s = entry.session;
    const form = raiseForm(s.id, entry.reached, { onRaised: () => this.onRaised(s.id) });
    form.hidden = true;
    return el(
      "li",
      { dataset: { testid: "budget-entry", session: s.id } },
      el(
        "div",
        { class: "budget-line" },
        el("span", { class: "session-title" }, s.title || "(untitled task)"),
        el("span", { class: "meta" }, `${s.agent} agent · session ${shortId(s.id)}`),
      ),
      el("div", { class: "muted reached" }, entry.reached || "budget reached"),
      el(
        "div",
        { class: "actions" },
        this.canRaise
          ? el("button", { type: "button", class: "secondary", dataset: { testid: "raise-budget" }, onclick: () => { form.hidden = !form.hidden; } }, "Raise budget…")
          : null,
        el("a", { class: "session-link", onclick: () => this.onOpen(s.id) }, "Open the session"),
      ),
      this.canRaise ? form : null,
    );
  }
}
