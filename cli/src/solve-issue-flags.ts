/**
 * The flag checks of `solve --issue`, made before anything heavy is loaded (like
 * `checkSolveInput` in preflight.ts, which checks the rest of `solve`'s flags).
 */
import { usageError } from "./errors.js";
import type { MergeWhen } from "./github/review.js";

/** The flags these checks read. */
export interface IssueFlags {
  issue?: string;
  remote?: string;
  pr?: boolean;
  prAlways?: boolean;
  mergeWhen?: MergeWhen;
  /** `--review-timeout`, in ms. */
  reviewTimeout?: number;
  file?: string;
  humaneval?: string;
  language?: string;
}

/**
 * Refuses flag combinations `--issue` does not take: a goal, `--file` or `--humaneval` beside
 * it (the issue is the goal), `--language` (a repository's language is detected), `--pr-always`
 * or `--merge-when` without `--pr`, `--review-timeout` without `--merge-when`, `--merge-when now`
 * with `--pr-always` (a change whose tests failed is never merged unreviewed), and `--remote`,
 * `--pr`, `--pr-always`, `--merge-when`, `--review-timeout` without `--issue`.
 * @throws CliError `bad_request` (exit 2)
 */
export function checkIssueFlags(goal: string | undefined, o: IssueFlags): void {
  if (!o.issue) {
    const only = [
      o.remote !== undefined ? "--remote" : "",
      o.pr ? "--pr" : "",
      o.prAlways ? "--pr-always" : "",
      o.mergeWhen ? "--merge-when" : "",
      o.reviewTimeout !== undefined ? "--review-timeout" : "",
    ].filter(Boolean);
    if (only.length)
      throw usageError(`${only.join(", ")} appl${only.length === 1 ? "ies" : "y"} to --issue <owner/repo#N> only`);
    return;
  }
  const others = [goal?.trim() ? "a goal" : "", o.file ? "--file" : "", o.humaneval ? "--humaneval" : ""].filter(
    Boolean,
  );
  if (others.length) throw usageError(`--issue is the task's goal: give no ${others.join(" or ")} with it`);
  if (o.language)
    throw usageError("--language applies to a goal only; with --issue the repository's language is detected");
  if (o.prAlways && !o.pr) throw usageError("--pr-always applies with --pr only");
  checkMergeFlags(o, "--pr");
  if (o.mergeWhen === "now" && o.prAlways)
    throw usageError(
      "--merge-when now merges without a review: it does not take --pr-always (a change whose tests did not pass)",
    );
}

/**
 * Refuses `--merge-when` without `--pr` (`prFlag` names it: `--pr`, `--pr github`) and
 * `--review-timeout` without `--merge-when`; shared by `solve --issue` and `improve`.
 * @throws CliError `bad_request` (exit 2)
 */
export function checkMergeFlags(o: { pr?: unknown; mergeWhen?: string; reviewTimeout?: number }, prFlag: string): void {
  if (o.mergeWhen && !o.pr) throw usageError(`--merge-when applies with ${prFlag} only`);
  if (o.reviewTimeout !== undefined && !o.mergeWhen)
    throw usageError("--review-timeout applies with --merge-when only (it is how long to wait for the merge)");
}
