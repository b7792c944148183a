// A session's events over fetch: EventSource cannot send the Authorization header. A small
// parser of the Server-Sent Events wire format, and a follower that reconnects with
// Last-Event-ID (the last committed item's ordinal) so nothing is lost or repeated.
// Delta events carry no id, so they never move the cursor; they are not replayed.

import { authHeaders } from "./api.js";

/** A function taking decoded text chunks and calling onEvent({event, data, id}) for each
 * complete event (id is undefined when the event had no id line). */
export function sseParser(onEvent) {
  let buffer = "";
  let data = [];
  let event = "";
  let id;
  const dispatch = () => {
    if (data.length > 0) onEvent({ event: event || "message", data: data.join("\n"), id });
    data = [];
    event = "";
    id = undefined;
  };
  const line = (text) => {
    if (text === "") return dispatch();
    if (text.startsWith(":")) return; // a comment: the heartbeat
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
    else if (field === "id" && !value.includes("\0")) id = value;
  };
  return (chunk) => {
    buffer += chunk;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop();
    for (const text of lines) line(text);
  };
}

const FATAL = new Set([400, 401, 403, 404]);

/** Follow `path` until its `end` event or `signal` aborts, reconnecting after a drop.
 * onState(state, detail) hears "connecting", "live", "reconnecting", "ended", "error". */
export async function follow(path, { onEvent, onState = () => {}, signal }) {
  let lastId = null;
  let delay = 500;
  while (!signal.aborted) {
    const headers = authHeaders({ Accept: "text/event-stream" });
    if (lastId !== null) headers["Last-Event-ID"] = lastId;
    let ended = false;
    try {
      onState("connecting");
      const response = await fetch(path, { headers, signal, cache: "no-store" });
      if (FATAL.has(response.status)) {
        let message = `the stream was refused (${response.status})`;
        try {
          message = (await response.json()).error.message || message;
        } catch {
          /* keep the status */
        }
        onState("error", message);
        return;
      }
      if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
      onState("live");
      delay = 500;
      const feed = sseParser((ev) => {
        if (ev.id !== undefined) lastId = ev.id;
        if (ev.event === "end") ended = true;
        onEvent(ev);
      });
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        feed(value);
      }
    } catch (err) {
      if (signal.aborted) return;
    }
    if (ended) {
      onState("ended");
      return;
    }
    onState("reconnecting");
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 10_000);
  }
}
