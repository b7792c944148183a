// The page's words for the API's names: a session's status, how long ago, a short id.
// The API's own values stay in data-* attributes (for scripts and tests); people read these.

import { el } from "./dom.js";

const STATUS_WORDS = {
  created: "Starting",
  running: "Working",
  waiting_approval: "Needs approval",
  waiting_device: "Waiting for a device",
  waiting_model: "Waiting for the model",
  completed: "Done",
  failed: "Failed",
  cancelled: "Cancelled",
  archived: "Archived",
  no_answer: "No answer",
  budget_exhausted: "Budget reached",
  quota_exhausted: "Quota reached",
  frozen: "Frozen",
  check_failed: "Check failed",
  stuck: "Stuck",
};

/** The status in words; an unknown one as it is, with its underscores as spaces. */
export function statusWords(status) {
  return STATUS_WORDS[status] || String(status ?? "").replaceAll("_", " ");
}

/** A status badge: the words shown, the API's value in data-status and the class. */
export function statusBadge(status, checked = null) {
  const words = statusWords(status) + checkedWords(status, checked);
  return el("span", { class: `badge ${status}`, dataset: { status } }, words);
}

/** A completion says whether the task's own check passed: " (checked)" or " (unchecked)". */
export function checkedWords(status, checked) {
  if (status !== "completed" || checked === null || checked === undefined) return "";
  return checked ? " (checked)" : " (unchecked)";
}

/** Set an existing badge node to `status`. */
export function setBadge(node, status, checked = null) {
  node.textContent = statusWords(status) + checkedWords(status, checked);
  node.className = `badge ${status}`;
  node.dataset.status = status;
}

/** "just now", "4 min", "2 h", "3 days": how long since `when` (an ISO time). */
export function age(when, now = Date.now()) {
  const t = Date.parse(when);
  if (Number.isNaN(t)) return "";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  const days = Math.floor(s / 86400);
  return days === 1 ? "1 day" : `${days} days`;
}

/** "4 min ago" (or "just now"). */
export function ago(when, now = Date.now()) {
  const a = age(when, now);
  return a === "just now" || a === "" ? a : `${a} ago`;
}

/** The local time of day of an ISO time, e.g. "14:05". */
export function clock(when) {
  const t = new Date(when);
  if (Number.isNaN(t.getTime())) return "";
  return t.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

/** The first 8 characters of an id: enough to tell sessions apart at a glance. */
export function shortId(id) {
  return String(id ?? "").slice(0, 8);
}

/** A one-line summary of tool arguments, e.g. `path: notes.md · max_bytes: 10`. */
export function argumentLine(args, maxChars = 120) {
  if (!args || typeof args !== "object") return "";
  const parts = [];
  for (const [name, value] of Object.entries(args)) {
    const shown = typeof value === "string" ? value : JSON.stringify(value);
    parts.push(`${name}: ${String(shown).replace(/\s+/g, " ")}`);
  }
  const line = parts.join(" · ");
  return line.length > maxChars ? `${line.slice(0, maxChars - 1)}…` : line;
}
