// Forks on the page: each step of a session's timeline offers "Fork here" to a key that may
// start tasks. A fork is a new task from everything the session committed before that step,
// which makes the step's model call again, optionally told something more
// (POST /v1/sessions/{id}/fork); the session itself is not changed. Keys without the scope
// never see the control (the server refuses them with 403 anyway).

import { api, enc } from "./api.js";
import { el, setText } from "./dom.js";
import { shortId } from "./words.js";

/** Whether a key with these scopes may fork (as the server's start scope). */
export function mayFork(scopes) {
  return scopes.includes("start") || scopes.includes("admin");
}

/** The timeline's "Fork here" maker for `session` (step -> control), or null when this key
 * may not fork it. A sub-agent's session is forked through its task's. */
export function forker(session, scopes, onForked) {
  if (!mayFork(scopes) || session.parent_id) return null;
  return (step) => forkControl(session.id, step, { onForked });
}

/** A fork's line in the session list: " · fork of abcd1234" (nothing for another session). */
export function forkOf(session) {
  return session.forked_from ? ` · fork of ${shortId(session.forked_from)}` : "";
}

/** What the open session's meta line adds for a fork: its parent, a link that opens it. */
export function forkedFrom(session, onOpen) {
  const parent = session.forked_from;
  if (!parent) return [];
  const link = el("a", { class: "session-link", dataset: { testid: "forked-from" }, onclick: () => onOpen(parent) }, shortId(parent));
  return [" · forked from ", link];
}

/** "Fork here" for step `step` (as the API counts, from 0) of `sessionId`: a button that
 * opens a small form (an optional instruction) and, once the fork is made, hands its
 * session id to `onForked`. */
export function forkControl(sessionId, step, { onForked }) {
  const instruction = el("textarea", { rows: "2", dataset: { testid: "fork-instruction" } });
  const error = el("p", { class: "error", role: "alert", dataset: { testid: "fork-error" } });
  const confirm = el("button", { type: "button", dataset: { testid: "fork-confirm" } }, `Fork from step ${step + 1}`);
  const submit = async () => {
    setText(error, "");
    const body = { at: step };
    const said = instruction.value.trim();
    if (said) body.instruction = instruction.value;
    confirm.disabled = true;
    try {
      const forked = await api(`/v1/sessions/${enc(sessionId)}/fork`, { method: "POST", body });
      onForked(forked.session_id);
    } catch (err) {
      setText(error, err.message);
    } finally {
      confirm.disabled = false;
    }
  };
  confirm.addEventListener("click", submit);
  const form = el(
    "div",
    { class: "subform fork", dataset: { testid: "fork-form", step } },
    el("p", { class: "muted" }, "A new task from everything before this step; it takes this step again. This task is not changed."),
    el("label", {}, "Tell the fork something more ", el("small", { class: "muted" }, "(optional)"), instruction),
    confirm,
    error,
  );
  form.hidden = true;
  const open = el(
    "button",
    {
      type: "button",
      class: "small secondary fork-here",
      title: "Start a new task from here",
      dataset: { testid: "fork-here", step },
      onclick: () => {
        form.hidden = !form.hidden;
        if (!form.hidden) instruction.focus();
      },
    },
    "Fork here",
  );
  return { button: open, form };
}
