// Chat: streamed turns, tool calls, approval cards, the mode and the active workflow.

import { api, ApiError, streamTurn, Unauthorized } from "./api.js";
import { append, callStatus, errorText, h, longText, moveFocus, notice, pretty, replace, shortId } from "./dom.js";
import { markdownBlock, renderMarkdown } from "./markdown.js";

const APPROVAL_TOOL = "request_user_approval";
/** What a reopened session says after a turn that ended without completing. */
const ENDED = {
  cancelled: "Turn cancelled.",
  interrupted: "Turn interrupted: the process running it stopped or lost contact with the database.",
  error: "Turn failed.",
};
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

/** The answer a stored client result gives, in a word (an approval's, or "answered"). */
function answerLabel(stored) {
  const value = parsed(stored);
  if (value && typeof value === "object" && typeof value.approved === "boolean") {
    return value.approved ? "approved" : "denied";
  }
  return "answered";
}

/** Whether the stored client result (JSON text) is the answer this page sent. */
function sameAnswer(stored, sent) {
  return JSON.stringify(parsed(stored)) === JSON.stringify(sent);
}

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Whether a session that failed to load may load later: the database or the server failed
 * (5xx, 429), the network did, or the key must be entered again. Anything else (404: unknown, or
 * another org's) will not. */
function mayLoadLater(error) {
  if (!(error instanceof ApiError)) return true;
  return error.status >= 500 || error.status === 429 || error.status === 408;
}

/** Whether `turn` still waits for the very calls `resumed` answered (their post to retry). */
function waitsFor(turn, resumed) {
  if (!resumed || turn.status !== "pending") return false;
  return turn.pendingCalls.some((call) => resumed.answers.has(call.callId));
}

export class Chat {
  constructor() {
    this.sessionId = null;
    this.lastSeq = 0;
    this.controller = null; // the running turn's stream
    this.generation = 0; // bumped by reset(): a turn of an earlier session no longer writes here
    this.pending = null; // {turnId, calls, answers}
    this.handedOff = null; // the calls the last streamed turn handed off: {turnId, calls}
    this.bubble = null; // the assistant message being streamed: {el, text, frame}
    this.calls = new Map(); // callId -> its <details>
    // The session named in the address has not loaded: "loading", or "failed" until a Retry
    // loads it. Send waits meanwhile: a message must go to that session, never to a new one.
    this.loadState = null;
    this.textShown = false; // the running turn has shown text of the model

    this.modeEl = h("strong", { id: "chat-mode" }, "…");
    this.workflowEl = h("strong", { id: "chat-workflow" }, "none");
    this.sessionEl = h("span", { id: "chat-session" }, "new");
    this.cancelButton = h("button", { type: "button", disabled: true }, "Cancel turn");
    this.cancelButton.addEventListener("click", () => {
      moveFocus(this.message); // the button is disabled once the turn has ended
      this.cancel();
    });
    const newButton = h("button", { type: "button" }, "New session");
    newButton.addEventListener("click", () => this.startOver());
    this.banner = h("div");
    this.log = h("div", { class: "transcript", role: "log", "aria-label": "Conversation" });
    // Shown at the end of the transcript while a turn runs.
    this.thinking = h(
      "p",
      { class: "thinking", role: "status", hidden: true },
      h("span", { class: "dots", "aria-hidden": "true" }, h("span"), h("span"), h("span")),
      " Thinking…",
    );
    this.message = h("textarea", { id: "message", rows: 3 });
    this.message.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.form.requestSubmit();
      }
    });
    this.sendButton = h("button", { type: "submit" }, "Send");
    this.form = h(
      "form",
      { class: "composer" },
      h("label", { for: "message" }, "Message"),
      this.message,
      this.sendButton,
    );
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      // Send is disabled while the turn runs; the next message is typed in the box.
      moveFocus(this.message);
      this.send();
    });
    this.root = h(
      "section",
      { class: "chat", "aria-labelledby": "chat-title" },
      h("h1", { id: "chat-title" }, "Chat"),
      h(
        "div",
        { class: "chat-bar" },
        h(
          "p",
          { class: "chat-status", "aria-live": "polite" },
          "Mode: ", this.modeEl, " · Workflow: ", this.workflowEl, " · Session: ", this.sessionEl,
        ),
        h("div", { class: "buttons" }, newButton, this.cancelButton),
      ),
      this.banner,
      this.log,
      this.form,
    );
    this.checkModel();
  }

  /** #/chat/<sessionId> opens that session. */
  show(params) {
    const wanted = params[0];
    // A session that could not be loaded is loaded again when its address is opened again.
    if (wanted && (wanted !== this.sessionId || this.loadState === "failed")) this.open(wanted);
    else if (!this.sessionId) this.refresh();
  }

  async checkModel() {
    try {
      const health = await fetch("/healthz").then((r) => r.json());
      if (health.modelConfigured === false) this.noModel();
    } catch {
      // health unknown: a turn will say it
    }
  }

  noModel(message) {
    replace(
      this.banner,
      notice(
        message ||
          "No model is configured, so chat cannot run turns. Set APTIX_LLM_MODEL (and " +
            "APTIX_LLM_BASE_URL) and restart the server. Sessions, modes, workflows and " +
            "authoring work without one.",
        "warning",
      ),
    );
    this.sendButton.disabled = true;
  }

  /** "New session": a running turn is cancelled only once the person confirms it. */
  startOver() {
    if (this.controller && !confirm("A turn is still running. Cancel it and start a new session?")) return;
    if (location.hash.startsWith("#/chat/")) history.replaceState(null, "", "#/chat");
    this.reset();
  }

  reset(refresh = true) {
    this.generation += 1;
    if (this.controller) this.controller.abort();
    this.sessionId = null;
    this.loadState = null;
    this.lastSeq = 0;
    this.pending = null;
    this.handedOff = null;
    this.bubble = null;
    this.calls.clear();
    this.log.replaceChildren();
    this.sessionEl.textContent = "new";
    this.setBusy(false);
    if (refresh) {
      this.refresh();
      this.message.focus();
    }
  }

  /** Load a stored session: its turns, its mode, and any approval it waits for. */
  async open(sessionId) {
    this.reset(false);
    const generation = this.generation;
    this.sessionId = sessionId;
    this.loadState = "loading";
    this.setBusy(false); // Send waits until the session has loaded
    let session = null;
    try {
      session = await this.load();
    } catch (error) {
      if (this.generation !== generation) return; // another session was opened meanwhile
      if (mayLoadLater(error)) {
        this.loadFailed(sessionId, error);
        return;
      }
      // It cannot be opened (unknown, or another org's): the next message starts a new
      // session rather than failing against this one.
      this.log.append(notice(error.message));
      this.sessionId = null;
      this.loadState = null;
      this.setBusy(false);
      if (location.hash.startsWith("#/chat/")) history.replaceState(null, "", "#/chat");
      await this.refresh();
      return;
    }
    if (this.generation !== generation || !session) return;
    this.loadState = null;
    this.setBusy(false);
    for (const turn of session.turns) {
      if (turn.instruction) this.say("user", turn.instruction);
      for (const call of turn.toolCalls) if (!("clientResult" in call)) this.callFinished(call);
      if (turn.text) this.say("assistant", turn.text);
      if (turn.refusal) this.declined(turn.refusal);
      if (turn.error) this.note(errorText(turn.error), "error");
      // As the live chat says it; the text such a turn kept is not its answer.
      const ended = ENDED[turn.status];
      if (ended && (turn.text || turn.status !== "error")) {
        this.note(turn.text ? `${ended} The text above is partial: the turn did not complete.` : ended);
      }
      if (turn.status === "pending") this.ask(turn.turnId, turn.pendingCalls);
    }
  }

  /**
   * The session shown again (null before the first turn, or when another session was opened
   * meanwhile), its mode and active workflow (the default mode before the first turn). Throws
   * the API's refusal (ApiError, Unauthorized) or the network's failure.
   */
  async load() {
    const wanted = this.sessionId;
    if (!wanted) {
      const modes = await api("/v1/modes");
      if (this.sessionId !== wanted) return null; // another session was opened meanwhile
      const mode = modes.find((m) => m.isDefault) || modes[0];
      this.modeEl.textContent = mode ? mode.key : "";
      this.workflowEl.textContent = "none";
      return null;
    }
    const session = await api(`/v1/sessions/${encodeURIComponent(wanted)}?turnsLimit=50`);
    if (this.sessionId !== wanted) return null;
    this.modeEl.textContent = session.mode;
    this.workflowEl.textContent = session.activeWorkflowId || "none";
    this.sessionEl.replaceChildren(
      h("a", { href: `#/sessions/${encodeURIComponent(session.sessionId)}` }, shortId(session.sessionId)),
    );
    const last = session.turns[session.turns.length - 1];
    this.lastSeq = last ? last.seq : 0;
    return session;
  }

  /** load(), a failure said in the transcript (unless it says ``shown``, which the turn just
   * said: a screen reader would read it twice); null then. */
  async refresh(shown = null) {
    try {
      return await this.load();
    } catch (error) {
      if (!(error instanceof Unauthorized) && error.message !== shown) this.log.append(notice(error.message));
      return null;
    }
  }

  /** The session could not be loaded for now (the database or the network failed): it stays
   * this chat's, and its address stays, with a Retry that loads it; Send waits until then. */
  loadFailed(sessionId, error) {
    this.loadState = "failed";
    this.sessionEl.textContent = shortId(sessionId);
    const why =
      error instanceof ApiError || error instanceof Unauthorized
        ? error.message
        : `The server could not be reached (${error.message}).`;
    const retry = h("button", { type: "button" }, "Retry");
    retry.addEventListener("click", () => {
      moveFocus(this.message); // the button goes with the transcript
      if (this.sessionId === sessionId && this.loadState === "failed") this.open(sessionId);
    });
    this.log.append(
      h("div", { class: "notice error", role: "alert" }, "This session could not be loaded for now. ", why, " ", retry),
    );
    this.setBusy(false);
  }

  /** A message: the user's as typed (text), the model's as sanitised Markdown. ``busy``: it is
   * still being written (stream()). */
  say(role, text, busy = false) {
    const body = role === "user" ? h("p", {}, text) : markdownBlock(text);
    const who = h("span", { class: "who" }, role === "user" ? "You" : "Aptix");
    const el = h("div", { class: `msg ${role}`, "aria-busy": busy ? "true" : null }, who, body);
    this.put(el);
    return el;
  }

  /**
   * Streamed text: rendered again at most once a frame, whole (Markdown needs the whole).
   * The transcript is a live region (role "log") that tells what is added: each frame would
   * add the whole text so far and a screen reader read it again and again. The message is
   * aria-busy while it streams (WAI-ARIA: assistive technology waits for the node to finish);
   * streamed() adds its final text once.
   */
  stream(delta) {
    if (!this.bubble) {
      const message = this.say("assistant", "", true);
      this.bubble = { message, el: message.querySelector(".md"), text: "", frame: 0 };
    }
    const bubble = this.bubble;
    bubble.text += delta;
    this.textShown = true;
    if (bubble.frame) return;
    bubble.frame = requestAnimationFrame(() => {
      bubble.frame = 0;
      renderMarkdown(bubble.el, bubble.text);
      this.log.scrollTop = this.log.scrollHeight;
    });
  }

  /** The final text of the streamed message (or a new message when nothing streamed). */
  streamed(text) {
    const bubble = this.bubble;
    this.bubble = null;
    this.textShown = true;
    if (!bubble) {
      this.say("assistant", text);
      return;
    }
    if (bubble.frame) cancelAnimationFrame(bubble.frame);
    // Not busy first: the final text is added to the live region as it is told, once.
    bubble.message.removeAttribute("aria-busy");
    renderMarkdown(bubble.el, text);
  }

  /** The model declined to answer (OpenAI's message.refusal): its reason, in place of an answer. */
  declined(refusal) {
    return this.note(`The model declined to answer: ${refusal}`, "refusal");
  }

  note(text, kind = "note") {
    const el = h("p", { class: `note ${kind}`, role: "status" }, text);
    this.put(el);
    return el;
  }

  /** Append to the transcript and keep its end in view (the page itself does not move). */
  put(el) {
    this.log.insertBefore(el, this.thinking.isConnected ? this.thinking : null);
    this.log.scrollTop = this.log.scrollHeight;
  }

  async send() {
    const text = this.message.value;
    // One message at a time (Send is off then, but Enter still submits): while a turn runs or
    // a new session is being created (both hold this.controller), and until the session in
    // the address has loaded.
    if (!text.trim() || this.controller || this.loadState) return;
    this.message.value = "";
    const said = this.say("user", text);
    if (!this.sessionId) {
      const generation = this.generation;
      // Busy from now, as during the turn: creating the session can wait on the database (a
      // SQLite write lock, up to 30 s), and a second message must not create a second one.
      // "New session" (after asking, as during a turn) or signing out gives up on it; Cancel
      // turn stays off until there is a turn to cancel.
      const controller = new AbortController();
      this.controller = controller;
      this.setBusy(true);
      this.cancelButton.disabled = true;
      let failure = null;
      try {
        const created = await api("/v1/sessions", { method: "POST", body: {}, signal: controller.signal });
        if (this.generation === generation) {
          this.sessionId = created.sessionId;
          // A reload (or a shared link) opens this session again.
          history.replaceState(null, "", `#/chat/${encodeURIComponent(created.sessionId)}`);
          await this.refresh();
        }
      } catch (error) {
        failure = error;
      } finally {
        if (this.controller === controller) this.controller = null;
        this.setBusy(Boolean(this.controller));
      }
      // Reset meanwhile (new session, or signed out): the transcript is gone, and the session
      // is not this chat's any more.
      if (this.generation !== generation) return;
      if (failure) {
        // Not sent: back in the box, before anything typed meanwhile.
        said.remove();
        this.putBack(text);
        if (!(failure instanceof Unauthorized)) this.note(failure.message, "error");
        return;
      }
    }
    const outcome = await this.run({ sessionId: this.sessionId, instruction: text });
    if (outcome === "refused") {
      // The server never took the message (409 session_busy, 401...): it is not shown as
      // sent, and it is back in the box.
      said.remove();
      this.putBack(text);
    } else if (outcome === "unfinished") {
      // Ended by the server's error envelope: none of its calls ran, or none runs again
      // (docs/http-api.md), so the same message can simply be sent again.
      this.putBack(text);
      this.note("Your message is back in the box: sending it again runs nothing twice.");
    }
  }

  /** An unsent message back in the box, before whatever was typed since: nothing typed is lost. */
  putBack(text) {
    const typed = this.message.value;
    this.message.value = typed && typed !== text ? `${text}\n${typed}` : text;
  }

  /**
   * Run (or resume) a turn over SSE; a lost connection offers a retry. Resolves with how it
   * ended: "done", "failed" (kind "error"), "unfinished" (the server's error envelope: a
   * database outage, a bug or a shutdown before the turn was recorded as failed), "refused"
   * (the server did not take it), "cancelled", "lost" or "gone" (the person started a new
   * session meanwhile).
   */
  async run(body, resumed = null) {
    const generation = this.generation;
    const controller = new AbortController();
    this.controller = controller;
    this.setBusy(true);
    this.handedOff = null;
    this.textShown = false;
    const knownSeq = this.lastSeq;
    let finished = null;
    let outcome = "done";
    const here = () => this.generation === generation;
    try {
      finished = await streamTurn(body, (type, data) => here() && this.onEvent(type, data), controller.signal);
      if (finished === null) outcome = "lost";
      else if (finished.kind === "error") outcome = "failed";
      else if (finished.error && !finished.kind) outcome = "unfinished";
      else if (finished.kind === "cancelled") outcome = "cancelled";
    } catch (error) {
      if (error.name === "AbortError") {
        outcome = "cancelled";
        if (here()) this.note("Turn cancelled.");
      } else if (error instanceof Unauthorized) {
        outcome = "refused";
      } else if (error instanceof ApiError) {
        outcome = "refused";
        if (error.code === "model_not_configured") this.noModel(error.message);
        else if (here()) this.note(error.message, "error");
      } else {
        outcome = "lost"; // the network failed under the stream
      }
    } finally {
      if (this.controller === controller) this.controller = null;
      if (here() && this.bubble) this.streamed(this.bubble.text); // a cut stream keeps what came
      this.setBusy(Boolean(this.controller));
    }
    if (!here()) return "gone";
    if (outcome === "lost") this.offerRetry(body, knownSeq, resumed);
    else if (finished) {
      const handedOff = this.handedOff;
      this.handedOff = null;
      // The turn has said its error: the same outage is not said again.
      const session = await this.refresh(errorText(finished.error) || null);
      if (!here()) return "gone";
      const turnOf = (turnId) => session && session.turns.find((t) => t.turnId === turnId);
      if (resumed && session) this.settle(resumed, turnOf(resumed.turnId));
      if (handedOff) this.askIfWaiting(handedOff, session ? turnOf(handedOff.turnId) : undefined);
    }
    return outcome;
  }

  /**
   * Cards for the calls a stream handed off, only those the turn read again still waits for:
   * another tab or client may have answered them since (a replayed answer, or a race). The
   * stream's own list stands only when the session could not be read (`turn` undefined).
   */
  askIfWaiting(handedOff, turn) {
    if (turn === undefined) {
      this.ask(handedOff.turnId, handedOff.calls);
      return;
    }
    const waiting = new Set(turn && turn.status === "pending" ? turn.pendingCalls.map((c) => c.callId) : []);
    const calls = handedOff.calls.filter((call) => waiting.has(call.callId));
    if (calls.length > 0) {
      this.ask(handedOff.turnId, calls);
      return;
    }
    this.note(`Already answered elsewhere: the turn is ${turn ? turn.status : "no longer on record"}.`);
    if (turn && turn.status === "completed" && turn.text) this.say("assistant", turn.text);
    if (turn && turn.status === "completed" && turn.refusal) this.declined(turn.refusal);
  }

  setBusy(busy) {
    this.sendButton.disabled = busy || Boolean(this.loadState) || this.banner.childElementCount > 0;
    this.cancelButton.disabled = !busy && !this.pending;
    this.thinking.hidden = !busy;
    if (busy) {
      this.log.append(this.thinking); // last, below what the turn shows
      this.log.scrollTop = this.log.scrollHeight;
    } else {
      this.thinking.remove();
    }
  }

  onEvent(type, data) {
    if (type === "text_delta") {
      this.stream(data.delta);
    } else if (type === "text") {
      this.streamed(data.text);
    } else if (type === "tool_call_started") {
      this.callStarted(data);
    } else if (type === "tool_call_finished") {
      this.callFinished(data);
    } else if (type === "mode_changed") {
      this.modeEl.textContent = data.mode;
      this.note(`Mode changed from ${data.previousMode} to ${data.mode}.`, "mode");
      if (data.welcomeMessage) this.note(data.welcomeMessage, "welcome");
    } else if (type === "turn_finished") {
      this.finished(data);
    }
  }

  callStarted(data) {
    const status = h("span", { class: "call-status" }, "running…");
    const details = h("details", { class: "call" }, h("summary", {}, "Tool ", h("code", {}, data.name), " ", status));
    this.calls.set(data.callId, details);
    this.put(details);
  }

  callFinished(call) {
    let details = this.calls.get(call.callId);
    if (!details) {
      this.callStarted(call);
      details = this.calls.get(call.callId);
    }
    const status = details.querySelector(".call-status");
    status.textContent = callStatus(call);
    append(details, [
      h("h3", {}, "Arguments"),
      longText(pretty(call.argumentsJson), "arguments"),
      call.errorMessage
        ? [h("h3", {}, "Error"), h("p", { class: "error-text" }, call.errorMessage)]
        : [h("h3", {}, "Result"), longText(pretty(call.resultJson), "result")],
    ]);
  }

  finished(data) {
    if (!data.kind) {
      // The server's error envelope: a database outage, a bug or a shutdown ended the turn
      // before it was recorded as failed (the same request may be sent again).
      this.pending = null;
      this.note(errorText(data.error) || "The turn failed.", "error");
      // What streamed is no answer (as a reopened session marks a failed turn's text), and
      // with the database failing it may not be on record at all.
      const code = data.error && data.error.code;
      const unsaved = code === "database_unavailable" || code === "database_refused";
      if (this.textShown) {
        this.note(`The text above is partial${unsaved ? " and may not have been saved" : ""}: the turn did not complete.`);
      }
      return;
    }
    if (data.sessionId) this.sessionId = data.sessionId;
    if (data.mode) this.modeEl.textContent = data.mode;
    // Its cards are drawn once the session is read again (run): only for calls still waiting.
    if (data.kind === "tool-only") {
      this.handedOff = { turnId: data.turnId, calls: data.toolCalls.filter((c) => c.requiresClientExecution) };
    } else this.pending = null;
    if (data.kind === "cancelled") this.note("Turn cancelled.");
    const error = errorText(data.error);
    if (data.kind === "error") this.note(error || data.text || "The turn failed.", "error");
    // A refusal says why there is no answer; the note below would only say that there is none.
    if (data.refusal) this.declined(data.refusal);
    else if (data.kind === "empty") this.note("The model answered with no text.");
    for (const warning of data.warnings || []) {
      const text = typeof warning === "string" ? warning : pretty(warning);
      // A database ending's error is its last warning too: said once (the log is read out).
      if (text !== error) this.note(text, "warning");
    }
    if (data.branchedSessionId) {
      const go = h("button", { type: "button", class: "link" }, "Continue in the new session");
      const branched = data.branchedSessionId;
      go.addEventListener("click", () => {
        location.hash = `#/chat/${encodeURIComponent(branched)}`;
      });
      this.put(h("p", { class: "note" }, `A new session ${shortId(branched)} was branched off. `, go));
    }
  }

  /** One card per client-final call; the answers go back together as toolResults. */
  ask(turnId, calls) {
    // answers: what is posted; shown: each answered card's line saying what was answered.
    this.pending = { turnId, calls, answers: new Map(), shown: new Map() };
    for (const call of calls) this.put(this.card(call));
    this.setBusy(false);
  }

  card(call) {
    const pending = this.pending;
    // Not the call id in the ids: it is the model's text and may hold spaces (aria-labelledby
    // would read it as several ids).
    const id = `card-${++cardCount}`;
    const title = `${id}-title`;
    const request = approvalRequest(call);
    let card;
    const answer = (result, label, isError = false) => {
      for (const button of card.querySelectorAll("button")) button.disabled = true;
      const said = h("p", { class: "answer", role: "status" }, label);
      card.append(said);
      // Its buttons are disabled: on to the next card still to answer, else the message box.
      moveFocus(this.log.querySelector(".card button:not(:disabled)") || this.message);
      // The call's line in the transcript says the answer once the server has it (settle).
      pending.shown.set(call.callId, said);
      pending.answers.set(call.callId, { callId: call.callId, result, isError });
      if (pending.answers.size === pending.calls.length && this.pending === pending) this.resume(pending);
    };
    if (!request) {
      const reply = h("button", { type: "button" }, "Reply that it cannot run here");
      reply.addEventListener("click", () =>
        answer({ error: `The console cannot run ${call.name}.` }, "Answered: cannot run here.", true),
      );
      card = h(
        "section",
        { class: "card", "aria-labelledby": title },
        h("h2", { id: title }, "The model asked the client to run ", h("code", {}, call.name)),
        h("p", {}, "The console cannot run this tool. Reply that it cannot run here, and the turn goes on."),
        reply,
      );
      return card;
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
    card = h(
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
    return card;
  }

  /**
   * Post the answers. If the model fails after them (or the server refuses the request), the
   * turn waits for them still: they can be sent again, or the turn cancelled.
   */
  async resume(pending) {
    this.pending = null;
    for (const callId of pending.answers.keys()) {
      const line = this.calls.get(callId)?.querySelector(".call-status");
      if (line) line.textContent = "answer sent…";
    }
    const toolResults = [...pending.answers.values()];
    const outcome = await this.run({ sessionId: this.sessionId, toolResults }, pending);
    if (outcome !== "failed" && outcome !== "unfinished" && outcome !== "refused") return;
    if (outcome === "refused") {
      // Not taken: nothing of it is on record.
      for (const callId of pending.answers.keys()) {
        const line = this.calls.get(callId)?.querySelector(".call-status");
        if (line) line.textContent = "waiting for you";
      }
    }
    this.pending = pending;
    this.setBusy(false);
    const again = h("button", { type: "button" }, "Send answer again");
    const box = h("div", { class: "notice error resend", role: "alert" }, "The turn still waits for your answer. ", again);
    again.addEventListener("click", () => {
      box.remove();
      moveFocus(this.message);
      if (this.pending === pending) this.resume(pending);
    });
    this.put(box);
  }

  async cancel() {
    if (this.controller) {
      this.controller.abort(); // closing the stream cancels the turn on the server
      return;
    }
    const pending = this.pending;
    if (!pending) return;
    this.pending = null;
    try {
      await api(
        `/v1/sessions/${encodeURIComponent(this.sessionId)}/turns/${encodeURIComponent(pending.turnId)}/cancel`,
        { method: "POST" },
      );
      for (const button of this.log.querySelectorAll(".card button")) button.disabled = true;
      for (const box of this.log.querySelectorAll(".resend")) box.remove();
      this.note("Turn cancelled.");
    } catch (error) {
      if (!(error instanceof Unauthorized)) this.note(error.message, "error");
    }
    this.setBusy(false);
  }

  /**
   * Once the server has the turn's answers: each answered call's line says the answer on
   * record, and a card whose answer lost to one sent first (another tab, another person)
   * says so. The first answers the server accepts win (docs/http-api.md).
   */
  settle(pending, turn) {
    if (!turn) return;
    for (const stored of turn.toolCalls) {
      const said = pending.shown.get(stored.callId);
      if (!said || !("clientResult" in stored)) continue;
      const recorded = answerLabel(stored.clientResult);
      // A call gated by approval (an MCP tool's; "approved" on record) says how its run went.
      const line = this.calls.get(stored.callId)?.querySelector(".call-status");
      if (line) line.textContent = "approved" in stored ? callStatus(stored) : recorded;
      const sent = pending.answers.get(stored.callId).result;
      if (!sameAnswer(stored.clientResult, sent)) {
        said.textContent = `Already answered elsewhere: ${recorded}. Your answer was not used.`;
      }
    }
  }

  /**
   * After a lost stream: show what the server recorded; run again only if nothing was. A
   * resume (`resumed`: the answered calls) keeps its turn's seq: its turn is found by id, and
   * posted again only when it did not finish (the server continues it, or says why not).
   */
  offerRetry(body, knownSeq, resumed = null) {
    const retry = h("button", { type: "button" }, "Retry");
    const box = h(
      "div",
      { class: "notice error", role: "alert" },
      "The connection was lost before the turn finished. ",
      retry,
    );
    this.log.append(box);
    retry.addEventListener("click", async () => {
      box.remove();
      moveFocus(this.message);
      const session = await this.refresh();
      if (!session) {
        this.offerRetry(body, knownSeq, resumed);
        return;
      }
      const turn = resumed
        ? session.turns.find((t) => t.turnId === resumed.turnId)
        : session.turns.find((t) => t.seq > knownSeq);
      if (turn && turn.status === "running") {
        this.note("The turn is still running on the server.");
        this.offerRetry(body, knownSeq, resumed);
      } else if (turn && (turn.status === "completed" || turn.status === "pending") && !waitsFor(turn, resumed)) {
        for (const call of turn.toolCalls) if (!this.calls.has(call.callId)) this.callFinished(call);
        if (turn.text) this.say("assistant", turn.text);
        if (turn.refusal) this.declined(turn.refusal);
        if (resumed) this.settle(resumed, turn);
        if (turn.status === "pending") this.ask(turn.turnId, turn.pendingCalls);
      } else if (resumed && turn && turn.status === "error") {
        // A resume's final error (a limit): shown; the same answers would only meet it again.
        if (turn.text) this.say("assistant", turn.text);
        this.note(errorText(turn.error) || "The turn failed.", "error");
        this.settle(resumed, turn);
      } else {
        // It never ran, or it was cancelled when the stream dropped; a resume whose attempt
        // failed or was interrupted continues from the answers the server kept.
        await this.run(body, resumed);
      }
    });
  }
}
