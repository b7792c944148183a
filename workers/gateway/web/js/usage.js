// Usage on the page (GET /v1/usage): the tenant's model usage today (UTC, as the server
// keeps days) and the open session's. Tokens in and out, cached, replies and cost; a cost
// is shown only when every reply was priced (the server says null otherwise, never a guess).

import { api, enc } from "./api.js";
import { el, setText } from "./dom.js";

const count = new Intl.NumberFormat("en-US");

/** Today's date in UTC, as the API's `day`. */
export function todayUtc(now = new Date()) {
  return now.toISOString().slice(0, 10);
}

/** The cost in words: dollars, or why there is none. */
export function costWords(total) {
  if (total.cost_usd === null || total.cost_usd === undefined) {
    return total.unpriced_replies ? `cost unknown (${count.format(total.unpriced_replies)} unpriced)` : "cost unknown";
  }
  const usd = Number(total.cost_usd);
  return `$${usd.toFixed(usd && usd < 0.01 ? 6 : 2)}`;
}

function figures(node, total) {
  node.dataset.replies = String(total.replies);
  node.dataset.inputTokens = String(total.input_tokens);
  node.dataset.outputTokens = String(total.output_tokens);
  node.dataset.costUsd = total.cost_usd === null ? "" : String(total.cost_usd);
}

/** The tenant's usage today into `node` (a <dl>). */
export async function showTenantDay(node) {
  const total = (await api(`/v1/usage?day=${todayUtc()}`)).total;
  figures(node, total);
  const row = (term, value, testid) => [el("dt", {}, term), el("dd", { dataset: { testid } }, value)];
  node.replaceChildren(
    ...row("Tokens in", count.format(total.input_tokens), "usage-in"),
    ...row("Tokens out", count.format(total.output_tokens), "usage-out"),
    ...row("Cached", count.format(total.cached_tokens), "usage-cached"),
    ...row("Model replies", count.format(total.replies), "usage-replies"),
    ...row("Cost", costWords(total), "usage-cost"),
  );
}

/** One session's usage as a line into `node`. */
export async function showSession(node, sessionId) {
  const total = (await api(`/v1/usage?session=${enc(sessionId)}`)).total;
  figures(node, total);
  node.dataset.session = sessionId;
  setText(
    node,
    total.replies
      ? `Used ${count.format(total.input_tokens)} tokens in (${count.format(total.cached_tokens)} cached), ` +
          `${count.format(total.output_tokens)} out over ${count.format(total.replies)} model ` +
          `${total.replies === 1 ? "reply" : "replies"} · ${costWords(total)}`
      : "No model replies yet.",
  );
}
