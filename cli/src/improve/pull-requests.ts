/**
 * `improve --pr github --merge-when approved|now`: after the run, its pull requests (one per
 * accepted generation) are followed in generation order through the pull-request loop
 * (../github/review.ts) until each is merged or closed. improve makes no other attempt at a
 * generation, so a review requesting changes is a rejection. A later generation's branch holds
 * the earlier ones' commits: once one is not merged, those after it are closed too, with a
 * comment naming it. One review timeout covers them all, from the start of the following.
 */
import { jsonLine } from "../terminal.js";
import type { GithubClient, GithubRepo } from "../github/client.js";
import {
  REVIEW_TIMEOUT_MS,
  closePullRequest,
  followPullRequest,
  shortDuration,
  type MergeWhen,
  type PrLoopOptions,
  type PrLoopResult,
} from "../github/review.js";

/** A pull request `improve --pr github` opened for an accepted generation. */
export interface ImprovePull {
  generation: number;
  number: number;
  url: string;
}

/** What a run's pull requests ended as, in generation order. */
export interface ImproveMerges {
  results: Array<PrLoopResult & { generation: number }>;
  /** True when every one was merged. */
  merged: boolean;
}

/** Why improve does not turn a review into another attempt (the closing comment says it). */
export const IMPROVE_NO_ATTEMPT =
  "improve makes no other attempt at an accepted generation (run improve again, with a --goal from the review, for one)";

/**
 * Follows `pulls` in generation order (see the module's comment), printing progress and each
 * outcome through `print` (`--json`: `pull_request_progress` and `pull_request_outcome` lines).
 * @param loop - the poll interval, the clock and the sleep (tests)
 * @throws LoopsmithError from GitHub (as `githubError`), `cancelled` when `loop.signal` aborts
 */
export async function followImprovePulls(
  gh: { client: GithubClient; target: GithubRepo },
  pulls: readonly ImprovePull[],
  o: { mergeWhen: MergeWhen; reviewTimeout?: number; json?: boolean },
  print: (line: string) => void,
  loop: Omit<PrLoopOptions, "mergeWhen" | "timeoutMs" | "deadline" | "attempt" | "noAttempt" | "onProgress"> = {},
): Promise<ImproveMerges> {
  const now = loop.now ?? Date.now;
  const timeoutMs = o.reviewTimeout ?? REVIEW_TIMEOUT_MS;
  const deadline = now() + timeoutMs;
  const say = (number: number, message: string): void =>
    print(o.json ? jsonLine({ kind: "pull_request_progress", number, message }) : message);
  const results: ImproveMerges["results"] = [];
  let failed: (PrLoopResult & { generation: number }) | undefined;
  for (const pull of pulls) {
    let done: PrLoopResult;
    if (failed) {
      const message = `not merged: it holds the commits of generation ${failed.generation}, whose pull request #${failed.number} was not merged (${failed.outcome}); the pull request is closed.`;
      await closePullRequest(gh.client, gh.target, pull.number, `${message}\n\n_Closed by loopsmith._`);
      done = {
        outcome: failed.outcome,
        number: pull.number,
        url: pull.url,
        sha: "",
        attempts: 0,
        closedByLoopsmith: true,
        message,
      };
    } else {
      say(
        pull.number,
        `following pull request #${pull.number} (generation ${pull.generation}): ${o.mergeWhen === "now" ? "merging when its checks pass, without waiting for a review (--merge-when now)" : "merging once it is approved and its checks pass"}; closed ${shortDuration(timeoutMs)} after the following began without a merge`,
      );
      done = await followPullRequest(gh.client, gh.target, pull, {
        ...loop,
        mergeWhen: o.mergeWhen,
        // One timeout for the run's pull requests.
        timeoutMs,
        deadline,
        noAttempt: IMPROVE_NO_ATTEMPT,
        onProgress: (line) => say(pull.number, line),
      });
    }
    const result = { ...done, generation: pull.generation };
    results.push(result);
    if (done.outcome !== "merged") failed ??= result;
    print(o.json ? jsonLine({ kind: "pull_request_outcome", ...result }) : improvePullText(result));
  }
  return { results, merged: results.every((r) => r.outcome === "merged") };
}

/** One outcome's line for the terminal. Pure. */
export function improvePullText(r: PrLoopResult & { generation: number }): string {
  const head = `generation ${r.generation}, pull request #${r.number}: ${r.outcome === "merged" ? "merged" : `not merged (${r.outcome})`}`;
  return `${head}: ${r.message}${r.closedByLoopsmith ? ` (closed with that comment: ${r.url})` : ""}`;
}

/** `improve`'s `--merge-when` and `--review-timeout` (ms). */
export interface ImproveMergeFlags {
  mergeWhen?: MergeWhen;
  reviewTimeout?: number;
}

/**
 * `improve --merge-when` once the run ended (its stack stopped): {@link followImprovePulls} on
 * the pull requests it opened, printed on stdout. Nothing to follow (no generation accepted)
 * counts as done.
 * @returns true when every pull request was merged
 * @throws as {@link followImprovePulls}
 */
export async function mergeImprovePulls(
  outcome: { pulls?: ImprovePull[]; github?: { client: GithubClient; target: GithubRepo } },
  o: ImproveMergeFlags & { json?: boolean },
  print: (line: string) => void = (line) => void process.stdout.write(`${line}\n`),
): Promise<boolean> {
  if (!o.mergeWhen || !outcome.github || !outcome.pulls?.length) return true;
  const merges = await followImprovePulls(
    outcome.github,
    outcome.pulls,
    {
      mergeWhen: o.mergeWhen,
      ...(o.reviewTimeout !== undefined ? { reviewTimeout: o.reviewTimeout } : {}),
      ...(o.json ? { json: true } : {}),
    },
    print,
  );
  return merges.merged;
}
