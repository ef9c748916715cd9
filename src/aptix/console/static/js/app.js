// The console's shell: sign-in, navigation and hash routing (#/chat, #/sessions/<id>...).

import { api, ApiError, keyProblem, onUnauthorized, storedKey, storeKey, Unauthorized } from "./api.js";
import { authoringView } from "./authoring.js";
import { modesView, workflowsView } from "./catalog.js";
import { Chat } from "./chat.js";
import { h, moveFocus, notice, replace } from "./dom.js";
import { mayLeave, unsavedEdits } from "./leaving.js";
import { sessionsView } from "./sessions.js";
import { usageView } from "./usage.js";

const main = document.getElementById("main");
const signIn = document.getElementById("sign-in");
const keyInput = document.getElementById("api-key");
const keyError = document.getElementById("api-key-error");
const signOut = document.getElementById("sign-out");
const skip = document.querySelector("a.skip");

const VIEWS = {
  sessions: sessionsView,
  modes: modesView,
  workflows: workflowsView,
  authoring: authoringView,
  usage: usageView,
};

let chat = null;
let started = false;
let navigating = false;
// The key whose answers #main shows ("" when the server needs none); null when it shows none.
let shownFor = null;
// The address of the page #main shows: Back to another page is undone there if it is kept.
let shownHash = "";
// The address of the page shown when it failed to load: its link in the navigation loads it again.
let failedHash = null;
// Whether what failed there is the start-up check: its link then checks again, as its Retry does.
let failedStart = false;

function showSignIn(message) {
  main.hidden = true; // hidden, not cleared: a revoked key re-entered loses nothing typed
  signIn.hidden = false;
  signOut.hidden = true;
  replace(keyError, message || "");
  if (message) keyInput.setAttribute("aria-invalid", "true");
  else keyInput.removeAttribute("aria-invalid");
  keyInput.focus();
}

/** Show the console; ``focus``: move focus into it (the control that had it is now hidden). */
function showApp(focus = false) {
  const key = storedKey() || "";
  // Another key may belong to another org: it must not see what the previous one fetched.
  if (shownFor !== null && shownFor !== key) forget();
  signIn.hidden = true;
  main.hidden = false;
  signOut.hidden = !storedKey();
  keyInput.value = "";
  replace(keyError);
  keyInput.removeAttribute("aria-invalid");
  if (!started) {
    started = true;
    listenToNavigation();
  }
  if (shownFor === null) route(false);
  shownFor = key;
  if (focus) moveFocus(main);
}

/** Drop everything the previous key fetched: the chat (a running turn's stream is closed, as
 * closing the tab would), the page shown, and the session or workflow id in the address. */
function forget() {
  if (chat) chat.reset(false);
  chat = null;
  replace(main);
  shownFor = null;
  const [name] = pagePath();
  history.replaceState(null, "", `#/${name || "chat"}`);
}

function listenToNavigation() {
  if (navigating) return;
  navigating = true;
  window.addEventListener("hashchange", () => route(true));
  // A link to another page asks before it is followed, so a kept edit leaves no history entry.
  document.addEventListener(
    "click",
    (event) => {
      const link = event.target instanceof Element ? event.target.closest("a[href]") : null;
      if (!link || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
      const href = link.getAttribute("href");
      // A link to the address shown moves nothing (no hashchange): a page that failed to load
      // is loaded again.
      if (href === location.hash && href === failedHash) {
        if (failedStart) probeAndShow(true);
        else route(true);
      } else if (href.startsWith("#/") && href !== location.hash && !mayLeave()) event.preventDefault();
    },
    true,
  );
  // A reload or a closed tab: the browser asks.
  window.addEventListener("beforeunload", (event) => {
    if (!unsavedEdits()) return;
    event.preventDefault();
    event.returnValue = "";
  });
}

/** What a failed start-up probe tells the person. */
function probeFailure(error) {
  if (error instanceof ApiError) {
    if (error.status === 429) {
      const wait = error.retryAfter === null ? "shortly" : `in ${error.retryAfter} s`;
      return `The server is rate limiting requests: retry ${wait}. (${error.message})`;
    }
    const said = error.message === `HTTP ${error.status}` ? "" : `: ${error.message}`;
    return `The server answered ${error.status}${said}`;
  }
  return `The server could not be reached: ${error.message}`;
}

/** The probe failed for another reason than the key: say why, offer a retry, and let the
 * navigation work (the other pages may well answer). ``focus``: on the new Retry button. */
function showStartFailure(error, focus = false) {
  signIn.hidden = true;
  main.hidden = false;
  signOut.hidden = !storedKey();
  const retry = h("button", { type: "button" }, "Retry");
  retry.addEventListener("click", () => {
    retry.disabled = true;
    probeAndShow(true);
  });
  replace(main, h("div", { class: "view" }, h("h1", {}, "Aptix console"), notice(probeFailure(error)), retry));
  failedHash = location.hash;
  failedStart = true;
  listenToNavigation();
  if (focus) moveFocus(retry);
}

async function probeAndShow(focus = false) {
  try {
    await probe();
    showApp(focus);
  } catch (error) {
    if (!(error instanceof Unauthorized)) showStartFailure(error, focus);
  }
}

/** Whether /v1 answers with the stored key (or without one, when the server has none). */
async function probe() {
  await api("/v1/modes");
}

async function submitKey(event) {
  event.preventDefault();
  const key = keyInput.value.trim();
  if (!key) {
    showSignIn("Enter an API key.");
    return;
  }
  const problem = keyProblem(key);
  if (problem) {
    showSignIn(`That API key was not accepted: ${problem}.`);
    return;
  }
  storeKey(key);
  try {
    await probe();
    showApp(true);
  } catch (error) {
    storeKey(null);
    if (error instanceof Unauthorized) {
      showSignIn("That API key was not accepted. Check it and try again.");
    } else {
      showSignIn(probeFailure(error));
    }
  }
}

/** Whether the address names a page (#/name...) rather than a spot in this one (#main). */
function namesPage(hash) {
  return hash === "" || hash === "#" || hash.startsWith("#/");
}

/** The page the address names, as [name, ...params]; an in-page fragment names the chat. */
function pagePath() {
  return (namesPage(location.hash) ? location.hash : "").replace(/^#\/?/, "").split("/");
}

/** Why the address's parameters name nothing (a link cut or mistyped); null when they may. */
function brokenLink(params) {
  if (!params) return "This link is broken: the address holds a malformed %-escape, so it names no page.";
  // A URL resolves "." and ".." as steps of its path: fetched, such an id would read another
  // route (the list of sessions, /v1/) as if it were the session or workflow.
  if (params.some((param) => param === "." || param === "..")) {
    return 'This link is broken: "." and ".." are no ids, so the address names no page.';
  }
  return null;
}

/** The address's parameters decoded, or null when one holds a malformed %-escape. */
function decoded(parts) {
  try {
    return parts.filter(Boolean).map(decodeURIComponent);
  } catch {
    return null; // URIError
  }
}

function route(moved) {
  // An in-page fragment is no page: on a hashchange the page shown (and any edit in it) stays.
  if (moved && !namesPage(location.hash)) return;
  if (moved && !mayLeave()) {
    // Back, Forward or a script moved the address: the page with the edits stays, and so
    // does its address.
    history.pushState(null, "", shownHash || "#/chat");
    return;
  }
  shownHash = location.hash;
  failedHash = null;
  failedStart = false;
  const [name = "", ...rest] = pagePath();
  const view = name || "chat";
  const title = `${view[0].toUpperCase()}${view.slice(1)}`;
  const params = decoded(rest);
  const broken = brokenLink(params);
  for (const link of document.querySelectorAll("nav a")) {
    if (!broken && link.getAttribute("href") === `#/${view}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (broken) {
    // A link cut or mistyped (a "%" not followed by two hex digits, half of a UTF-8 character;
    // a dot segment) names nothing: said as such, not blamed on the server.
    replace(main, h("h1", {}, "Not found"), h("p", {}, broken));
    document.title = "Not found · Aptix console";
    if (moved) moveFocus(main);
    return;
  }
  if (view === "chat") {
    if (!chat) chat = new Chat();
    replace(main, chat.root);
    chat.show(params);
  } else if (VIEWS[view]) {
    const el = h("div", { class: "view" });
    replace(main, el);
    VIEWS[view](el, params).catch((error) => {
      if (!(error instanceof Unauthorized) && el.isConnected) showViewFailure(el, title, error);
    });
  } else {
    replace(main, h("h1", {}, "Not found"), h("p", {}, "There is no such page."));
  }
  document.title = `${title} · Aptix console`;
  if (moved) moveFocus(main);
}

/** A page that failed to load (the database down, say): its heading, why, and a Retry that loads
 * it again (its link in the navigation does too). */
function showViewFailure(el, title, error) {
  const retry = h("button", { type: "button" }, "Retry");
  retry.addEventListener("click", () => {
    route(false);
    moveFocus(main); // the button is gone with the page it was on
  });
  if (!el.querySelector("h1")) el.prepend(h("h1", {}, title));
  el.append(notice(error.message), retry);
  failedHash = location.hash;
}

/** "Skip to content" moves focus past the navigation; the address (the route) stays as it is. */
function skipToContent(event) {
  event.preventDefault();
  moveFocus(main.hidden ? keyInput : main);
}

async function start() {
  skip.addEventListener("click", skipToContent);
  document.getElementById("sign-in-form").addEventListener("submit", submitKey);
  signOut.addEventListener("click", () => {
    if (!mayLeave()) return;
    storeKey(null);
    forget();
    showSignIn("");
  });
  onUnauthorized(() =>
    showSignIn(storedKey() ? "Your API key is no longer accepted. Enter a valid one to go on." : ""),
  );
  const key = storedKey();
  if (key && keyProblem(key)) {
    storeKey(null);
    showSignIn(`That API key was not accepted: ${keyProblem(key)}.`);
    return;
  }
  await probeAndShow();
}

start();
