// Sessions: a paged list, and one session's mode history, lineage, turns and failed calls.

import { api } from "./api.js";
import { callFailed, callStatus, errorText, h, longText, moveFocus, pretty, replace, shortId, table, when } from "./dom.js";
import { markdownBlock } from "./markdown.js";

const PAGE = 20;

export async function sessionsView(el, params) {
  if (params[0]) return sessionPage(el, params[0]);
  return sessionList(el, 0);
}

/** Load a page of the list or of a session's turns in place of the view, then focus `where`
 * of the new view (the button that was pressed is gone with the old one). */
async function showPage(show, where) {
  await show();
  moveFocus(where());
}

async function sessionList(el, offset) {
  const rows = await api(`/v1/sessions?limit=${PAGE + 1}&offset=${offset}`);
  const more = rows.length > PAGE;
  const shown = rows.slice(0, PAGE);
  const previous = h("button", { type: "button", disabled: offset === 0 }, "Previous page");
  const next = h("button", { type: "button", disabled: !more }, "Next page");
  // The new page's table (its caption says which sessions it shows), or the line saying none.
  const listed = () => el.querySelector("table, .sessions-empty");
  previous.addEventListener("click", () => showPage(() => sessionList(el, Math.max(0, offset - PAGE)), listed));
  next.addEventListener("click", () => showPage(() => sessionList(el, offset + PAGE), listed));
  replace(
    el,
    h("h1", {}, "Sessions"),
    shown.length
      ? table(
          `Sessions ${offset + 1}–${offset + shown.length}, most recent first`,
          [
            ["Session", (s) => h("a", { href: `#/sessions/${encodeURIComponent(s.sessionId)}` }, shortId(s.sessionId))],
            ["Title", (s) => s.title || "(untitled)"],
            ["Mode", (s) => s.mode],
            ["Active workflow", (s) => s.activeWorkflowId || "—"],
            ["Last activity", (s) => when(s.updatedAt)],
          ],
          shown,
        )
      : h("p", { class: "sessions-empty" }, offset ? "No more sessions." : "No sessions yet. Start one in Chat."),
    h("div", { class: "buttons" }, previous, next),
  );
}

function sessionLink(id) {
  return h("a", { href: `#/sessions/${encodeURIComponent(id)}` }, shortId(id));
}

async function sessionPage(el, id, before) {
  const query = before ? `?turnsLimit=20&turnsBefore=${before}` : "?turnsLimit=20";
  const s = await api(`/v1/sessions/${encodeURIComponent(id)}${query}`);
  const failed = s.turns.flatMap((turn) => turn.toolCalls.filter(callFailed).map((c) => ({ turn, call: c })));
  const older = h("button", { type: "button", disabled: s.turnsNextBefore === null }, "Older turns");
  older.addEventListener("click", () => showPage(() => sessionPage(el, id, s.turnsNextBefore), () => el.querySelector("#turns-title")));
  replace(
    el,
    h("h1", {}, "Session ", shortId(s.sessionId)),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Id"), h("dd", {}, h("code", {}, s.sessionId)),
      h("dt", {}, "Title"), h("dd", {}, s.title || "(untitled)"),
      h("dt", {}, "Mode"), h("dd", {}, s.mode, s.modeReason ? ` — ${s.modeReason}` : ""),
      h("dt", {}, "Active workflow"), h("dd", {}, s.activeWorkflowId || "none"),
      h("dt", {}, "Owner"), h("dd", {}, `${s.user} (${s.org})`),
      h("dt", {}, "Last activity"), h("dd", {}, when(s.updatedAt)),
    ),
    h("p", {}, h("a", { href: `#/chat/${encodeURIComponent(s.sessionId)}` }, "Open in chat")),
    h("h2", {}, "Mode history"),
    s.modeHistory.length
      ? table(
          "Mode changes, oldest first",
          [
            ["Previous mode", (m) => m.previousMode || "—"],
            ["New mode", (m) => m.mode],
            ["Reason", (m) => m.reason || "—"],
            ["Time", (m) => when(m.changedAt)],
            ["Who", (m) => m.changedBy || "—"],
          ],
          s.modeHistory,
        )
      : h("p", {}, "The mode never changed."),
    h("h2", {}, "Lineage"),
    h(
      "dl",
      { class: "facts lineage" },
      h("dt", {}, "Parent"),
      h("dd", {}, s.parentSessionId ? sessionLink(s.parentSessionId) : "none"),
      h("dt", {}, "Children"),
      h("dd", {}, s.childSessionIds.length ? h("ul", {}, s.childSessionIds.map((c) => h("li", {}, sessionLink(c)))) : "none"),
    ),
    // The error is the message on record: Aptix's (the workflow guard's refusal, a denial) or
    // the tool's own words, which may claim anything; the outcome column is Aptix's.
    h("h2", {}, "Calls that did not succeed"),
    failed.length
      ? table(
          "Tool calls that failed, were denied or were cut short, with their error",
          [
            ["Turn", (r) => String(r.turn.seq), "words"],
            ["Tool", (r) => h("code", {}, r.call.name), "name"],
            ["Outcome", (r) => callStatus(r.call), "words"],
            ["Error", (r) => r.call.errorMessage || "—"],
          ],
          failed,
        )
      : h("p", {}, "No call failed, was denied or was cut short in these turns."),
    h("h2", { id: "turns-title" }, "Turns"),
    s.turns.length ? s.turns.map(turnView) : h("p", {}, "No turns yet."),
    h("div", { class: "buttons" }, older),
  );
}

/** What a turn's text is: its answer only when the turn completed; otherwise what the model
 * wrote before the turn stopped ("I will do it now." beside a call), never a finished answer. */
function textLabel(status) {
  if (status === "completed") return "Answer";
  if (status === "running" || status === "pending") return "Text so far (the turn has not completed)";
  return `Partial text (the turn did not complete: ${status})`;
}

function turnView(turn) {
  const tokens = turn.modelCalls.reduce((n, c) => n + (c.promptTokens || 0) + (c.completionTokens || 0), 0);
  // A database ending's error is its last warning too: shown once, as the error.
  const error = errorText(turn.error);
  const warnings = turn.warnings.map((w) => (typeof w === "string" ? w : pretty(w))).filter((w) => w !== error);
  return h(
    "article",
    { class: "turn", "aria-label": `Turn ${turn.seq}` },
    h("h3", {}, `Turn ${turn.seq} · ${turn.status} · ${tokens} tokens`),
    turn.instruction ? h("p", { class: "instruction" }, h("span", { class: "who" }, "Instruction "), turn.instruction) : null,
    turn.text ? h("div", { class: "answer-text" }, h("span", { class: "who" }, textLabel(turn.status)), markdownBlock(turn.text)) : null,
    // The model declined to answer (OpenAI's message.refusal): why the turn has no answer.
    turn.refusal ? h("p", { class: "refusal-text" }, h("span", { class: "who" }, "The model declined to answer "), turn.refusal) : null,
    turn.error ? h("p", { class: "error-text turn-error" }, h("span", { class: "who" }, "Error "), error) : null,
    turn.modelCalls.length
      ? table(
          `Model calls of turn ${turn.seq}`,
          [
            ["Model", (c) => c.modelId || "—"],
            ["Prompt tokens", (c) => String(c.promptTokens ?? "—")],
            ["Completion tokens", (c) => String(c.completionTokens ?? "—")],
            ["Duration", (c) => (c.durationMs === undefined ? "—" : `${c.durationMs} ms`)],
            ["Tool calls", (c) => String(c.toolCalls ?? 0)],
            ["Finish", (c) => c.finishReason || "—"],
          ],
          turn.modelCalls,
        )
      : null,
    turn.toolCalls.map((c) =>
      h(
        "details",
        { class: "call" },
        h(
          "summary",
          {},
          "Tool ",
          h("code", {}, c.name),
          " ",
          callStatus(c),
          c.batchDurationMs === undefined ? "" : ` · ${c.batchDurationMs} ms`,
        ),
        h("h4", {}, "Arguments"),
        longText(pretty(c.argumentsJson), "arguments"),
        c.errorMessage ? [h("h4", {}, "Error"), h("p", {}, c.errorMessage)] : [h("h4", {}, "Result"), longText(pretty(c.resultJson), "result")],
        "clientResult" in c ? [h("h4", {}, "Client's answer"), longText(pretty(c.clientResult), "answer")] : null,
      ),
    ),
    warnings.length
      ? h("ul", { class: "warnings", "aria-label": `Warnings of turn ${turn.seq}` }, warnings.map((w) => h("li", {}, w)))
      : null,
  );
}

