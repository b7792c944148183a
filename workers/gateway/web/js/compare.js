// Compare on the page: tick two sessions or more in the list and "Compare" sets them side by
// side (GET /v1/compare): how each ended (status, check, totals, final answer, where it
// first parts from the first), then a row per step with each session's calls, the argument
// keys that differ from the first session's, how their results came out, and the tokens,
// cost and time the step took. The step where a session first parts from the first is
// marked, with why. Every string from the API becomes text (dom.js), never markup.

import { api, enc } from "./api.js";
import { el, setText } from "./dom.js";
import { shortId, statusBadge } from "./words.js";

// As many sessions as the server compares at once.
export const MAX_COMPARED = 8;

const count = new Intl.NumberFormat("en-US");
const CHECK_WORDS = { passed: "Passed", failed: "Failed", "not reached": "Not reached" };

/** A cost in words: dollars, or "unpriced" (the server says null: never a guess). */
function usd(cost) {
  if (cost === null || cost === undefined) return "unpriced";
  const n = Number(cost);
  return `$${n.toFixed(n && n < 0.01 ? 6 : 2)}`;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "time unknown";
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

/** Where a session first parts from the first one, in words (steps counted from 1). */
function partedWords(session, index) {
  if (index === 0) return "the one compared with";
  const d = session.divergence;
  if (!d) return session.ended ? "never" : "not so far";
  return `step ${d.step + 1}: ${d.reason} (${d.detail})`;
}

function callLine(call) {
  const notes = [];
  if (call.another_call) notes.push("another call");
  else if (call.other_keys.length) notes.push(`other ${call.other_keys.join(", ")}`);
  const outcome = call.outcome === "pending" ? "no result yet" : call.outcome;
  const content = call.content ? `, ${call.content === "same" ? "same result" : "other result"}` : "";
  const differs = notes.length > 0 || call.content === "different";
  return el(
    "div",
    { class: `call${differs ? " differs" : ""}`, dataset: { testid: "compare-call" } },
    el("code", {}, call.name),
    notes.length ? ` (${notes.join("; ")})` : "",
    ` → ${outcome}${content}`,
  );
}

function stepCell(view, session) {
  if (!view) return el("td", { class: "none muted" }, "—");
  const lines = view.calls.map(callLine);
  if (view.answered) {
    const same = view.answer === null ? "" : view.answer === "same" ? " (same text)" : " (other text)";
    lines.push(el("div", { class: `call${view.answer === "different" ? " differs" : ""}` }, `Answered${same}`));
  }
  const d = session.divergence;
  const parted = view.diverged && d ? el("div", { class: "parted", dataset: { testid: "diverged" } }, `Parts here: ${d.reason} (${d.detail})`) : null;
  const figures = `${count.format(view.input_tokens)} in · ${count.format(view.output_tokens)} out · ${usd(view.cost_usd)} · ${duration(view.seconds)}`;
  return el(
    "td",
    {
      class: view.diverged ? "diverged" : "",
      dataset: { testid: "compare-cell", session: session.session_id, step: view.step, diverged: view.diverged ? "true" : null },
    },
    ...lines,
    parted,
    el("div", { class: "took muted" }, figures),
  );
}

export class Compare {
  /** `section`: where the view goes; `button`: the list's "Compare"; `onOpen(id)` opens a
   * session; `onShow()` clears the place before the view shows. */
  constructor(section, button, { onOpen, onShow }) {
    this.section = section;
    this.body = section.querySelector(".compare-body");
    this.error = section.querySelector(".error");
    this.button = button;
    this.onOpen = onOpen;
    this.onShow = onShow;
    this.picked = new Set(); // in the order ticked: the first is the one compared with
    button.addEventListener("click", () => this.show([...this.picked]));
    section.querySelector(".close").addEventListener("click", () => this.close());
    this.update();
  }

  /** The tick box of a session's row in the list (ticking it does not open the session). */
  box(id) {
    return el("input", {
      type: "checkbox",
      class: "pick",
      title: "Pick to compare",
      "aria-label": `Compare session ${shortId(id)}`,
      checked: this.picked.has(id),
      dataset: { testid: "compare-pick", session: id },
      onclick: (ev) => ev.stopPropagation(),
      onchange: (ev) => {
        if (ev.target.checked) this.picked.add(id);
        else this.picked.delete(id);
        this.update();
      },
    });
  }

  update() {
    const n = this.picked.size;
    this.button.disabled = n < 2 || n > MAX_COMPARED;
    setText(this.button, n ? `Compare (${n})` : "Compare");
    this.button.title = n > MAX_COMPARED ? `At most ${MAX_COMPARED} sessions at once` : n < 2 ? "Tick two sessions or more to compare them" : "";
  }

  close() {
    this.section.hidden = true;
    this.body.replaceChildren();
    setText(this.error, "");
  }

  clear() {
    this.close();
    this.picked.clear();
    this.update();
  }

  async show(ids) {
    this.onShow();
    this.section.hidden = false;
    this.body.replaceChildren(el("p", { class: "muted" }, "Comparing…"));
    setText(this.error, "");
    let found;
    try {
      found = await api(`/v1/compare?sessions=${ids.map(enc).join(",")}`);
    } catch (err) {
      this.body.replaceChildren();
      setText(this.error, err.message);
      return;
    }
    this.body.replaceChildren(this.summary(found.sessions), this.steps(found));
  }

  heads(sessions) {
    return el(
      "tr",
      {},
      el("th", {}, ""),
      ...sessions.map((s, k) =>
        el(
          "th",
          { scope: "col", dataset: { session: s.session_id } },
          el("a", { class: "session-link", dataset: { testid: "compare-open-session" }, onclick: () => this.onOpen(s.session_id) }, `${k + 1}. ${shortId(s.session_id)}`),
          el("div", { class: "muted" }, `${s.agent} agent`),
        ),
      ),
    );
  }

  summary(sessions) {
    const row = (name, testid, cell) =>
      el("tr", { dataset: { testid } }, el("th", { scope: "row" }, name), ...sessions.map((s, k) => el("td", { dataset: { session: s.session_id } }, cell(s, k))));
    const answer = (s) => {
      if (s.answer === null) return el("span", { class: "muted" }, "none (its last step called tools)");
      const more = s.answer_chars > s.answer.length ? el("span", { class: "muted" }, ` (${count.format(s.answer_chars)} characters in full)`) : null;
      return el("span", { class: "answer" }, s.answer, more);
    };
    return el(
      "table",
      { class: "compare", dataset: { testid: "compare-summary" } },
      el("thead", {}, this.heads(sessions)),
      el(
        "tbody",
        {},
        row("Status", "compare-status", (s) => statusBadge(s.status, s.status === "completed" ? s.check === "passed" : null)),
        row("Check", "compare-check", (s) => (s.check === null ? "—" : CHECK_WORDS[s.check] || s.check)),
        row("Steps", "compare-steps-count", (s) => count.format(s.steps)),
        row("Tokens", "compare-tokens", (s) => count.format(s.tokens)),
        row("Cost", "compare-cost", (s) => usd(s.cost_usd)),
        row("Time", "compare-time", (s) => duration(s.seconds)),
        row("First divergence", "compare-divergence", (s, k) => partedWords(s, k)),
        row("Final answer", "compare-answer", answer),
      ),
    );
  }

  steps(found) {
    const rows = found.steps.map((r) =>
      el(
        "tr",
        { dataset: { testid: "compare-step", step: r.step } },
        el("th", { scope: "row" }, `Step ${r.step + 1}`),
        ...r.sessions.map((view, k) => stepCell(view, found.sessions[k])),
      ),
    );
    return el(
      "table",
      { class: "compare steps", dataset: { testid: "compare-steps" } },
      el("thead", {}, this.heads(found.sessions)),
      el("tbody", {}, ...rows),
    );
  }
}
