// Modes and workflows: the catalogs, a manifest, and the match playground.

import { api, ApiError, invoke, Unauthorized } from "./api.js";
import { h, notice, pretty, replace, table } from "./dom.js";

// MCP-style hints a tool declares, shown as badges (absent hints are not guessed).
const HINTS = [
  ["readOnlyHint", true, "read-only"],
  ["destructiveHint", true, "destructive"],
  ["idempotentHint", true, "idempotent"],
  ["openWorldHint", true, "open world"],
];

function toolItem(name, tool) {
  const notes = tool?.annotations || {};
  return h(
    "li",
    { "data-tool": name },
    h("code", {}, name),
    notes.title ? ` ${notes.title}` : null,
    HINTS.filter(([key, value]) => notes[key] === value).map(([, , label]) => h("span", { class: "badge" }, label)),
    tool && !tool.serverFinal ? h("span", { class: "badge" }, "client") : null,
  );
}

export async function modesView(el) {
  const [modes, tools] = await Promise.all([api("/v1/modes"), api("/v1/tools")]);
  const byName = new Map(tools.map((t) => [t.name, t]));
  replace(
    el,
    h("h1", {}, "Modes"),
    modes.map((m) =>
      h(
        "article",
        { class: "mode", "aria-labelledby": `mode-${m.key}` },
        h("h2", { id: `mode-${m.key}` }, m.displayName, " ", h("code", {}, m.key), m.isDefault ? h("span", { class: "badge" }, "default") : null),
        h("p", {}, m.description),
        m.welcomeMessage ? h("p", { class: "welcome" }, h("span", { class: "who" }, "Welcome "), m.welcomeMessage) : null,
        h("h3", {}, "Tools offered"),
        h("ul", { class: "tools" }, m.offeredTools.map((t) => toolItem(t, byName.get(t)))),
      ),
    ),
  );
}

export async function workflowsView(el, params) {
  if (params[0]) return manifestView(el, params[0]);
  const [listed, authored] = await Promise.all([
    api("/v1/workflows"),
    invoke("agent_workflow_authoring", { operation: "list_authoring_workflows" }).catch((error) => {
      if (error instanceof Unauthorized) throw error;
      return null;
    }),
  ]);
  // The public list, with the status of each; disabled ones (no longer listed) are marked.
  // A row's status is the served version's: a pending draft (whose own status is "draft")
  // leaves it published, deprecated or disabled until it is published, and is only marked.
  const status = new Map((authored?.workflows || []).map((w) => [w.workflowId, w]));
  const row = (w, authoredRow) => ({
    ...w,
    status: servedStatus(authoredRow) || "published",
    draftPending: authoredRow?.status === "draft" && Boolean(authoredRow.publishedVersion),
  });
  const rows = listed.workflows.map((w) => row(w, status.get(w.workflowId)));
  for (const w of authored?.workflows || []) {
    const shown = rows.some((r) => r.workflowId === w.workflowId);
    const served = servedStatus(w);
    // Listed as the version served is, not as a pending draft over it would be.
    const version = servedVersion(w);
    if (!shown && version.visibility !== "hidden" && (served === "disabled" || served === "deprecated")) {
      rows.push({ ...row(version, w), description: "" });
    }
  }
  const request = h("input", { id: "match-request", type: "text", autocomplete: "off" });
  const results = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "inline" },
    h("label", { for: "match-request" }, "Request"),
    request,
    h("button", { type: "submit" }, "Match"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!request.value.trim()) return;
    try {
      const found = await api("/v1/workflows/match", { method: "POST", body: { userMessage: request.value } });
      replace(
        results,
        found.matches.length
          ? table(
              "Candidates, best first",
              [
                ["Workflow", (m) => h("a", { href: `#/workflows/${encodeURIComponent(m.workflowId)}` }, m.title)],
                ["Score", (m) => m.matchScore.toFixed(2)],
                ["Runnable", (m) => (m.runnable ? "yes" : "no")],
                ["Why", (m) => [m.why || "", m.note ? ` (${m.note})` : ""]],
              ],
              found.matches,
            )
          : h("p", {}, "No workflow matches this request."),
      );
    } catch (error) {
      if (!(error instanceof Unauthorized)) replace(results, notice(error.message));
    }
  });
  replace(
    el,
    h("h1", {}, "Workflows"),
    table(
      "Workflows this key can run",
      [
        ["Workflow", (w) => h("a", { href: `#/workflows/${encodeURIComponent(w.workflowId)}` }, w.title)],
        ["Id", (w) => h("code", {}, w.workflowId)],
        ["Status", (w) => [
          h("span", { class: `status ${w.status}` }, w.status),
          w.draftPending ? [" ", h("span", { class: "badge" }, "draft pending")] : null,
        ]],
        ["Description", (w) => w.description || ""],
      ],
      rows,
    ),
    h("h2", {}, "Match playground"),
    h("p", {}, "Type a request the way a user would; the candidates show their scores and why they matched."),
    form,
    results,
  );
}

/** A list_authoring_workflows row with the title and visibility of its version served, not its pending draft's. */
function servedVersion(authoredRow) {
  if (authoredRow.status !== "draft" || !authoredRow.publishedVersion) return authoredRow;
  return {
    ...authoredRow,
    title: authoredRow.publishedTitle ?? authoredRow.title,
    visibility: authoredRow.publishedVisibility ?? authoredRow.visibility,
  };
}

/** The status of the version served, from a list_authoring_workflows row (none for a draft only). */
function servedStatus(authoredRow) {
  if (!authoredRow) return null;
  if (authoredRow.status !== "draft") return authoredRow.status;
  return authoredRow.publishedStatus || null;
}

const LIST_FIELDS = [
  ["userIntentPatterns", "User intent patterns"],
  ["permittedTools", "Permitted tools"],
  ["completionCriteria", "Completion criteria"],
  ["followUpOptions", "Follow-up options"],
  ["preconditions", "Preconditions"],
  ["destructiveActions", "Destructive actions"],
  ["allowedTransitions", "Allowed transitions"],
  ["notes", "Notes"],
];

async function manifestView(el, id) {
  el.classList.add("manifest"); // its title, description and list items wrap (console.css)
  let found;
  try {
    found = await api(`/v1/workflows/${encodeURIComponent(id)}`);
  } catch (error) {
    // 409: the workflow cannot be run (disabled, a draft, or no longer valid).
    if (error instanceof ApiError && error.status === 409) return unrunnableView(el, id, error.message);
    throw error;
  }
  showManifest(el, found.workflow, (found.warnings || []).map((text) => notice(text, "warning")));
}

// A disabled workflow still matches (runnable: false) and is listed, so its link shows its
// manifest, read-only, from the authoring copy (reading it needs no role). Any other
// workflow that cannot be run shows why, with the way to its authoring page.
async function unrunnableView(el, id, why) {
  const got = await invoke("agent_workflow_authoring", { operation: "get_workflow", workflowId: id }).catch((error) => {
    if (error instanceof Unauthorized) throw error;
    return null;
  });
  const w = got && got.ok ? got.workflow : null;
  const authoringLink = h("a", { href: `#/authoring/${encodeURIComponent(id)}` }, "Open it in Authoring");
  if (w && w.status === "disabled") {
    showManifest(el, w, [
      notice(
        "This workflow is disabled: it is shown read-only, matches with runnable: false and cannot be run. " +
          "An admin can change its status in Authoring.",
        "warning",
      ),
    ], "disabled");
    return;
  }
  replace(
    el,
    h("p", {}, h("a", { href: "#/workflows" }, "All workflows")),
    h("h1", {}, w ? w.title : id),
    notice(why, "warning"),
    h("p", {}, w ? `The authoring copy is a ${w.status} (version ${w.version}). ` : "", authoringLink, "."),
  );
}

function showManifest(el, w, notes, badge = null) {
  replace(
    el,
    h("p", {}, h("a", { href: "#/workflows" }, "All workflows")),
    h("h1", {}, w.title, badge ? [" ", h("span", { class: `badge status ${badge}` }, badge)] : null),
    notes,
    h("p", {}, w.description),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Id"), h("dd", {}, h("code", {}, w.workflowId)),
      h("dt", {}, "Version"), h("dd", {}, w.version),
      h("dt", {}, "Status"), h("dd", {}, w.status),
      h("dt", {}, "Visibility"), h("dd", {}, w.visibility),
      h("dt", {}, "Requires approval"), h("dd", {}, w.requiresApproval ? "yes" : "no"),
    ),
    h("h2", {}, "Instructions"),
    h("pre", { class: "mono wrap" }, w.instructionText),
    h("h2", {}, "Required inputs"),
    (w.requiredInputs || []).length
      ? h("ul", {}, w.requiredInputs.map((i) => h("li", {}, h("code", {}, i.name), i.required ? "" : " (optional)", i.description ? ` — ${i.description}` : "")))
      : h("p", {}, "None."),
    LIST_FIELDS.filter(([key]) => (w[key] || []).length).map(([key, label]) => [
      h("h2", {}, label),
      h("ul", {}, w[key].map((item) => h("li", {}, typeof item === "string" ? item : pretty(item)))),
    ]),
    h("details", {}, h("summary", {}, "The manifest as JSON"), h("pre", { class: "mono" }, pretty(w))),
  );
}
