// Authoring: draft a workflow, edit its TUL-006 §10 fields with inline validation errors,
// validate, publish after a confirmation that shows the version change, and its history.

import { ApiError, invoke, Unauthorized } from "./api.js";
import { append, field, h, moveFocus, notice, replace, table, visible, when } from "./dom.js";
import { guardEdits } from "./leaving.js";

const TOOL = "agent_workflow_authoring";

// Said instead of the tool's refusal of a stale revision (409/412 over HTTP, or an
// expectedRevision problem), which is written for a model ("Read it again with get_workflow").
const CHANGED_MEANWHILE =
  "This workflow changed since you opened it, so nothing was changed. Reload the page to see the latest version.";
// The same refusal when the page holds edits: a reload would drop them, so they are shown.
const CHANGED_KEEPING_EDITS =
  "This workflow changed since you opened it, so nothing was changed. Your edits stay in the fields and are " +
  "listed below to copy: reloading the page shows the latest version without them.";
// Validate reads the stored workflow: if it moved on, its problems are not this page's.
const VALIDATED_ANOTHER =
  "This workflow changed since you opened it, so Validate checked a version this page does not show. " +
  "Reload the page to see the latest version.";

/** A refusal's text for a person. */
function problemText(problem) {
  return problem.field === "expectedRevision" ? CHANGED_MEANWHILE : problem.message;
}

/** The refusals of an outcome, as one line. */
function problemsText(outcome) {
  return [...new Set((outcome.errors || []).map(problemText))].join(" ");
}

/** [key, label, kind, options]: kind is text, textarea, lines, inputs, select or checkbox. */
const FIELDS = [
  ["title", "Title", "text"],
  ["description", "Description", "textarea"],
  ["version", "Version", "text"],
  ["visibility", "Visibility", "select", ["public", "experimental", "hidden"]],
  ["userIntentPatterns", "User intent patterns", "lines"],
  ["requiredInputs", "Required inputs", "inputs"],
  ["instructionText", "Instruction text", "textarea"],
  ["permittedTools", "Permitted tools", "lines"],
  ["completionCriteria", "Completion criteria", "lines"],
  ["followUpOptions", "Follow-up options", "lines"],
  ["preconditions", "Preconditions", "lines"],
  ["destructiveActions", "Destructive actions", "lines"],
  ["allowedTransitions", "Allowed transitions", "lines"],
  ["notes", "Notes", "lines"],
  ["autoStart", "Start automatically when matched", "checkbox"],
  ["requiresApproval", "Requires approval", "checkbox"],
];

const HINTS = {
  lines: "One per line.",
  inputs: "One per line: name: description; add [optional] at the end of an optional one.",
};

// Stored text is shown as every page shows outside text (dom.js visible()): a bidirectional
// control would make "Invoice \u202Egnp.exe" read "Invoice exe.png" on the page where a person
// reviews the workflow before publishing it.
const CONTROLS_SHOWN =
  "Holds control or invisible characters, shown as ␛ or <U+XXXX> (they could make the text read otherwise).";
const CONTROLS_KEPT = "They stay as stored unless you edit this field; an edit saves the text as shown.";

// The statuses in which a workflow is served (DESIGN: runnable).
const SERVED = new Set(["published", "deprecated"]);

function authoring(args) {
  return invoke(TOOL, args);
}

export async function authoringView(el, params) {
  if (params[0]) return editor(el, params[0]);
  const listed = await authoring({ operation: "list_authoring_workflows" });
  const form = h("form", { class: "draft", "aria-labelledby": "draft-heading" });
  const inputs = {
    workflowId: h("input", { type: "text", autocomplete: "off" }),
    title: h("input", { type: "text", autocomplete: "off" }),
    description: h("textarea", { rows: 2 }),
  };
  const status = h("div");
  guardEdits(form, () => Object.values(inputs).some((input) => input.value.trim()));
  replace(
    form,
    h("h2", { id: "draft-heading" }, "Draft a workflow"),
    field("draft-workflowId", "Workflow ID", inputs.workflowId, "snake_case, for example onboard_customer."),
    field("draft-title", "Title", inputs.title),
    field("draft-description", "Description", inputs.description),
    status,
    h("button", { type: "submit" }, "Create draft"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const id = inputs.workflowId.value.trim();
    const outcome = await run(status, () =>
      authoring({
        operation: "draft_workflow",
        workflowId: id,
        title: inputs.title.value,
        description: inputs.description.value,
      }),
    );
    if (!outcome) return;
    if (showProblems(form, "draft-", status, outcome)) return;
    form.reset(); // saved: its page opens without asking
    location.hash = `#/authoring/${encodeURIComponent(outcome.workflow.workflowId)}`;
  });
  const rows = listed.workflows || [];
  replace(
    el,
    h("h1", {}, "Authoring"),
    form,
    h("h2", {}, "Workflows"),
    table(
      "Workflows of this org, drafts included",
      [
        // Read-only ones open too: their page shows the served version and says why.
        ["Workflow", (w) => h("a", { href: `#/authoring/${encodeURIComponent(w.workflowId)}` }, w.title)],
        ["Id", (w) => h("code", {}, w.workflowId)],
        ["Status", (w) => h("span", { class: `status ${w.status}` }, w.status)],
        ["Version", versionCell],
        ["Visibility", (w) => w.visibility],
        ["Editable", (w) => (w.readOnly ? "no: built in or from a deployment file" : "yes")],
      ],
      rows,
    ),
  );
}

/** A list row's version, and the published one a draft is pending over (served or not). */
function versionCell(w) {
  if (!w.publishedVersion) return w.version;
  const status = w.publishedStatus || "published";
  if (SERVED.has(status) && w.served !== false) return `${w.version} (serving ${w.publishedVersion})`;
  return `${w.version} (${w.publishedVersion} ${status}, not served)`;
}

/** Run a call; on failure show why in `status` and return null. `changed()`: what a refusal
 * of a change based on an older revision shows. */
async function run(status, call, changed = () => notice(CHANGED_MEANWHILE)) {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ApiError && (error.status === 409 || error.status === 412)) {
      replace(status, changed());
    } else if (!(error instanceof Unauthorized)) {
      replace(status, notice(error.message));
    }
    return null;
  }
}

/** Put each {field, message} under its field; true when there were problems. */
function showProblems(form, prefix, status, outcome) {
  for (const el of form.querySelectorAll(".field-error")) el.textContent = "";
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  if (outcome.ok) {
    replace(status, (outcome.messages || []).map((m) => notice(m, "ok")));
    return false;
  }
  const general = [];
  let first = null;
  for (const problem of outcome.errors || []) {
    const key = String(problem.field || "").split(".")[0];
    const control = key ? form.querySelector(`#${prefix}${CSS.escape(key)}`) : null;
    if (!control) {
      general.push(problem.field && problem.field !== "expectedRevision" ? `${problem.field}: ${problem.message}` : problemText(problem));
      continue;
    }
    const error = form.querySelector(`#${prefix}${CSS.escape(key)}-error`);
    append(error, error.textContent ? ` ${problem.message}` : problem.message);
    control.setAttribute("aria-invalid", "true");
    first = first || control;
  }
  const count = (outcome.errors || []).length;
  replace(
    status,
    notice(`${count} problem${count === 1 ? "" : "s"} to fix${general.length ? "" : ": see the marked fields"}.`),
    general.length ? h("ul", { class: "problems" }, general.map((g) => h("li", {}, g))) : null,
  );
  (first || status).focus?.();
  return true;
}

function control(kind, options) {
  if (kind === "textarea") return h("textarea", { rows: 3 });
  if (kind === "lines" || kind === "inputs") return h("textarea", { rows: 3 });
  if (kind === "select") return h("select", {}, options.map((o) => h("option", { value: o }, o)));
  if (kind === "checkbox") return h("input", { type: "checkbox" });
  return h("input", { type: "text", autocomplete: "off" });
}

function formatInputs(items) {
  return items.map((i) => `${i.name}: ${i.description || ""}`.trimEnd() + (i.required === false ? " [optional]" : "")).join("\n");
}

function parseInputs(text) {
  return lines(text).map((line) => {
    const optional = /\s*\[optional\]$/i.test(line);
    const bare = line.replace(/\s*\[optional\]$/i, "");
    const colon = bare.indexOf(":");
    const name = (colon < 0 ? bare : bare.slice(0, colon)).trim();
    const description = colon < 0 ? "" : bare.slice(colon + 1).trim();
    return { name, description, required: !optional };
  });
}

function lines(text) {
  return text.split("\n").map((l) => l.trim()).filter(Boolean);
}

function read(kind, el) {
  if (kind === "checkbox") return el.checked;
  if (kind === "lines") return lines(el.value);
  if (kind === "inputs") return parseInputs(el.value);
  return el.value;
}

/** What a control shows: an edit is a change of this, so what was loaded is never re-parsed. */
function shown(kind, el) {
  return kind === "checkbox" ? String(el.checked) : el.value;
}

/** Show `value` in a control, its control characters made visible; true when it held some. */
function write(kind, el, value) {
  if (kind === "checkbox") {
    el.checked = Boolean(value);
    return false;
  }
  let text;
  if (kind === "lines") text = (value || []).map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join("\n");
  else if (kind === "inputs") text = formatInputs(value || []);
  else text = String(value ?? "");
  const shownText = visible(text);
  el.value = shownText;
  return shownText !== text.replace(/\r\n/g, "\n");
}

/** The sentence under the heading: which version this is and what is served. */
function statusLine(loaded, history, row) {
  if (row && row.readOnly) {
    const served = SERVED.has(loaded.status) && row.served !== false;
    return (
      `Version ${loaded.version} (${loaded.status}) comes from a deployment file and is read-only here: ` +
      `it changes through its file and a review. ${served ? "It is served." : "It is not served."}`
    );
  }
  const served = servedRevision(history);
  let said = "Nothing is published yet.";
  if (served && SERVED.has(served.status) && !(row && row.served === false)) said = `Version ${served.version} is served.`;
  else if (served) said = `Version ${served.version} is ${served.status} (not served).`;
  return `Editing version ${loaded.version} (${loaded.status}). ${said}`;
}

/** The newest published version's revision, in whatever status (disabled too); none once
 * removed (store.py served_revision). */
function servedRevision(history) {
  for (const r of [...history].reverse()) {
    if (r.action === "remove") return null;
    if (r.action === "publish" || r.action === "status") return r;
  }
  return null;
}

function historyTable(history) {
  if (!history.length) return h("p", {}, "No revisions stored (a deployment file).");
  return table(
    "Revisions, oldest first",
    [
      ["Revision", (r) => String(r.revision)],
      ["Action", (r) => r.action],
      ["Version", (r) => r.version],
      ["Status", (r) => r.status],
      ["When", (r) => when(r.at)],
      ["By", (r) => r.by || "—"],
    ],
    history,
  );
}

async function editor(el, id) {
  const [got, past, listed] = await Promise.all([
    authoring({ operation: "get_workflow", workflowId: id }),
    authoring({ operation: "workflow_history", workflowId: id }),
    authoring({ operation: "list_authoring_workflows" }),
  ]);
  if (!got.ok) {
    replace(el, h("h1", {}, "Authoring"), notice((got.errors || []).map((e) => e.message).join(" ")));
    return;
  }
  let loaded = got.workflow;
  // A built-in or deployment-file workflow: shown, never offered for saving or publishing.
  const row = (listed.workflows || []).find((w) => w.workflowId === loaded.workflowId);
  const readOnly = Boolean(row && row.readOnly);
  // The revision this page shows: every change is based on it, so a change someone else made
  // meanwhile is refused (409/412) and shown, never overwritten.
  let revision = got.revision;
  const based = (args) => (revision === undefined ? args : { ...args, expectedRevision: revision });
  const track = (outcome) => {
    if (outcome && outcome.ok && outcome.revision !== undefined) revision = outcome.revision;
    return outcome;
  };
  let history = past.ok ? past.history : [];
  const controls = {};
  // What each control showed when loaded or last saved. A field is sent only when the person
  // edited it: a stored value the control cannot show as it is (a list entry or title with a
  // line break) is left as stored by a save of another field.
  const saved = {};
  const status = h("div", { class: "status-area", tabindex: "-1" });
  const form = h("form", { class: "editor", "aria-labelledby": "editor-title" });
  const hints = {};
  for (const [key, , kind, options] of FIELDS) {
    controls[key] = control(kind, options);
    const marked = write(kind, controls[key], loaded[key]);
    saved[key] = shown(kind, controls[key]);
    hints[key] = [HINTS[kind], marked && CONTROLS_SHOWN, marked && !readOnly && CONTROLS_KEPT].filter(Boolean).join(" ");
    if (readOnly && (kind === "select" || kind === "checkbox")) controls[key].disabled = true;
    else if (readOnly) controls[key].readOnly = true;
  }
  /** The fields edited since they were loaded or saved. */
  const edited = () => FIELDS.filter(([key, , kind]) => shown(kind, controls[key]) !== saved[key]);
  // Leaving the page (a link, Back, a reload) asks while an edit is not saved.
  if (!readOnly) guardEdits(form, () => edited().length > 0);
  /** A refusal of a change based on an older revision: with the edits it kept, to copy. */
  const changed = () => {
    const kept = edited();
    if (!kept.length) return notice(CHANGED_MEANWHILE);
    return [
      notice(CHANGED_KEEPING_EDITS),
      h(
        "section",
        { class: "kept-edits", "aria-labelledby": "kept-edits-title" },
        h("h2", { id: "kept-edits-title" }, "Your edits, not saved"),
        kept.map(([key, label, kind]) => [h("h3", {}, label), h("pre", { class: "mono" }, shown(kind, controls[key]))]),
      ),
    ];
  };
  const statusLineEl = h("p", { id: "editor-status" });
  const historyEl = h("div");
  const governance = h("section", { "aria-labelledby": "status-title" });
  /** Draw what depends on the stored state: the line under the heading, the history, and
   * the status of the published version (offered once there is one). */
  const drawState = () => {
    replace(statusLineEl, statusLine(loaded, history, row));
    replace(historyEl, historyTable(history));
    const served = servedRevision(history);
    governance.hidden = readOnly || !served;
    statusChoice.value = served ? served.status : "published";
  };
  /** After a change: show `workflow` as stored (each control not edited meanwhile) and the
   * history as it is now. */
  const showStored = async (workflow) => {
    loaded = workflow;
    for (const [key, , kind] of FIELDS) {
      if (shown(kind, controls[key]) !== saved[key]) continue; // typed while it was saving
      write(kind, controls[key], workflow[key]);
      saved[key] = shown(kind, controls[key]);
    }
    const past = await authoring({ operation: "workflow_history", workflowId: id }).catch((error) => {
      if (error instanceof Unauthorized) throw error;
      return null;
    });
    if (past && past.ok) history = past.history;
    drawState();
  };
  /** Save the edited fields: the outcome, {unchanged: true}, or null when it failed. */
  const save = async () => {
    const fields = {};
    const showing = {};
    for (const [key, , kind] of FIELDS) {
      showing[key] = shown(kind, controls[key]);
      if (showing[key] !== saved[key]) fields[key] = read(kind, controls[key]);
    }
    if (!Object.keys(fields).length) return { ok: true, unchanged: true };
    const update = () => authoring(based({ operation: "update_workflow", workflowId: id, fields }));
    const outcome = track(await run(status, update, changed));
    if (outcome && !outcome.ok && outcome.currentRevision !== undefined) {
      replace(status, changed());
      return null;
    }
    if (outcome && outcome.ok) {
      for (const key of Object.keys(fields)) saved[key] = showing[key];
      await showStored(outcome.workflow);
    }
    return outcome;
  };
  /** Save, then (when the save had no problems) run `after`. */
  const act = async (after) => {
    const saved = await save();
    if (!saved || (!saved.unchanged && showProblems(form, "wf-", status, saved))) return;
    await after(saved);
  };
  const saveButton = h("button", { type: "submit" }, "Save draft");
  const validateButton = h("button", { type: "button" }, "Validate");
  const publishButton = h("button", { type: "button", class: "primary" }, "Publish…");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (readOnly) return;
    act(async (saved) => {
      if (saved.unchanged) replace(status, notice("Nothing changed since the last save.", "ok"));
    });
  });
  const validate = async () => {
    const outcome = await run(status, () => authoring({ operation: "validate_workflow", workflowId: id }));
    if (!outcome) return false;
    // The answer names the revision it checked: another than this page's is not its content.
    if (outcome.revision !== undefined && revision !== undefined && outcome.revision !== revision) {
      for (const error of form.querySelectorAll(".field-error")) error.textContent = "";
      for (const marked of form.querySelectorAll("[aria-invalid]")) marked.removeAttribute("aria-invalid");
      replace(status, notice(VALIDATED_ANOTHER));
      return false;
    }
    return !showProblems(form, "wf-", status, outcome);
  };
  validateButton.addEventListener("click", () => act(validate));
  publishButton.addEventListener("click", () =>
    act(async () => {
      const served = servedRevision(history);
      if (await validate()) confirmPublish(el, id, loaded.version, served ? served.version : null, revision);
    }),
  );
  replace(
    form,
    FIELDS.map(([key, label]) => field(`wf-${key}`, label, controls[key], hints[key])),
    status,
    readOnly ? null : h("div", { class: "buttons sticky" }, saveButton, validateButton, publishButton),
  );
  // Status is governance, not content: it changes the served version at once (admins only).
  const statusChoice = h(
    "select",
    { id: "wf-status-change" },
    ["published", "deprecated", "disabled"].map((o) => h("option", { value: o }, o)),
  );
  const statusNote = h("div");
  const statusButton = h("button", { type: "button" }, "Change status");
  statusButton.addEventListener("click", async () => {
    const fields = { status: statusChoice.value };
    const outcome = track(await run(statusNote, () => authoring(based({ operation: "update_workflow", workflowId: id, fields }))));
    if (!outcome) return;
    if (outcome.ok) await showStored(outcome.workflow);
    replace(statusNote, outcome.ok ? (outcome.messages || []).map((m) => notice(m, "ok")) : notice(problemsText(outcome)));
  });
  // Not "served": a disabled version is published but not served.
  replace(
    governance,
    h("h2", { id: "status-title" }, "Status of the published version"),
    h("div", { class: "inline-field" }, h("label", { for: "wf-status-change" }, "Status"), statusChoice, statusButton),
    statusNote,
  );
  drawState();
  replace(
    el,
    h("p", {}, h("a", { href: "#/authoring" }, "Back to authoring")),
    h("h1", { id: "editor-title" }, "Workflow ", h("code", {}, id)),
    statusLineEl,
    (got.messages || []).map((m) => notice(m, "note")),
    form,
    readOnly ? null : governance,
    h("h2", {}, "Version history"),
    historyEl,
  );
}

/** A person confirms, seeing the version change, before anything is published. */
function confirmPublish(el, id, version, served, revision) {
  const publish = h("button", { type: "button", class: "primary" }, "Publish");
  const cancel = h("button", { type: "button" }, "Cancel");
  const result = h("div");
  const dialog = h(
    "dialog",
    { "aria-labelledby": "publish-title", "aria-describedby": "publish-change" },
    h("h2", { id: "publish-title" }, "Publish ", h("code", {}, id), "?"),
    h("p", { id: "publish-change", class: "version-change" }, served ? `Version ${served} → ${version}` : `First version: ${version}`),
    h("p", {}, "Once published, this version is served to every session of your org at once."),
    result,
    h("div", { class: "buttons" }, publish, cancel),
  );
  cancel.addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => dialog.remove());
  publish.addEventListener("click", async () => {
    publish.disabled = true;
    const args = { operation: "publish_workflow", workflowId: id };
    if (revision !== undefined) args.expectedRevision = revision;
    const outcome = await run(result, () => authoring(args));
    if (!outcome || !outcome.ok) {
      if (outcome) replace(result, notice(problemsText(outcome)));
      publish.disabled = false; // the refusal is shown; the person may fix it and try again
      return;
    }
    dialog.close();
    await editor(el, id);
    // The editor is drawn again, "Publish…" with it: focus goes to what the publish said.
    const said = el.querySelector(".status-area");
    said.append(...(outcome.messages || []).map((m) => notice(m, "ok")));
    moveFocus(said);
  });
  document.body.append(dialog);
  dialog.showModal();
}
