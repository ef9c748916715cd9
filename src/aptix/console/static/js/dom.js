// Building the page. Every outside string (model text, tool results, names) goes in as a
// text node through h(); no HTML is ever parsed from a string here.

// Controls are shown, never obeyed, as the CLI shows them (src/aptix/cli/output.py): a C0
// control as its Control Picture (ESC as "␛"), a C1 control as <U+XXXX>. Newline and tab
// stay; CR LF becomes LF.
const CONTROLS = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g;
// Line and paragraph separators, bidi controls and invisible format characters are spelled
// out as <U+XXXX> too, by the rules of src/aptix/invisible.py (which explains them): a
// separator draws nothing ("line\u2028FORGED" reads "lineFORGED"), bidi controls would
// reorder what is shown ("Trojan Source": "\u202Egnp.exe" reads as "exe.png"), zero-width and
// tag characters would hide text ("dev" + tags spelling " and also drop prod" reads "dev").
// Kept, as there: a flag's tag sequence, a ZWJ between two emoji, a ZWJ or ZWNJ between two
// letters of a script that shapes with them (Arabic, Persian, Indic...), a ZWJ after an Indic
// virama (Malayalam's word-final chillu), the Mongolian vowel separator between Mongolian
// letters.
const SEPARATORS = "\u2028\u2029";
const BIDI = "\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069";
const FORMAT =
  "\u00AD\u180E\u200B-\u200D\u2060-\u2064\u206A-\u206F\uFEFF\uFFF9-\uFFFB" +
  "\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0001}\u{E0020}-\u{E007F}";
const PICTOGRAPHIC =
  "\u00A9\u00AE\u203C\u2049\u2122\u2139\u2194-\u2BFF\u3030\u303D\u3297\u3299\u{1F000}-\u{1FAFF}";
const JOINING =
  "\u0600-\u08FF\u0900-\u0DFF\u0F00-\u0FFF\u1000-\u109F\u1780-\u18AF\uA8E0-\uA8FF\uFB50-\uFDFF\uFE70-\uFEFE";
const VIRAMAS = "\u094D\u09CD\u0A4D\u0ACD\u0B4D\u0BCD\u0C4D\u0CCD\u0D4D\u0DCA";
const KEPT =
  "\u{1F3F4}[\u{E0030}-\u{E0039}\u{E0061}-\u{E007A}]{3,6}\u{E007F}" +
  `|(?<=[${PICTOGRAPHIC}\uFE0F])\u200D(?=[${PICTOGRAPHIC}])` +
  `|(?<=[${JOINING}])[\u200C\u200D](?=[${JOINING}])` +
  `|(?<=[${VIRAMAS}])\u200D` +
  "|(?<=[\u1820-\u18AA])\u180E(?=[\u1820-\u18AA])";
const INVISIBLE = new RegExp(`(${KEPT})|[${SEPARATORS}${BIDI}${FORMAT}]`, "gu");

function shown(char) {
  const code = char.codePointAt(0);
  if (code < 0x20) return String.fromCharCode(0x2400 + code);
  if (code === 0x7f) return "\u2421";
  return `<U+${code.toString(16).toUpperCase().padStart(4, "0")}>`;
}

/** ``text`` with every control and invisible character made visible (see above). */
export function visible(text) {
  return String(text)
    .replace(/\r\n/g, "\n")
    .replace(CONTROLS, shown)
    .replace(INVISIBLE, (match, kept) => kept ?? shown(match));
}

/** An element: h("p", {class: "x", onclick: f}, "text", child, ...). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/** Append children (nodes, strings, arrays of them); strings become text nodes. */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : visible(child));
  }
  return el;
}

/** Replace everything inside el. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** The first 8 characters of an id, as lists show it. */
export function shortId(id) {
  return id ? String(id).slice(0, 8) : "";
}

/** A local date and time from an ISO string. */
export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

/** JSON text pretty-printed when it parses, as it came otherwise. */
export function pretty(text) {
  if (text === null || text === undefined) return "";
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** The text of an error that is a string, an {code, message} object, or absent. */
export function errorText(error) {
  if (!error) return "";
  if (typeof error === "string") return error;
  return error.message ? String(error.message) : pretty(error);
}

// How a tool call stands, in a word or two, read from its ledger outcome. wasExecuted alone
// cannot tell: it is false for every call that did not complete successfully, whether it was
// denied, cut short, or ran and failed (docs/concepts.md). A failed call reads "failed":
// the API does not say whether it ran (an MCP tool the person approved, which then answered
// isError) or was refused before it ran (the workflow guard), so neither is claimed.
const OUTCOME_LABELS = {
  succeeded: "done",
  failed: "failed",
  denied: "denied",
  unknown: "outcome unknown",
  abandoned: "abandoned",
  timed_out: "timed out",
};

/** A tool call's status in words (see above). */
export function callStatus(call) {
  if (call.outcome === "pending") {
    // An approved call runs while its turn still reads pending; a proposed one is about to.
    if (call.approved === true) return "approved, running";
    return call.requiresClientExecution ? "waiting for you" : "running";
  }
  if (call.outcome === "succeeded" && "clientResult" in call && !call.isServerTool) return "answered by the client";
  if (call.outcome in OUTCOME_LABELS) return OUTCOME_LABELS[call.outcome];
  return call.wasExecuted && !call.errorMessage ? "done" : "failed"; // no outcome on record
}

/** Whether a call has ended without success (failed, denied or cut short). */
export function callFailed(call) {
  return call.outcome in OUTCOME_LABELS && call.outcome !== "succeeded";
}

export const PREVIEW_CHARS = 4000;

/** A <pre> of text, cut at PREVIEW_CHARS with a button that shows the whole. */
export function longText(text, label = "text") {
  const full = String(text ?? "");
  const pre = h("pre", { class: "mono" });
  if (full.length <= PREVIEW_CHARS) return replace(pre, full);
  append(pre, full.slice(0, PREVIEW_CHARS));
  const more = h(
    "button",
    { type: "button", class: "link" },
    `Show the whole ${label} (${full.length.toLocaleString()} characters)`,
  );
  more.addEventListener("click", () => {
    replace(pre, full);
    more.remove();
    moveFocus(pre); // the button is gone: the whole text it showed comes next
  });
  return h("div", {}, pre, h("p", { class: "muted" }, `Shortened to ${PREVIEW_CHARS} characters. `, more));
}

/**
 * A table: columns [[heading, row => cell, kind]], rows. Beside a long text (console.css), a
 * column of kind "words" (our own short words, a number) wraps only between words, and one of
 * kind "name" (a tool's name, an id: outside text, any length) keeps a readable width.
 */
export function table(caption, columns, rows) {
  // Below 640 px the rows stack and the headings are off screen (console.css): each cell
  // shows its heading from data-label there, or its number would be unnamed.
  return h(
    "table",
    { class: "data" },
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, columns.map(([name]) => h("th", { scope: "col" }, name)))),
    h(
      "tbody",
      {},
      rows.map((row) =>
        h("tr", {}, columns.map(([name, cell, kind]) => h("td", { "data-label": name, class: kind }, cell(row)))),
      ),
    ),
  );
}

/** A status line for errors and notes, read out by screen readers. */
export function notice(text, kind = "error") {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

/** A labelled field: {id, label, control}, described by its hint (if any) and its error. */
export function field(id, label, control, hint) {
  control.id = id;
  const error = h("p", { class: "field-error", id: `${id}-error` });
  const note = hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null;
  // The hint is read out with the control: it may warn that an edit changes stored text.
  control.setAttribute("aria-describedby", note ? `${id}-hint ${id}-error` : `${id}-error`);
  return h("div", { class: "field" }, h("label", { for: id }, label), note, control, error);
}

/**
 * Move keyboard focus to ``el`` (made focusable from script when it is not). Called where an
 * action removes, hides or disables the control that had focus, which would otherwise drop
 * focus to the start of the page.
 */
export function moveFocus(el) {
  if (!el || !el.isConnected) return;
  if (!el.matches("a[href], button, input, select, textarea, [tabindex]")) el.setAttribute("tabindex", "-1");
  el.focus();
}
