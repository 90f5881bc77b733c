/**
 * The reviewer service: the gate and the review as `@nats-io/services` endpoints.
 */
import type { Logger } from "pino";
import { createProvider, type LlmProvider } from "@loopsmith/shared/llm";
import { Endpoints, handle } from "@loopsmith/shared/bus";
import { LoopsmithError, type Config, type ServiceModule } from "@loopsmith/shared/runtime";
import { gate } from "./gate/gate.js";
import { createAuditor, type Auditor } from "./audit.js";
import { createReviewer, type Reviewer } from "./review.js";

/** Dependencies of {@link reviewerService}. */
export interface ReviewerServiceDeps {
  config: Config;
  log: Logger;
  /** The LLM provider for reviews. @defaultValue `makeProvider({config, log})` */
  provider?: LlmProvider;
  /** Builds the provider when none is given. @defaultValue `createProvider` from `@loopsmith/shared/llm` */
  makeProvider?: (deps: { config: Config; log: Logger }) => LlmProvider;
}

/**
 * Builds the reviewer's endpoints: `Endpoints.reviewer.gate` (deterministic, no LLM),
 * `Endpoints.reviewer.review` and `Endpoints.reviewer.audit` (one LLM call each).
 *
 * When no provider is given and building one fails (no API key, a bad configuration),
 * the service still starts: the gate needs no model and keeps serving, the failure is
 * logged once, and every review and audit is answered with that error (its own code, or
 * `config_invalid` for anything that is not a `LoopsmithError`).
 * @throws LoopsmithError `internal` when the review prompt file is missing or malformed.
 */
export async function reviewerService(deps: ReviewerServiceDeps): Promise<ServiceModule> {
  const { config, log } = deps;
  let reviewer: Reviewer | undefined;
  let auditor: Auditor | undefined;
  let providerError: LoopsmithError | undefined;
  let provider = deps.provider;
  if (!provider) {
    try {
      provider = (deps.makeProvider ?? createProvider)({ config, log });
    } catch (err) {
      providerError =
        err instanceof LoopsmithError
          ? err
          : new LoopsmithError("config_invalid", `the LLM provider could not be created: ${String(err)}`, {
              cause: err,
            });
      log.error({ err }, "no LLM provider: reviews will fail until the configuration is fixed; the gate still serves");
    }
  }
  if (provider) {
    reviewer = createReviewer({ provider, log });
    auditor = createAuditor({ provider, log });
  }

  return {
    registrations: [
      handle(Endpoints.reviewer.gate, async (request, ctx) => {
        const result = gate(request);
        ctx.log.info(
          {
            iteration: request.iteration,
            phase: "gate",
            blocked: result.blocked,
            findings: result.findings.length,
            rules: [...new Set(result.findings.filter((f) => f.severity === "blocker").map((f) => f.rule))],
          },
          result.blocked ? "candidate blocked by the gate" : "candidate passed the gate",
        );
        return result;
      }),
      handle(Endpoints.reviewer.review, async (request) => {
        if (!reviewer) throw providerError ?? new LoopsmithError("config_invalid", "no LLM provider is configured");
        return reviewer.review(request);
      }),
      handle(Endpoints.reviewer.audit, async (request) => {
        if (!auditor) throw providerError ?? new LoopsmithError("config_invalid", "no LLM provider is configured");
        return auditor.audit(request);
      }),
    ],
    metadata: provider
      ? { provider: provider.info.name, model: provider.info.model, scripted: String(provider.info.scripted) }
      : { provider: "unavailable" },
  };
}
