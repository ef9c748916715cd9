// Approval cards: one per client-final call a turn waits for, answered by Approve or Deny (or,
// for a tool the console cannot run, by saying so).

import { h, pretty } from "./dom.js";

const APPROVAL_TOOL = "request_user_approval";
let cardCount = 0;

/** The approval request a call carries (request_user_approval, or an MCP call under an
 * approval policy: resultJson.kind "approval_request"), or null for any other client call. */
function approvalRequest(call) {
  let request = null;
  try {
    request = JSON.parse(call.resultJson || "null");
  } catch {
    request = null;
  }
  const isObject = request !== null && typeof request === "object" && !Array.isArray(request);
  if (call.name === APPROVAL_TOOL) return isObject ? request : {};
  return isObject && request.kind === "approval_request" ? request : null;
}

/** An MCP approval's complete arguments, open: its `details` stop at 2,000 characters, and
 * what hides past them ("; rm -rf /") is what is being approved. Never cut (the <pre>
 * scrolls); the person can fold it away. */
function approvalArguments(value) {
  const text = pretty(value);
  return h(
    "details",
    { class: "arguments", open: true },
    h("summary", {}, `All arguments (${text.length.toLocaleString()} characters)`),
    h("pre", { class: "mono" }, text),
  );
}

/** JSON text parsed, or the text itself when it is not JSON. */
export function parsed(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The answer a stored client result gives, in a word (an approval's, or "answered"). */
export function answerLabel(stored) {
  const value = parsed(stored);
  if (value && typeof value === "object" && typeof value.approved === "boolean") {
    return value.approved ? "approved" : "denied";
  }
  return "answered";
}

/** Whether the stored client result (JSON text) is the answer this page sent. */
export function sameAnswer(stored, sent) {
  return JSON.stringify(parsed(stored)) === JSON.stringify(sent);
}

/**
 * The answer the record already holds for a waiting call (a model failed after it), as a
 * post sends it again; null when it has none. The turn waits for that same post, not for a new
 * answer (docs/http-api.md): the results stored first win.
 */
export function storedAnswer(call) {
  if (!("clientResult" in call)) return null;
  return { callId: call.callId, result: parsed(call.clientResult), isError: call.outcome === "failed" };
}

/** Mark ``card`` answered: its buttons off, and a line saying ``label`` (returned). */
export function answered(card, label) {
  for (const button of card.querySelectorAll("button")) button.disabled = true;
  const said = h("p", { class: "answer", role: "status" }, label);
  card.append(said);
  return said;
}

/** The line of a card whose answer was on record when it was drawn (a reload, another tab). */
export function storedLabel(call) {
  const word = answerLabel(call.clientResult);
  return word === "answered" ? "Answered." : `Answered: ${word}.`;
}

/**
 * A card for ``call``. Its buttons call ``onAnswer({callId, result, isError}, said)`` once,
 * ``said`` being the line that now says the answer (the card is marked answered first).
 */
export function card(call, onAnswer) {
  // Not the call id in the ids: it is the model's text and may hold spaces (aria-labelledby
  // would read it as several ids).
  const id = `card-${++cardCount}`;
  const title = `${id}-title`;
  const request = approvalRequest(call);
  let el;
  const answer = (result, label, isError = false) =>
    onAnswer({ callId: call.callId, result, isError }, answered(el, label));
  if (!request) {
    const reply = h("button", { type: "button" }, "Reply that it cannot run here");
    reply.addEventListener("click", () =>
      answer({ error: `The console cannot run ${call.name}.` }, "Answered: cannot run here.", true),
    );
    el = h(
      "section",
      { class: "card", "aria-labelledby": title },
      h("h2", { id: title }, "The model asked the client to run ", h("code", {}, call.name)),
      h("p", {}, "The console cannot run this tool. Reply that it cannot run here, and the turn goes on."),
      reply,
    );
    return el;
  }
  // Several cards may wait at once: each card is named by its question, and its buttons by
  // the action they answer ("Approve archive report"), as shown (visible text), never the
  // model's raw string. What is shown on the buttons stays "Approve" and "Deny".
  const prompt = request.prompt ? `${id}-prompt` : null;
  const action = request.action ? `${id}-action` : null;
  const named = action || prompt;
  const flag = request.destructive ? `${id}-destructive` : null;
  const about = [named === prompt ? null : prompt, flag && `${flag}-term`, flag].filter(Boolean).join(" ");
  const button = (kind, label) =>
    h(
      "button",
      {
        type: "button",
        class: kind,
        id: `${id}-${kind}`,
        "aria-labelledby": named ? `${id}-${kind} ${named}` : null,
        "aria-describedby": about || null,
      },
      label,
    );
  const approve = button("approve", "Approve");
  const deny = button("deny", "Deny");
  // The answer the server expects of both kinds of approval (docs/mcp-servers.md).
  approve.addEventListener("click", () => answer({ approved: true }, "You approved."));
  deny.addEventListener("click", () => answer({ approved: false }, "You denied."));
  el = h(
    "section",
    {
      class: `card approval${request.destructive ? " destructive" : ""}`,
      "aria-labelledby": named ? `${title} ${prompt || action}` : title,
    },
    h("h2", { id: title }, "Approval needed"),
    h("p", { class: "prompt", id: prompt }, request.prompt || ""),
    h(
      "dl",
      {},
      h("dt", {}, "Action"),
      h("dd", { id: action }, request.action || "(not named)"),
      "arguments" in request
        ? [h("dt", {}, "Arguments"), h("dd", {}, approvalArguments(request.arguments))]
        : request.details
          ? [h("dt", {}, "Details"), h("dd", {}, request.details)]
          : null,
      h("dt", { id: flag && `${flag}-term` }, "Destructive"),
      h("dd", { class: "destructive-flag", id: flag }, request.destructive ? "Yes — this cannot be undone" : "No"),
    ),
    h("div", { class: "buttons" }, approve, deny),
  );
  return el;
}
