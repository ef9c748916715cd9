// Chat: streamed turns, tool calls, approval cards, the mode and the active workflow.

import { api, ApiError, streamTurn, Unauthorized } from "./api.js";
import { answered, answerLabel, card, sameAnswer, storedAnswer, storedLabel } from "./cards.js";
import { append, callStatus, errorText, h, longText, moveFocus, notice, pretty, replace, shortId } from "./dom.js";
import { markdownBlock, renderMarkdown } from "./markdown.js";
import { CANNOT_TELL, ownRequest, ownTurn } from "./own_turn.js";

/** What a reopened session says after a turn that ended without completing. */
const ENDED = {
  cancelled: "Turn cancelled.",
  interrupted: "Turn interrupted: the process running it stopped or lost contact with the database.",
  error: "Turn failed.",
};
const BACK_IN_THE_BOX = "Your message is back in the box: sending it again runs nothing twice.";
/** Said where a message whose turn ended with calls on record is not sent again (offerRetry,
 * readBack): a new turn's model may ask for the same calls again (docs/http-api.md). */
const NOT_SENT_AGAIN =
  "Your message was not sent again: the tool calls above may have taken effect, and sending it " +
  "again starts a new turn in which the model may run them again. Send it yourself only if it " +
  "should run again.";
/** Said where a Retry or an answer would start a turn while another of this tab runs: the
 * server would refuse it (session_busy), and its request must not take that turn's Cancel. */
const TURN_RUNNING = "A turn is running in this tab: try again once it has finished, or cancel it.";

/** Whether a call of ``turn`` may have taken effect: one is on record that was not denied. */
function mayHaveRun(turn) {
  return turn.toolCalls.some((call) => call.outcome !== "denied");
}

/** Why a read failed, in words: the API's own message, or that the server was not reached. */
function failure(error) {
  if (error instanceof ApiError || error instanceof Unauthorized) return error.message;
  return `The server could not be reached (${error.message}).`;
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
      this.sayEnding(turn);
      if (turn.status === "pending") this.ask(turn.turnId, turn.pendingCalls);
    }
  }

  /** After a turn's text: its error, and how it ended when it did not complete, as the live
   * chat says it (the text such a turn kept is not its answer). */
  sayEnding(turn) {
    if (turn.error) this.note(errorText(turn.error), "error");
    const ended = ENDED[turn.status];
    if (ended && (turn.text || turn.status !== "error")) {
      this.note(turn.text ? `${ended} The text above is partial: the turn did not complete.` : ended);
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
      if (!(error instanceof Unauthorized) && error.message !== shown) this.log.append(notice(failure(error)));
      return null;
    }
  }

  /** The session could not be loaded for now (the database or the network failed): it stays
   * this chat's, and its address stays, with a Retry that loads it; Send waits until then. */
  loadFailed(sessionId, error) {
    this.loadState = "failed";
    this.sessionEl.textContent = shortId(sessionId);
    const why = failure(error);
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
    // This request's turn, as its answer names it first: another tab may add turns meanwhile.
    const own = ownRequest(this.lastSeq);
    let finished = null;
    let outcome = "done";
    const here = () => this.generation === generation;
    try {
      finished = await streamTurn(
        body,
        (type, data) => here() && this.onEvent(type, data),
        controller.signal,
        (turnId) => {
          own.turnId = turnId;
        },
      );
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
    if (outcome === "lost") this.offerRetry(body, own, resumed);
    else if (outcome === "unfinished" && !resumed && (finished.error || {}).code === "shutting_down") {
      // Calls of it may have run: what it did is read back before the message goes back in
      // the box, from a server that may be gone by now.
      await this.readBack(body, own);
    } else if (finished) {
      const handedOff = this.handedOff;
      this.handedOff = null;
      // The turn has said its error: the same outage is not said again.
      const session = await this.refresh(errorText(finished.error) || null);
      if (!here()) return "gone";
      const turnOf = (turnId) => session && session.turns.find((t) => t.turnId === turnId);
      const turn = finished.turnId && turnOf(finished.turnId);
      if (turn) this.showCalls(turn);
      if (resumed && session) this.settle(resumed, turnOf(resumed.turnId));
      if (handedOff) this.askIfWaiting(handedOff, session ? turnOf(handedOff.turnId) : undefined);
      if (outcome === "unfinished" && !resumed) {
        // Ended by the server's error envelope for a database outage or a bug, which it gives
        // only while none of the turn's calls ran (docs/http-api.md): the same message can
        // simply be sent again.
        this.putBack(body.instruction);
        this.note(BACK_IN_THE_BOX);
      }
    } else if (outcome === "cancelled") {
      await this.showCancelled(own, resumed);
    }
    return here() ? outcome : "gone";
  }

  /**
   * After Cancel turn closed the stream, which cancels the turn: each of its calls as the
   * record has it once the cancel is on record (a call it stopped reads "outcome unknown", no
   * longer "running…"). The server writes it as the stream closes; it is read again for up to
   * 5 s meanwhile, as long as the session's next request would wait for it (docs/http-api.md).
   * An instruction's turn is found by the id its answer gave: without one, no event came and
   * nothing of it was drawn.
   */
  async showCancelled(own, resumed) {
    const generation = this.generation;
    for (let tries = 0; tries < 20; tries += 1) {
      let session = null;
      try {
        session = await this.load();
      } catch {
        return; // the turn said it was cancelled; its calls' lines stay as they were
      }
      if (this.generation !== generation || !session) return;
      const turnId = resumed ? resumed.turnId : own.turnId;
      const turn = turnId && session.turns.find((t) => t.turnId === turnId);
      if (!turn) return;
      if (turn.status !== "running") {
        this.showCalls(turn);
        if (resumed) this.settle(resumed, turn); // the answers the cancelled resume carried
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /**
   * An instruction's turn that a stopping server cut short, read back from the record. Calls
   * that may have run are not run again by the server, but a new turn's model may ask for
   * them again: with none on record the message goes back in the box, else the calls are
   * shown as recorded and it is not. While the server is away (or has not yet marked the
   * turn interrupted, which its next start does), a Retry reads it again. A turn that cannot
   * be told from another tab's is not shown as this one's (ownTurn).
   */
  async readBack(body, own) {
    const generation = this.generation;
    let session = null;
    let why = null;
    try {
      session = await this.load();
    } catch (error) {
      if (error instanceof Unauthorized) return;
      why = failure(error);
    }
    if (this.generation !== generation || (!session && !why)) return;
    const found = session && ownTurn(session, own, body.instruction);
    const turn = found && found.turn;
    const running = found && (found.unsure || [turn]).some((t) => t && t.status === "running");
    if (!session || running) {
      const retry = h("button", { type: "button" }, "Retry");
      const box = h(
        "div",
        { class: "notice error", role: "alert" },
        "What the turn did could not be read back yet. ",
        why || "The server has not marked it interrupted yet.",
        " Retry once the server is back. ",
        retry,
      );
      retry.addEventListener("click", () => {
        box.remove();
        moveFocus(this.message); // the button goes with the notice
        this.readBack(body, own);
      });
      this.put(box);
      return;
    }
    if (found.unsure && (found.unsure.length === 0 || found.unsure.some(mayHaveRun))) {
      this.note(CANNOT_TELL);
      return;
    }
    if (!turn || !mayHaveRun(turn)) {
      this.putBack(body.instruction);
      this.note(BACK_IN_THE_BOX);
      return;
    }
    this.showCalls(turn);
    this.sayEnding(turn);
    this.note(NOT_SENT_AGAIN);
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

  /** A button that starts a turn: off while one of this tab runs, as Send is (setBusy). */
  turnButton(label) {
    return h("button", { type: "button", class: "starts-turn", disabled: Boolean(this.controller) }, label);
  }

  setBusy(busy) {
    this.sendButton.disabled = busy || Boolean(this.loadState) || this.banner.childElementCount > 0;
    // A lost stream's Retry and "Send answer again" wait as Send does: the server would refuse
    // them, and their request would take the running turn's place (its Cancel) in this page.
    for (const button of this.log.querySelectorAll("button.starts-turn")) button.disabled = busy;
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
    // Drawn again from the record (showCalls): what the line showed before goes.
    details.replaceChildren(details.querySelector("summary"));
    append(details, [
      h("h3", {}, "Arguments"),
      longText(pretty(call.argumentsJson), "arguments"),
      call.errorMessage
        ? [h("h3", {}, "Error"), h("p", { class: "error-text" }, call.errorMessage)]
        : [h("h3", {}, "Result"), longText(pretty(call.resultJson), "result")],
    ]);
  }

  /**
   * Each call of ``turn`` as the record has it (a call's status is its ledger outcome): a line
   * that says otherwise is drawn again (a call a cancel or a crash cut short reads "outcome
   * unknown", no longer "running…"), and a call not drawn yet is added. A call a client
   * answered is left to its card and to settle(), which say the answer on record.
   */
  showCalls(turn) {
    for (const call of turn.toolCalls) {
      if ("clientResult" in call) continue;
      const line = this.calls.get(call.callId)?.querySelector(".call-status");
      if (!line || line.textContent !== callStatus(call)) this.callFinished(call);
    }
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

  /**
   * One card per client-final call; the answers go back together as toolResults. A call whose
   * answer is already on record (the model failed after it, and the page was reloaded or opened
   * in another tab) is drawn answered: the turn waits for that same answer to be sent again
   * (docs/http-api.md), not for a new one, which would lose to it.
   */
  ask(turnId, calls) {
    // answers: what is posted; shown: each answered card's line saying what was answered.
    const pending = { turnId, calls, answers: new Map(), shown: new Map() };
    this.pending = pending;
    for (const call of calls) {
      const el = card(call, (posted, said) => this.answered(pending, posted, said));
      this.put(el);
      const stored = storedAnswer(call);
      if (stored) {
        pending.shown.set(call.callId, answered(el, storedLabel(call)));
        pending.answers.set(call.callId, stored);
      }
    }
    this.setBusy(false);
    if (calls.length > 0 && pending.answers.size === calls.length) this.offerResend(pending);
  }

  /** A card's button answered its call: on to the next card, and once all are, post them. */
  answered(pending, posted, said) {
    // Its buttons are disabled: on to the next card still to answer, else the message box.
    moveFocus(this.log.querySelector(".card button:not(:disabled)") || this.message);
    // The call's line in the transcript says the answer once the server has it (settle).
    pending.shown.set(posted.callId, said);
    pending.answers.set(posted.callId, posted);
    if (pending.answers.size === pending.calls.length && this.pending === pending) this.resume(pending);
  }

  /**
   * Post the answers. If the model fails after them (or the server refuses the request), the
   * turn waits for them still: they can be sent again, or the turn cancelled.
   */
  async resume(pending) {
    if (this.controller) {
      // A card of a turn ended elsewhere, answered while this tab's next turn runs.
      this.note(TURN_RUNNING);
      this.offerResend(pending);
      return;
    }
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
    this.offerResend(pending);
  }

  /** The turn waits for the answers ``pending`` holds: "Send answer again" posts them again. */
  offerResend(pending) {
    const again = this.turnButton("Send answer again");
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
      const turn = await api(
        `/v1/sessions/${encodeURIComponent(this.sessionId)}/turns/${encodeURIComponent(pending.turnId)}/cancel`,
        { method: "POST" },
      );
      for (const button of this.log.querySelectorAll(".card button")) button.disabled = true;
      for (const box of this.log.querySelectorAll(".resend")) box.remove();
      // The cancel answers with the turn: a call that waited reads as it was closed.
      if (turn) this.showCalls(turn);
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
   * After a lost stream: show what the server recorded; run again only if that runs nothing
   * twice. A resume (`resumed`: the answered calls) keeps its turn's seq: its turn is found by
   * id, and posted again only when it did not finish (the server continues it from the answers
   * it kept, and runs no call that may have run, or says why not). An instruction's turn is
   * found by the id its answer gave (`own`, ownTurn); it is sent again only if that turn never
   * started or ended with no call that may have run: a turn a crash interrupted is shown as
   * recorded, since sent again, the instruction would start a new turn whose model may ask for
   * the same calls again (docs/http-api.md). A turn that cannot be told from another tab's is
   * not shown as this one's, and sent again only if none that may be it ran a call.
   */
  offerRetry(body, own, resumed = null) {
    const retry = this.turnButton("Retry");
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
      if (this.controller) {
        // A turn of this tab began while the session was read: this one waits for it.
        this.note(TURN_RUNNING);
        this.offerRetry(body, own, resumed);
        return;
      }
      if (!session) {
        this.offerRetry(body, own, resumed);
        return;
      }
      const again = async () => {
        if ((await this.run(body, resumed)) !== "refused") return;
        // Not taken (409 session_busy: another tab's turn runs): the message goes back in the
        // box, as Send puts it back; a resume's Retry reads the record again.
        if (resumed) this.offerRetry(body, own, resumed);
        else this.putBack(body.instruction);
      };
      const found = resumed
        ? { turn: session.turns.find((t) => t.turnId === resumed.turnId) }
        : ownTurn(session, own, body.instruction);
      const turn = found.turn;
      if ((found.unsure || [turn]).some((t) => t && t.status === "running")) {
        this.note("The turn is still running on the server.");
        this.offerRetry(body, own, resumed);
        return;
      }
      if (found.unsure) {
        if (found.unsure.length > 0 && !found.unsure.some(mayHaveRun)) await again();
        else this.note(CANNOT_TELL);
        return;
      }
      if (turn) this.showCalls(turn);
      if (turn && (turn.status === "completed" || turn.status === "pending") && !waitsFor(turn, resumed)) {
        if (turn.text) this.say("assistant", turn.text);
        if (turn.refusal) this.declined(turn.refusal);
        if (resumed) this.settle(resumed, turn);
        if (turn.status === "pending") this.ask(turn.turnId, turn.pendingCalls);
      } else if (resumed && turn && turn.status === "error") {
        // A resume's final error (a limit): shown; the same answers would only meet it again.
        if (turn.text) this.say("assistant", turn.text);
        this.note(errorText(turn.error) || "The turn failed.", "error");
        this.settle(resumed, turn);
      } else if (!resumed && turn) {
        // Interrupted by a crash, cancelled as the stream dropped, or failed: said as a
        // reopened session says it, and sent again only if none of its calls may have run.
        if (turn.text && !this.textShown) this.say("assistant", turn.text);
        this.sayEnding(turn);
        if (mayHaveRun(turn)) this.note(NOT_SENT_AGAIN);
        else await again();
      } else {
        // It never reached the server; or a resume whose attempt failed, was interrupted or
        // was cancelled, which the server continues from the answers it kept (or answers as
        // it ended).
        await again();
      }
    });
  }
}
