// A session's timeline: committed items in ordinal order, and the partial text of the model
// call in flight from delta events. Per the delta contract, a step shows the partial text
// of the highest (attempt, send) seen; a higher one starting drops a lower one's text (that
// attempt was retried), and the committed assistant item of the step replaces it.

import { el, pretty } from "./dom.js";

const WHO = {
  user_message: "user",
  assistant_message: "assistant",
  tool_call: "tool call",
  tool_result: "tool result",
  approval: "approval",
  error: "error",
};

export class Timeline {
  constructor(list, { onArtifact }) {
    this.list = list;
    this.onArtifact = onArtifact;
    this.reset();
  }

  reset() {
    this.list.replaceChildren();
    this.seen = new Set();
    this.committedSteps = new Set();
    this.partials = new Map(); // step -> {attempt, send, nextSeq, node, text}
  }

  /** A committed item (as GET /v1/sessions/{id} and the `item` event give it). */
  addItem(item) {
    if (this.seen.has(item.ordinal)) return;
    this.seen.add(item.ordinal);
    const data = item.data || {};
    if (item.kind === "assistant_message" && Number.isInteger(data.step)) {
      this.committedSteps.add(data.step);
      const partial = this.partials.get(data.step);
      if (partial) partial.node.remove();
      this.partials.delete(data.step);
    }
    const node = el(
      "li",
      { class: item.kind, dataset: { ordinal: item.ordinal, kind: item.kind, testid: "item" } },
      el("div", { class: "who" }, `#${item.ordinal} ${this.label(item)}`),
      this.body(item),
    );
    this.list.append(node);
    node.scrollIntoView({ block: "nearest" });
  }

  label(item) {
    const who = WHO[item.kind] || item.kind;
    const step = item.data && Number.isInteger(item.data.step) ? ` · step ${item.data.step}` : "";
    const tool = item.tool_name ? ` · ${item.tool_name}` : "";
    return `${who}${tool}${step}`;
  }

  body(item) {
    const data = item.data || {};
    if (item.kind === "tool_call") {
      return [
        el("div", { class: "text" }, `${item.tool_name || "?"} (${item.tool_call_id || ""})`),
        el("pre", { dataset: { testid: "arguments" } }, pretty(data.arguments ?? {})),
      ];
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
            `Open full result${Number.isInteger(size) ? ` (${size} bytes)` : ""}`,
          ),
        );
      }
      return parts;
    }
    const edited = data.arguments ?? data.proposed_arguments;
    if (item.kind === "approval" && edited !== undefined) {
      return [
        el("div", { class: "text" }, item.text),
        el("pre", { dataset: { testid: "edited-arguments" } }, pretty(edited)),
      ];
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
        el("div", { class: "who" }, `assistant · step ${d.step} · streaming (attempt ${attempt})`),
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
