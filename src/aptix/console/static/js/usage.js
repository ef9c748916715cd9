// Usage: the model tokens the org spent today, per API key, with its limits (admins only).

import { api, ApiError } from "./api.js";
import { h, notice, replace, table } from "./dom.js";

const number = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en"));

export async function usageView(el) {
  let usage;
  try {
    usage = await api("/v1/usage");
  } catch (error) {
    // A key that is not an admin's is told so: trying again would change nothing. Any other
    // failure (the database down...) is the router's, which offers a Retry.
    if (!(error instanceof ApiError && error.status === 403)) throw error;
    replace(el, h("h1", {}, "Usage"), notice(error.message));
    return;
  }
  const limits = usage.limits;
  const budget = limits.tokenBudget;
  replace(
    el,
    h("h1", {}, "Usage"),
    h(
      "p",
      {},
      `Organization ${usage.org}, ${usage.day} (UTC): `,
      h("strong", {}, number(usage.totalTokens)),
      ` model tokens in ${number(usage.modelCalls)} model calls.`,
    ),
    h(
      "ul",
      { class: "limits" },
      h("li", {}, "Requests per key: ", limits.rateLimit || "no limit"),
      h("li", {}, "Turns at once per org: ", limits.maxConcurrentTurns === null ? "no limit" : String(limits.maxConcurrentTurns)),
      h("li", {}, "Token budget: ", budget ? `${budget.limit}, ${number(budget.remaining)} left` : "no budget"),
      h("li", {}, limits.shared ? "Counted across processes (Redis)." : "Counted by this process only."),
    ),
    table(
      "Model tokens per API key",
      [
        ["Key", (r) => h("code", {}, r.keyId)],
        ["User", (r) => r.user],
        ["Prompt", (r) => number(r.promptTokens)],
        ["Completion", (r) => number(r.completionTokens)],
        ["Total", (r) => number(r.totalTokens)],
        ["Model calls", (r) => number(r.modelCalls)],
      ],
      usage.keys,
    ),
  );
}
