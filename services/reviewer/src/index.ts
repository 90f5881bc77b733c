/**
 * @loopsmith/reviewer: judges a candidate before it runs. `gate` is the deterministic
 * static safety gate; `createReviewer` is the LLM review; `createAuditor` the security audit's model; `reviewerService` serves both on
 * the bus.
 */
export { gate, MAX_FINDINGS } from "./gate/gate.js";
export { RULES, type RuleId } from "./gate/rules.js";
export { scanShell, type ShellHit } from "./gate/shell.js";
export {
  createReviewer,
  renderConcerns,
  renderPlan,
  renderReviewMessage,
  type Reviewer,
  type ReviewerDeps,
} from "./review.js";
export {
  AUDIT_PROMPT_VERSION,
  AUDIT_SYSTEM,
  createAuditor,
  renderAuditMessage,
  renderStaticFindings,
  type Auditor,
  type AuditorDeps,
} from "./audit.js";
export { reviewerService, type ReviewerServiceDeps } from "./service.js";
