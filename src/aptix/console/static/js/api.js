// The HTTP API: bearer key from session storage, JSON errors, and Server-Sent Events over
// fetch (EventSource cannot POST).

const KEY = "aptix.apiKey";

export function storedKey() {
  return sessionStorage.getItem(KEY);
}

export function storeKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** The server refused the key (401): the console goes back to sign-in. */
export class Unauthorized extends Error {}

/** Any other refusal, with the API's error code and message (and Retry-After's seconds). */
export class ApiError extends Error {
  constructor(status, code, message, retryAfter = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

/** Why a key cannot be sent at all: a header carries Latin-1 text without controls. */
export function keyProblem(key) {
  return /[^\x20-\x7E\xA0-\xFF]/.test(key) ? "it contains characters an API key cannot have" : null;
}

const listeners = new Set();

/** Call fn() whenever a request answers 401. */
export function onUnauthorized(fn) {
  listeners.add(fn);
}

function headers(json) {
  const out = { Accept: json ? "application/json" : "text/event-stream" };
  const key = storedKey();
  if (key) out.Authorization = `Bearer ${key}`;
  return out;
}

async function refusal(response) {
  if (response.status === 401) {
    for (const fn of listeners) fn();
    return new Unauthorized("The API key was not accepted.");
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: the status says enough
  }
  const error = body && body.error ? body.error : {};
  const seconds = Number.parseInt(response.headers.get("Retry-After") || "", 10);
  return new ApiError(
    response.status,
    error.code || "",
    error.message || `HTTP ${response.status}`,
    Number.isNaN(seconds) ? null : seconds,
  );
}

/** fetch a /v1 route; the parsed JSON body, or a thrown Unauthorized / ApiError. */
export async function api(path, { method = "GET", body, signal } = {}) {
  const init = { method, headers: headers(true), signal };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await refusal(response);
  return response.status === 204 ? null : response.json();
}

/** Run a tool through POST /v1/tools/{name}/invoke; its decoded result. */
export async function invoke(name, args) {
  const answer = await api(`/v1/tools/${encodeURIComponent(name)}/invoke`, {
    method: "POST",
    body: { arguments: args },
  });
  if (!answer.successful) {
    const message = (answer.errors || []).map((e) => e.message).join(" ") || "The tool failed.";
    throw new ApiError(200, "tool_failed", message);
  }
  return answer.result;
}

/**
 * POST /v1/agent/execute with stream: true; calls onEvent(type, data) for each event, and
 * first onTurn(turnId) with the turn the answer runs (its X-Aptix-Turn header; null if absent).
 * Resolves with the turn_finished body, or null when the stream ended without it (the
 * connection was lost).
 */
export async function streamTurn(body, onEvent, signal, onTurn = () => {}) {
  const init = {
    method: "POST",
    headers: { ...headers(false), "Content-Type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  };
  const response = await fetch("/v1/agent/execute", init);
  if (!response.ok) throw await refusal(response);
  onTurn(response.headers.get("X-Aptix-Turn"));
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let finished = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = parseEvent(block);
      if (!event) continue;
      if (event.type === "turn_finished") finished = event.data;
      onEvent(event.type, event.data);
    }
  }
  return finished;
}

function parseEvent(block) {
  let type = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue; // a keep-alive comment
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (name === "event") type = value;
    else if (name === "data") data.push(value);
  }
  if (!data.length) return null;
  return { type, data: JSON.parse(data.join("\n")) };
}
