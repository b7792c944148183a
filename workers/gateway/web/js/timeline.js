// A session's timeline: committed items in ordinal order, and the partial text of the model
// call in flight from delta events. Per the delta contract, a step shows the partial text
// of the highest (attempt, send) seen; a higher one starting drops a lower one's text (that
// attempt was retried), and the committed assistant item of the step replaces it.

import { el, pretty } from "./dom.js";
import { clock } from "./words.js";

// A budget raise is an approval item too (who raised it, to what), about no tool call.
const isBudgetRaise = (item) => item.kind === "approval" && item.data && "budget_raise" in item.data;
// The loop's note when it parks at a budget (workflows/budgets.py's words): a stop to raise.
const isBudgetPark = (item) => item.kind === "error" && String(item.text || "").startsWith("budget reached");

export class Timeline {
  constructor(list, { onArtifact }) {
    this.list = list;
    this.onArtifact = onArtifact;
    // step -> {button, form}: "Fork here" on each step's reply, when the session may be
    // forked by this key (set per session, before its items arrive); null: none.
    this.forker = null;
    this.reset();
  }

  reset() {
    this.list.replaceChildren();
    this.seen = new Set();
    this.userMessages = 0;
    this.callNames = new Map(); // tool_call_id -> tool name, for the decisions about them
    this.rejected = new Set(); // tool_call_ids whose rejection is shown
    this.committedSteps = new Set();
    this.partials = new Map(); // step -> {attempt, send, nextSeq, node, text}
  }

  /** A committed item (as GET /v1/sessions/{id} and the `item` event give it). */
  addItem(item) {
    if (this.seen.has(item.ordinal)) return;
    this.seen.add(item.ordinal);
    const data = item.data || {};
    if (item.kind === "tool_call" && item.tool_call_id) this.callNames.set(item.tool_call_id, item.tool_name);
    if (item.kind === "approval" && !isBudgetRaise(item) && !data.approved && !data.rerun) {
      this.rejected.add(item.tool_call_id);
    }
    // A rejection is also the call's result (what the model is told): the decision shown
    // above already says it, with the reason.
    if (item.kind === "tool_result" && data.error_type === "Rejected" && this.rejected.has(item.tool_call_id)) return;
    if (item.kind === "assistant_message" && Number.isInteger(data.step)) {
      this.committedSteps.add(data.step);
      const partial = this.partials.get(data.step);
      if (partial) partial.node.remove();
      this.partials.delete(data.step);
    }
    const tone = this.tone(item);
    const fork = item.kind === "assistant_message" && Number.isInteger(data.step) && this.forker ? this.forker(data.step) : null;
    const node = el(
      "li",
      {
        class: `${item.kind}${tone ? ` ${tone}` : ""}`,
        dataset: {
          ordinal: item.ordinal,
          kind: item.kind,
          testid: "item",
          step: Number.isInteger(data.step) ? data.step : undefined,
          call: item.tool_call_id || undefined,
        },
      },
      el("div", { class: "who" }, ...this.label(item), fork && fork.button),
      this.body(item),
      fork && fork.form,
    );
    this.list.append(node);
    node.scrollIntoView({ block: "nearest" });
  }

  tone(item) {
    const data = item.data || {};
    if (isBudgetRaise(item)) return "approved";
    if (isBudgetPark(item)) return "parked";
    if (item.kind === "approval") return data.approved ? "approved" : "rejected";
    if (item.kind === "tool_result" && data.error_type) return "failed";
    return "";
  }

  /** The headline: who did what, then the step (counted from 1) and the time, muted. */
  label(item) {
    const data = item.data || {};
    const tool = (name) => el("code", { class: "tool" }, name || "a tool");
    let words;
    switch (isBudgetRaise(item) ? "budget_raise" : item.kind) {
      case "budget_raise":
        words = [`↑ ${data.decided_by || "Someone"} raised the budget`];
        break;
      case "user_message":
        this.userMessages += 1;
        words = data.nudge ? ["Reminder to the model"] : [this.userMessages === 1 ? "Task" : "Follow-up"];
        break;
      case "assistant_message":
        words = ["Agent"];
        break;
      case "tool_call":
        words = ["Agent calls ", tool(item.tool_name)];
        break;
      case "tool_result":
        if (data.error_type === "Rejected" || data.declined) words = [tool(item.tool_name), " did not run"];
        else if (data.error_type) words = [tool(item.tool_name), " failed"];
        else if (data.edited) words = ["Result of ", tool(item.tool_name), ", edited at the fork"];
        else words = ["Result of ", tool(item.tool_name)];
        break;
      case "approval": {
        const who = data.decided_by || "Someone";
        const name = item.tool_name || this.callNames.get(item.tool_call_id);
        const verb = data.approved
          ? data.rerun ? "approved running again" : "approved"
          : data.rerun ? "declined running again" : "rejected";
        const edited = data.approved && data.arguments !== undefined ? " with edited arguments" : "";
        words = [`${data.approved ? "✓" : "✕"} ${who} ${verb} `, tool(name), edited];
        break;
      }
      case "error":
        words = [isBudgetPark(item) ? "Stopped at its budget" : "The task stopped"];
        break;
      default:
        words = [String(item.kind).replaceAll("_", " ")];
    }
    const meta = [];
    if (Number.isInteger(data.step)) meta.push(`step ${data.step + 1}`);
    const at = clock(item.created_at);
    if (at) meta.push(at);
    return [el("span", { class: "what" }, ...words), el("span", { class: "meta" }, meta.join(" · "))];
  }

  body(item) {
    const data = item.data || {};
    if (item.kind === "tool_call") {
      return el("pre", { dataset: { testid: "arguments" } }, pretty(data.arguments ?? {}));
    }
    if (item.kind === "tool_result") {
      const parts = [el("pre", { dataset: { testid: "preview" } }, item.text)];
      if (item.artifact_id) {
        const size = data.artifact && data.artifact.size_bytes;
        parts.push(
          el(
            "button",
            {
              type: "button",
              class: "small secondary",
              dataset: { testid: "open-artifact", artifact: item.artifact_id },
              onclick: () => this.onArtifact(item.artifact_id),
            },
            `Open full result${Number.isInteger(size) ? ` (${bytes(size)})` : ""}`,
          ),
        );
      }
      return parts;
    }
    if (isBudgetRaise(item)) {
      const figures = Object.entries(data.budget_raise || {}).map(([name, value]) => `${name.replaceAll("_", " ")} ${value}`);
      return el("div", { class: "text", dataset: { testid: "budget-raise" } }, `New budget: ${figures.join(", ")}`);
    }
    if (item.kind === "approval") {
      const parts = [];
      if (!data.approved) {
        parts.push(el("div", { class: "text" }, data.reason ? `Reason: ${data.reason}` : "No reason given."));
      }
      if (data.arguments !== undefined) {
        parts.push(el("pre", { dataset: { testid: "edited-arguments" } }, pretty(data.arguments)));
      }
      return parts;
    }
    const calls = Array.isArray(data.tool_calls) ? data.tool_calls.map((c) => c && c.name).filter(Boolean) : [];
    if (item.kind === "assistant_message" && !item.text && calls.length) {
      // A reply that only calls tools: say so rather than show an empty box.
      return el("div", { class: "text note" }, `wants to run ${calls.join(", ")}`);
    }
    return el("div", { class: "text" }, item.text);
  }

  /** A token delta: {step, attempt, send, seq, text}. */
  delta(d) {
    if (!Number.isInteger(d.step) || typeof d.text !== "string") return;
    if (this.committedSteps.has(d.step)) return; // the durable record is already shown
    const attempt = Number(d.attempt) || 0;
    const send = Number(d.send) || 0;
    const seq = Number(d.seq) || 0;
    let partial = this.partials.get(d.step);
    if (partial && (attempt < partial.attempt || (attempt === partial.attempt && send < partial.send))) {
      return; // from a call that was already retried
    }
    if (!partial || attempt > partial.attempt || send > partial.send) {
      // A new (or retried) call of this step: its text starts over.
      const text = el("div", { class: "text" });
      const node = el(
        "li",
        { class: "partial", dataset: { testid: "partial", step: d.step, attempt, send } },
        el(
          "div",
          { class: "who" },
          el("span", { class: "what" }, attempt > 1 ? `Agent · writing (try ${attempt})…` : "Agent · writing…"),
          el("span", { class: "meta" }, `step ${d.step + 1}`),
        ),
        text,
      );
      if (partial) partial.node.replaceWith(node);
      else this.list.append(node);
      partial = { attempt, send, nextSeq: 0, node, text };
      this.partials.set(d.step, partial);
    }
    if (seq < partial.nextSeq) return; // already shown
    partial.nextSeq = seq + 1;
    partial.text.append(document.createTextNode(d.text));
  }
}

/** A size for people: "812 bytes", "4.2 KB", "1.3 MB". */
function bytes(n) {
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MB`;
}
