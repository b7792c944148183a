// The gateway's REST API with the signed-in key. The key lives in sessionStorage (this tab,
// until it closes or the user signs out) and goes only in the Authorization header.

const KEY_NAME = "durable-agents.api-key";

export const keyStore = {
  get: () => sessionStorage.getItem(KEY_NAME),
  set: (key) => sessionStorage.setItem(KEY_NAME, key),
  clear: () => sessionStorage.removeItem(KEY_NAME),
};

export class ApiError extends Error {
  constructor(status, type, message, problems = []) {
    super(message);
    this.status = status;
    this.type = type;
    // One string per problem when the server lists several (e.g. refused edited arguments).
    this.problems = problems;
  }
}

export function authHeaders(extra = {}) {
  return { Authorization: `Bearer ${keyStore.get() ?? ""}`, ...extra };
}

/** Call the API; the parsed JSON body, or an ApiError carrying the server's message. */
export async function api(path, { method = "GET", body } = {}) {
  const headers = authHeaders({ Accept: "application/json" });
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (err) {
    throw new ApiError(0, "network", "the gateway cannot be reached; try again");
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(
      response.status,
      error.type || "http_error",
      error.message || `the gateway answered ${response.status}`,
      Array.isArray(error.errors) ? error.errors.map(String) : [],
    );
  }
  return data;
}

export const enc = encodeURIComponent;
