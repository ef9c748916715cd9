// Building the page. Every outside string (model text, tool results, names) goes in as a
// text node through h(); no HTML is ever parsed from a string here.

// Controls are shown, never obeyed, as the CLI shows them (src/aptix/cli/output.py): a C0
// control as its Control Picture (ESC as "␛"), a C1 or bidirectional control as <U+XXXX>.
// Bidi controls would reorder what is shown ("Trojan Source": "\u202Egnp.exe" reads as
// "exe.png"); the others would be invisible. Newline and tab stay; CR LF becomes LF.
const CONTROLS = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;

function shown(char) {
  const code = char.charCodeAt(0);
  if (code < 0x20) return String.fromCharCode(0x2400 + code);
  if (code === 0x7f) return "\u2421";
  return `<U+${code.toString(16).toUpperCase().padStart(4, "0")}>`;
}

/** ``text`` with every control character made visible (see above). */
export function visible(text) {
  return String(text).replace(/\r\n/g, "\n").replace(CONTROLS, shown);
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

// How a tool call stands, in a word or two: its ledger outcome first, since a call that did
// not run (denied, cut short, refused) reads wasExecuted false for different reasons.
const OUTCOME_LABELS = {
  denied: "denied",
  unknown: "outcome unknown",
  abandoned: "abandoned",
  timed_out: "timed out",
};

export function callStatus(call) {
  if (call.outcome === "pending" && call.requiresClientExecution) return "waiting for you";
  if (call.outcome in OUTCOME_LABELS) return OUTCOME_LABELS[call.outcome];
  if (!call.wasExecuted) return "refused";
  if ("clientResult" in call && !call.isServerTool) return "answered by the client";
  return call.errorMessage ? "failed" : "done";
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

/** A table: columns [[heading, row => cell]], rows. */
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
      rows.map((row) => h("tr", {}, columns.map(([name, cell]) => h("td", { "data-label": name }, cell(row))))),
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
