/**
 * The flag checks of `solve --issue`, made before anything heavy is loaded (like
 * `checkSolveInput` in preflight.ts, which checks the rest of `solve`'s flags).
 */
import { usageError } from "./errors.js";

/** The flags these checks read. */
export interface IssueFlags {
  issue?: string;
  remote?: string;
  pr?: boolean;
  prAlways?: boolean;
  file?: string;
  humaneval?: string;
  language?: string;
}

/**
 * Refuses flag combinations `--issue` does not take: a goal, `--file` or `--humaneval` beside
 * it (the issue is the goal), `--language` (a repository's language is detected), `--pr-always`
 * without `--pr`, and `--remote`, `--pr`, `--pr-always` without `--issue`.
 * @throws CliError `bad_request` (exit 2)
 */
export function checkIssueFlags(goal: string | undefined, o: IssueFlags): void {
  if (!o.issue) {
    const only = [o.remote !== undefined ? "--remote" : "", o.pr ? "--pr" : "", o.prAlways ? "--pr-always" : ""].filter(
      Boolean,
    );
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
}
