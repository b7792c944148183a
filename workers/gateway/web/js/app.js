// The page: sign in with an API key, sessions with status (tick some to compare them), a
// session's live timeline (each step can be forked into a new task), the approvals inbox
// (and tasks stopped at their budget, raised by a key that may approve), usage (the
// tenant's today, the open session's), start a task and send a follow-up. Everything goes
// through the gateway's REST API and event stream with the key in the Authorization header.

import { ApiError, api, enc, keyStore } from "./api.js";
import { BudgetList, mayRaise, raiseForm } from "./budget.js";
import { Compare } from "./compare.js";
import { el, setText } from "./dom.js";
import { forkedFrom, forker } from "./fork.js";
import { Inbox } from "./inbox.js";
import { loadAgents, loadTools } from "./start_choices.js";
import { SessionList } from "./session_list.js";
import { follow } from "./sse.js";
import { Timeline } from "./timeline.js";
import { showSession, showTenantDay } from "./usage.js";
import { ago, clock, setBadge, statusBadge } from "./words.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 3000;
// The tenant's usage today sums the day's replies: asked for less often than the lists, and
// when a task of the open session changes status.
const DAY_USAGE_MS = 30000;
// The session's event stream, in words (its state stays in data-state).
const STREAM_WORDS = {
  connecting: "connecting…",
  live: "live",
  reconnecting: "connection lost, reconnecting…",
  ended: "", // the status badge says how it ended
  error: "updates stopped",
};

let current = null; // {id, stream: AbortController}
let refresher = null;
let scopes = []; // the signed-in key's (GET /v1/me)
let dayShownAt = 0;

const timeline = new Timeline($("timeline"), { onArtifact: openArtifact });
const compare = new Compare($("compare"), $("compare-open"), {
  onOpen: (id) => openSession(id),
  onShow: () => closeSession(),
});
const sessions = new SessionList($("sessions"), { compare, onOpen: (id) => openSession(id) });
const budgets = new BudgetList($("budgets"), $("budgets-title"), {
  onRaised: (id) => raised(id),
  onOpen: (id) => openSession(id),
});
const inbox = new Inbox($("inbox"), $("inbox-empty"), $("inbox-count"), {
  onDecided: () => refreshLists(),
  onOpen: (id) => openSession(id),
  onBudgets: (entries) => {
    budgets.show(entries);
    // The open session's note, when its status came without one (on opening the page).
    const parked = current && $("session-status").dataset.status === "budget_exhausted";
    if (parked && !$("session-detail").textContent) setText($("session-detail"), budgets.notes.get(current.id) || "");
  },
});

async function signIn(key) {
  keyStore.set(key);
  try {
    const me = await api("/v1/me");
    setText($("whoami"), `${me.user_id} @ ${me.tenant_id}`);
    scopes = me.scopes;
    budgets.canRaise = mayRaise(scopes);
  } catch (err) {
    keyStore.clear();
    const message =
      err instanceof ApiError && err.status === 401
        ? "That key was not accepted: it is unknown, revoked or expired."
        : err.message;
    setText($("signin-error"), message);
    return;
  }
  setText($("signin-error"), "");
  $("key").value = "";
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = false;
  await Promise.all([loadAgents(), refreshLists()]);
  refresher = setInterval(refreshLists, REFRESH_MS);
}

function signOut() {
  keyStore.clear();
  clearInterval(refresher);
  closeSession();
  $("app").hidden = true;
  $("signout").hidden = true;
  $("signin").hidden = false;
  setText($("whoami"), "");
  sessions.clear();
  inbox.clear();
  budgets.clear();
  compare.clear();
  scopes = [];
  $("usage-today").replaceChildren();
  dayShownAt = 0;
}

async function refreshLists() {
  if (!keyStore.get()) return;
  const results = await Promise.allSettled([
    refreshSessions(),
    inbox.refresh(),
    Date.now() - dayShownAt >= DAY_USAGE_MS ? refreshDay() : null,
  ]);
  const refused = results.find((r) => r.status === "rejected" && r.reason.status === 401);
  if (refused) {
    // Revoked or expired while signed in: back to the sign-in form, saying why.
    signOut();
    setText($("signin-error"), "Your key is no longer accepted: it was revoked or has expired.");
  }
}

function refreshDay() {
  dayShownAt = Date.now();
  return showTenantDay($("usage-today"));
}

async function refreshSessions() {
  const page = await api("/v1/sessions?limit=50");
  sessions.show(page.sessions, current && current.id);
}

function closeSession() {
  compare.close();
  if (current) current.stream.abort();
  current = null;
  timeline.forker = null;
  $("session").hidden = true;
  $("session-budget").hidden = true;
  $("session-raise-form").replaceChildren();
  setText($("session-usage"), "");
}

async function openSession(id) {
  closeSession();
  const stream = new AbortController();
  current = { id, stream };
  timeline.reset();
  $("session").hidden = false;
  setText($("followup-error"), "");
  try {
    const page = await api(`/v1/sessions/${enc(id)}?limit=1`);
    const s = page.session;
    setText($("session-title"), s.title || id);
    const started = `${s.agent} agent · session ${id} · started ${ago(s.created_at)}`;
    $("session-meta").replaceChildren(started, ...forkedFrom(s, openSession));
    // A fork made from the timeline is the session shown next.
    timeline.forker = forker(s, scopes, (fork) => {
      openSession(fork);
      refreshLists();
    });
    showStatus(s.status, waitWords(s));
  } catch (err) {
    setText($("session-title"), err.message);
    return;
  }
  refreshTree(id);
  refreshUsage(id);
  startStream(id, stream);
}

async function refreshUsage(id) {
  try {
    await showSession($("session-usage"), id);
  } catch {
    /* the figures come back with the next reply */
  }
}

/** A task stopped at its budget: the raise, for a key that may (the form appears once). */
function showBudget() {
  const parked = $("session-status").dataset.status === "budget_exhausted";
  $("session-budget").hidden = !parked;
  $("session-raise").hidden = !parked || !mayRaise(scopes);
  $("session-raise-who").hidden = !parked || mayRaise(scopes);
  if (!parked) $("session-raise-form").replaceChildren();
}

function openRaise() {
  if (!current) return;
  const { id } = current;
  const note = budgets.notes.get(id) || $("session-detail").textContent;
  $("session-raise-form").replaceChildren(raiseForm(id, note, { onRaised: () => raised(id) }));
}

/** After a raise: the task goes on (its status comes on the open stream). */
function raised(id) {
  $("session-raise-form").replaceChildren();
  refreshLists();
  if (current && current.id === id) refreshUsage(id);
}

function startStream(id, stream) {
  follow(`/v1/sessions/${enc(id)}/events`, {
    signal: stream.signal,
    onState: (state, detail) => {
      const node = $("stream-state");
      node.dataset.state = state;
      const words = state in STREAM_WORDS ? STREAM_WORDS[state] : state;
      setText(node, detail ? `${words}: ${detail}` : words);
    },
    onEvent: (ev) => {
      if (!current || current.id !== id) return;
      let data;
      try {
        data = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (ev.event === "item") {
        timeline.addItem(data);
        if (data.kind === "assistant_message") refreshUsage(id);
      }
      else if (ev.event === "delta") timeline.delta(data);
      else if (ev.event === "status") {
        showStatus(data.status, data.detail);
        refreshLists();
        refreshDay().catch(() => {});
        refreshTree(id);
      } else if (ev.event === "end") showStatus(data.status, "");
    },
  });
}

function showStatus(status, detail) {
  setBadge($("session-status"), status);
  // The badge names the status already: a detail that repeats it as its prefix drops it.
  let words = String(detail || "");
  if (words.startsWith(`${status}:`)) words = words.slice(status.length + 1).trim();
  if (!words && status === "waiting_approval") words = "decide under “Waiting for approval”";
  if (!words && status === "budget_exhausted" && current) words = budgets.notes.get(current.id) || "";
  setText($("session-detail"), words);
  showBudget();
}

/** What a session waiting for the model waits for, from its wait_detail. */
function waitWords(session) {
  const d = session.wait_detail;
  if (session.status !== "waiting_model" || !d || typeof d !== "object") return "";
  const what = d.activity === "compact_session" ? "compaction" : "model call";
  const next = d.next_try_at ? `; next try at ${clock(d.next_try_at)}` : "";
  return `${what} attempt ${d.attempt ?? "?"} failed${next}`;
}

async function refreshTree(id) {
  let sessions;
  try {
    sessions = (await api(`/v1/sessions/${enc(id)}/tree`)).sessions;
  } catch {
    return;
  }
  if (sessions.length < 2) {
    $("tree").replaceChildren();
    return;
  }
  const children = new Map();
  for (const s of sessions) {
    const parent = s.parent_id || "";
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(s);
  }
  const branch = (s) =>
    el(
      "li",
      { dataset: { testid: "tree-node", session: s.id } },
      el(
        "a",
        { class: s.id === id ? "current" : "", onclick: () => openSession(s.id) },
        `${s.title} (${s.agent} agent) `,
      ),
      statusBadge(s.status, s.checked),
      (children.get(s.id) || []).length ? el("ul", {}, children.get(s.id).map(branch)) : null,
    );
  $("tree").replaceChildren(el("div", { class: "muted" }, "Sub-agents"), el("ul", {}, branch(sessions[0])));
}

async function openArtifact(artifactId) {
  try {
    const link = await api(`/v1/artifacts/${enc(artifactId)}/link`);
    const url = new URL(link.url);
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error("not a download URL");
    // A navigation to the store's origin, not a cross-origin fetch: no CORS needed.
    window.open(url.href, "_blank", "noopener,noreferrer");
  } catch (err) {
    setText($("followup-error"), `The artifact cannot be opened: ${err.message}`);
  }
}

$("signin-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const key = $("key").value.trim();
  if (key) signIn(key);
});
$("signout").addEventListener("click", signOut);
$("sessions-refresh").addEventListener("click", refreshLists);
$("inbox-refresh").addEventListener("click", refreshLists);
$("start-agent").addEventListener("change", loadTools);
$("session-raise").addEventListener("click", openRaise);

/** The start form's budget: the figures given, as the API names them. */
function startBudget() {
  const budget = {};
  const figures = [
    ["budget_tool_calls", "start-budget-tool-calls"],
    ["budget_tokens", "start-budget-tokens"],
    ["budget_cost_usd", "start-budget-cost"],
  ];
  for (const [name, id] of figures) {
    const raw = $(id).value.trim();
    if (raw !== "") budget[name] = Number(raw);
  }
  return budget;
}

$("start-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  setText($("start-error"), "");
  const policies = {};
  const ticked = [...$("start-tools").querySelectorAll("input:checked:not(:disabled)")].map((b) => b.value);
  const typed = $("start-approve").value.split(",").map((n) => n.trim()).filter(Boolean);
  for (const name of [...ticked, ...typed]) policies[name] = "always";
  try {
    const started = await api("/v1/sessions", {
      method: "POST",
      body: {
        text: $("start-text").value,
        agent: $("start-agent").value,
        approval_policies: policies,
        ...startBudget(),
      },
    });
    $("start-text").value = "";
    for (const id of ["start-budget-tool-calls", "start-budget-tokens", "start-budget-cost"]) $(id).value = "";
    $("start-budget").open = false;
    await refreshLists();
    openSession(started.session_id);
  } catch (err) {
    setText($("start-error"), err.message);
  }
});

$("followup-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  if (!current) return;
  setText($("followup-error"), "");
  const { id } = current;
  try {
    await api(`/v1/sessions/${enc(id)}/messages`, {
      method: "POST",
      body: { text: $("followup-text").value },
    });
    $("followup-text").value = "";
    openSession(id); // the stream may have ended with the previous answer
  } catch (err) {
    setText($("followup-error"), err.message);
  }
});

const saved = keyStore.get();
if (saved) signIn(saved);
