/**
 * The pull-request loop of `--pr --merge-when`: after loopsmith opened a pull request it reads
 * the reviews, the review comments, the head commit and its checks (the combined status and
 * the check runs) at an interval, and ends in one of these outcomes:
 *
 * - `merged`: approved (or `--merge-when now`) on the current head, the checks passed, merged
 *   with the head's SHA so GitHub refuses it if the branch moved meanwhile;
 * - `changes_requested`: a reviewer requested changes and no other attempt was made or passed
 *   (each request first goes to the caller's `attempt`, when it has one and attempts are left);
 * - `checks_failed`: a check of the head failed;
 * - `merge_conflict`: GitHub refused the merge (405 not mergeable, 409 the head moved or conflicts);
 * - `timeout`: no merge within the review timeout;
 * - `closed`: someone else closed the pull request on GitHub.
 *
 * Every outcome but `merged` and `closed` closes the pull request with a comment saying why.
 * All requests go through the client of ./client.ts.
 */
import { setTimeout as delay } from "node:timers/promises";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { githubError, type GithubClient, type GithubRepo } from "./client.js";

/** When to merge: after an approving review (`approved`), or without waiting for a human (`now`). */
export type MergeWhen = "approved" | "now";

/** `--review-timeout`'s default: 24 hours, in ms. */
export const REVIEW_TIMEOUT_MS = 24 * 3_600_000;

/** How often GitHub is asked, in ms (one minute: a few requests a poll, well under the 5,000 an hour). */
export const REVIEW_POLL_MS = 60_000;

/** Another attempt at most this many times per pull request (`solve --issue`). */
export const REVIEW_ATTEMPTS = 2;

/** A pull request as the loop reads it. */
export interface PullRequestState {
  number: number;
  /** `open` or `closed`. */
  state: string;
  merged: boolean;
  draft: boolean;
  /** The head commit's SHA. */
  headSha: string;
  /** The head branch's name. */
  headRef: string;
}

/** A submitted review. */
export interface Review {
  id: number;
  /** The reviewer's login (`ghost` for a deleted account). */
  author: string;
  /** `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED` (`PENDING` ones are not listed to others). */
  state: string;
  body: string;
  /** The commit the review was made on. */
  commitId: string;
}

/** A comment on a line of the diff, part of a review. */
export interface ReviewComment {
  /** The review it belongs to. */
  reviewId: number;
  author: string;
  path: string;
  /** The line of the file it is on (undefined for a comment on a whole file or an outdated one). */
  line?: number;
  body: string;
}

/** The head's checks: the combined commit status and the check runs, together. */
export interface ChecksState {
  /** `success` (all passed, or none exists), `pending` (one has not finished) or `failure`. */
  state: "success" | "pending" | "failure";
  /** How many statuses and check runs there are. */
  total: number;
  /** The names of those that failed (a status's context, a check run's name, with the conclusion). */
  failed: string[];
  /** The names of those not finished. */
  pending: string[];
}

/** What the changes requested say, for another attempt. */
export interface ReviewFeedback {
  /** The reviewers who requested changes. */
  reviewers: string[];
  /** Their reviews' bodies and each of their line comments (`path:line`), as plain text. */
  text: string;
}

/** How the loop ended. */
export type PrLoopOutcome = "merged" | "changes_requested" | "checks_failed" | "merge_conflict" | "timeout" | "closed";

/** The loop's result, for the terminal and `--json`. */
export interface PrLoopResult {
  outcome: PrLoopOutcome;
  number: number;
  url: string;
  /** The head commit last seen (the one merged when `merged`). */
  sha: string;
  /** The merge commit's SHA, when merged by loopsmith. */
  mergeSha?: string;
  /** Attempts made from review feedback. */
  attempts: number;
  /** Whether loopsmith closed the pull request (with a comment). */
  closedByLoopsmith: boolean;
  /** One sentence: what happened and why. */
  message: string;
}

/** What another attempt did: pushed a new head to the pull request's branch, or not and why. */
export type AttemptResult = { pushed: true } | { pushed: false; reason: string };

/** The loop's settings. */
export interface PrLoopOptions {
  mergeWhen: MergeWhen;
  /** How long to wait for the merge, in ms, from the start of the loop (the comments name it). */
  timeoutMs: number;
  /** When to give up instead, in ms since the epoch (several pull requests sharing one timeout). */
  deadline?: number;
  /** Interval between polls, in ms (default {@link REVIEW_POLL_MS}). */
  pollMs?: number;
  /**
   * Another attempt from the changes requested (solve --issue): makes it and pushes it to the
   * pull request's branch. Without it, changes requested are a rejection.
   */
  attempt?: (feedback: ReviewFeedback, n: number) => Promise<AttemptResult>;
  /** Attempts at most (default {@link REVIEW_ATTEMPTS}). */
  maxAttempts?: number;
  /** What to say when changes are requested and there is no `attempt` (why none is made). */
  noAttempt?: string;
  /** Progress lines for the user. */
  onProgress?: (line: string) => void;
  /** Stops waiting (the loop then throws CliError-like `cancelled`). */
  signal?: AbortSignal;
  /** The clock, in ms since the epoch (tests). */
  now?: () => number;
  /** Waits `ms` (tests). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** The HTTP status of an Octokit error (0 when there was no response). */
function statusOf(err: unknown): number {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" ? status : 0;
}

const login = (user: { login?: string } | null | undefined): string => user?.login ?? "ghost";

/**
 * Reads pull request `number` (`GET /repos/{owner}/{repo}/pulls/{n}`).
 * @throws LoopsmithError as {@link githubError}
 */
export async function getPullRequest(
  client: GithubClient,
  target: GithubRepo,
  number: number,
): Promise<PullRequestState> {
  try {
    const { data } = await client.pulls.get({ owner: target.owner, repo: target.repo, pull_number: number });
    return {
      number: data.number,
      state: data.state,
      merged: Boolean(data.merged),
      draft: Boolean(data.draft),
      headSha: data.head.sha,
      headRef: data.head.ref,
    };
  } catch (err) {
    throw githubError(err, target, `reading pull request #${number}`, `pull request #${number}`);
  }
}

/**
 * Every submitted review of pull request `number`, oldest first (all pages).
 * @throws LoopsmithError as {@link githubError}
 */
export async function listReviews(client: GithubClient, target: GithubRepo, number: number): Promise<Review[]> {
  try {
    const data = await client.paginate(client.pulls.listReviews, {
      owner: target.owner,
      repo: target.repo,
      pull_number: number,
      per_page: 100,
    });
    return data.map((r) => ({
      id: r.id,
      author: login(r.user),
      state: r.state,
      body: r.body ?? "",
      commitId: r.commit_id ?? "",
    }));
  } catch (err) {
    throw githubError(err, target, `reading the reviews of pull request #${number}`, `pull request #${number}`);
  }
}

/**
 * Every line comment of pull request `number`'s reviews, oldest first (all pages).
 * @throws LoopsmithError as {@link githubError}
 */
export async function listReviewComments(
  client: GithubClient,
  target: GithubRepo,
  number: number,
): Promise<ReviewComment[]> {
  try {
    const data = await client.paginate(client.pulls.listReviewComments, {
      owner: target.owner,
      repo: target.repo,
      pull_number: number,
      per_page: 100,
    });
    return data.map((c) => ({
      reviewId: c.pull_request_review_id ?? 0,
      author: login(c.user),
      path: c.path,
      ...(typeof c.line === "number" ? { line: c.line } : {}),
      body: c.body,
    }));
  } catch (err) {
    throw githubError(err, target, `reading the review comments of pull request #${number}`, `pull request #${number}`);
  }
}

const PASSING = new Set(["success", "neutral", "skipped"]);

/**
 * The checks of commit `sha`: its combined status (`GET …/commits/{sha}/status`; with no status
 * at all GitHub says `pending`, which counts as none here) and its check runs
 * (`GET …/commits/{sha}/check-runs`, all pages). A check run passes when it completed with
 * `success`, `neutral` or `skipped`; any other conclusion fails it.
 * @throws LoopsmithError as {@link githubError}
 */
export async function readChecks(client: GithubClient, target: GithubRepo, sha: string): Promise<ChecksState> {
  const { owner, repo } = target;
  const failed: string[] = [];
  const pending: string[] = [];
  let total = 0;
  try {
    const { data: combined } = await client.repos.getCombinedStatusForRef({ owner, repo, ref: sha, per_page: 100 });
    for (const s of combined.statuses) {
      total += 1;
      if (s.state === "pending") pending.push(s.context);
      else if (s.state !== "success") failed.push(`${s.context} (${s.state})`);
    }
    const runs = await client.paginate(client.checks.listForRef, { owner, repo, ref: sha, per_page: 100 });
    for (const r of runs) {
      total += 1;
      if (r.status !== "completed") pending.push(r.name);
      else if (!PASSING.has(r.conclusion ?? "")) failed.push(`${r.name} (${r.conclusion ?? "no conclusion"})`);
    }
  } catch (err) {
    throw githubError(err, target, `reading the checks of ${sha.slice(0, 12)}`, `commit ${sha.slice(0, 12)}`);
  }
  return { state: failed.length ? "failure" : pending.length ? "pending" : "success", total, failed, pending };
}

/** A merge GitHub refused: 405 (not mergeable: a conflict, a draft, a rule) or 409 (the head moved). */
export interface MergeRefused {
  merged: false;
  status: number;
  /** GitHub's own words. */
  message: string;
}

/**
 * Merges pull request `number` (`PUT …/pulls/{n}/merge`) only if its head is still `sha`.
 * @returns the merge commit's SHA, or the refusal (405, 409) as a value
 * @throws LoopsmithError as {@link githubError} for anything else
 */
export async function mergePullRequest(
  client: GithubClient,
  target: GithubRepo,
  number: number,
  sha: string,
): Promise<{ merged: true; sha: string } | MergeRefused> {
  try {
    const { data } = await client.pulls.merge({ owner: target.owner, repo: target.repo, pull_number: number, sha });
    return { merged: true, sha: data.sha };
  } catch (err) {
    const status = statusOf(err);
    if (status === 405 || status === 409) {
      const message = String((err as Error).message ?? err).split("\n")[0] ?? "";
      return { merged: false, status, message: message.replace(/ - https:\/\/docs\.github\.com\S*$/, "") };
    }
    throw githubError(err, target, `merging pull request #${number}`, `pull request #${number}`);
  }
}

/**
 * Comments on pull request `number` (`POST …/issues/{n}/comments`) and closes it
 * (`PATCH …/pulls/{n}` with `state: closed`), in that order.
 * @throws LoopsmithError as {@link githubError}
 */
export async function closePullRequest(
  client: GithubClient,
  target: GithubRepo,
  number: number,
  comment: string,
): Promise<void> {
  const { owner, repo } = target;
  await commentOnPullRequest(client, target, number, comment);
  try {
    await client.pulls.update({ owner, repo, pull_number: number, state: "closed" });
  } catch (err) {
    throw githubError(err, target, `closing pull request #${number}`, `pull request #${number}`);
  }
}

/**
 * Comments on pull request `number` (`POST …/issues/{n}/comments`).
 * @throws LoopsmithError as {@link githubError}
 */
export async function commentOnPullRequest(
  client: GithubClient,
  target: GithubRepo,
  number: number,
  body: string,
): Promise<void> {
  try {
    await client.issues.createComment({ owner: target.owner, repo: target.repo, issue_number: number, body });
  } catch (err) {
    throw githubError(err, target, `commenting on pull request #${number}`, `pull request #${number}`);
  }
}

/**
 * Each reviewer's standing review: their last one that approved, requested changes or was
 * dismissed (a comment-only review leaves the standing one as it was). Pure.
 */
export function standingReviews(reviews: readonly Review[]): Review[] {
  const by = new Map<string, Review>();
  for (const r of reviews)
    if (r.state === "APPROVED" || r.state === "CHANGES_REQUESTED" || r.state === "DISMISSED") by.set(r.author, r);
  return [...by.values()].filter((r) => r.state !== "DISMISSED");
}

/** The feedback of `requests` (reviews requesting changes) and their line comments, as plain text. Pure. */
export function reviewFeedback(requests: readonly Review[], comments: readonly ReviewComment[]): ReviewFeedback {
  const parts: string[] = [];
  for (const r of requests) {
    parts.push(`Review by @${r.author} (changes requested):`, "", r.body.trim() || "(no summary)", "");
    for (const c of comments.filter((x) => x.reviewId === r.id))
      parts.push(
        `Comment by @${c.author} on ${c.path}${c.line !== undefined ? `:${c.line}` : ""}:`,
        "",
        c.body.trim(),
        "",
      );
  }
  return { reviewers: [...new Set(requests.map((r) => r.author))], text: parts.join("\n").trim() };
}

/** `ms` as the largest whole unit that fits, days from 2 on (`24h`, `3d`, `90m`, `45s`). Pure. */
export function shortDuration(ms: number): string {
  for (const [unit, size] of [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
  ] as const)
    if (ms >= size && ms % size === 0 && (unit !== "d" || ms >= 2 * size)) return `${ms / size}${unit}`;
  return `${Math.round(ms / 1000)}s`;
}

const defaultSleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  delay(ms, undefined, signal ? { signal } : {}).then(() => undefined);

/** The loop's state between polls. */
interface Loop {
  client: GithubClient;
  target: GithubRepo;
  pr: { number: number; url: string };
  o: PrLoopOptions;
  /** Review ids already answered (by an attempt or a rejection). */
  handled: Set<number>;
  attempts: number;
  /** The head last seen. */
  sha: string;
  /** The head whose empty checks one poll has seen. */
  noChecksSeen: string;
  /** True while `attempt` runs: its errors are its own, never GitHub's to ride out. */
  inAttempt: boolean;
}

/** Ends the loop with `outcome`; with `close`, comments `message` on the pull request and closes it. */
async function end(l: Loop, outcome: PrLoopOutcome, message: string, close: boolean): Promise<PrLoopResult> {
  if (close)
    await closePullRequest(
      l.client,
      l.target,
      l.pr.number,
      `${message}\n\n_Closed by loopsmith (\`--merge-when ${l.o.mergeWhen}\`)._`,
    );
  return {
    outcome,
    number: l.pr.number,
    url: l.pr.url,
    sha: l.sha,
    attempts: l.attempts,
    closedByLoopsmith: close,
    message,
  };
}

/**
 * One poll's reviews: a result when changes requested end the loop, `"again"` after an attempt
 * pushed a new head, else whether the current head is approved.
 */
async function reviewStep(l: Loop, pull: PullRequestState): Promise<PrLoopResult | "again" | boolean> {
  const { client, target, pr, o } = l;
  const maxAttempts = o.maxAttempts ?? REVIEW_ATTEMPTS;
  const onHead = standingReviews(await listReviews(client, target, pr.number)).filter(
    (r) => r.commitId === pull.headSha,
  );
  const requests = onHead.filter((r) => r.state === "CHANGES_REQUESTED" && !l.handled.has(r.id));
  if (!requests.length)
    return onHead.some((r) => r.state === "APPROVED") && !onHead.some((r) => r.state === "CHANGES_REQUESTED");
  for (const r of requests) l.handled.add(r.id);
  const feedback = reviewFeedback(requests, await listReviewComments(client, target, pr.number));
  const who = `${feedback.reviewers.map((u) => `@${u}`).join(", ")} requested changes on ${pull.headSha.slice(0, 12)}`;
  if (!o.attempt)
    return end(
      l,
      "changes_requested",
      `${who}; ${o.noAttempt ?? "no other attempt can be made"}, so the pull request is closed.`,
      true,
    );
  if (l.attempts >= maxAttempts)
    return end(
      l,
      "changes_requested",
      `${who} after ${l.attempts} attempt${l.attempts === 1 ? "" : "s"} from review feedback, the most allowed, so the pull request is closed.`,
      true,
    );
  l.attempts += 1;
  o.onProgress?.(
    `pull request #${pr.number}: ${feedback.reviewers.map((u) => `@${u}`).join(", ")} requested changes; attempt ${l.attempts} of ${maxAttempts} from the review`,
  );
  l.inAttempt = true;
  const made = await o.attempt(feedback, l.attempts);
  l.inAttempt = false;
  if (!made.pushed)
    return end(
      l,
      "changes_requested",
      `${who}; another attempt from the review did not make a change to push (${made.reason}), so the pull request is closed.`,
      true,
    );
  o.onProgress?.(`pull request #${pr.number}: attempt ${l.attempts} pushed; waiting for a review of the new head`);
  l.noChecksSeen = "";
  return "again";
}

/** One poll's checks and, when they passed, the merge: a result when the loop ends, else undefined (wait). */
async function mergeStep(l: Loop, pull: PullRequestState): Promise<PrLoopResult | undefined> {
  const { client, target, pr, o } = l;
  const head = pull.headSha.slice(0, 12);
  const checks = await readChecks(client, target, pull.headSha);
  if (checks.state === "failure")
    return end(
      l,
      "checks_failed",
      `the checks of ${head} failed: ${checks.failed.join(", ")}; it is not merged, so the pull request is closed.`,
      true,
    );
  const settled = checks.state === "success" && (checks.total > 0 || l.noChecksSeen === pull.headSha);
  if (checks.state === "success" && checks.total === 0) l.noChecksSeen = pull.headSha;
  if (!settled) {
    if (checks.pending.length) o.onProgress?.(`pull request #${pr.number}: waiting for ${checks.pending.join(", ")}`);
    return undefined;
  }
  const merged = await mergePullRequest(client, target, pr.number, pull.headSha);
  if (!merged.merged)
    return end(
      l,
      "merge_conflict",
      `GitHub refused to merge ${head} (${merged.status}${merged.status === 409 ? ": the head moved or conflicts with the base" : ": not mergeable"}): ${merged.message}; the pull request is closed.`,
      true,
    );
  const why = o.mergeWhen === "now" ? "--merge-when now: no review waited for" : "approved";
  const passed = checks.total ? `${checks.total} check${checks.total === 1 ? "" : "s"} passed` : "no checks";
  return {
    ...(await end(l, "merged", `merged pull request #${pr.number} at ${head} (${why}; ${passed})`, false)),
    mergeSha: merged.sha,
  };
}

/** One poll: a result when the loop ends, `"again"` to poll at once, else whether the head may merge. */
async function poll(l: Loop): Promise<PrLoopResult | "again" | { mayMerge: boolean }> {
  const { pr, o } = l;
  const pull = await getPullRequest(l.client, l.target, pr.number);
  l.sha = pull.headSha;
  if (pull.merged) return end(l, "merged", `pull request #${pr.number} was merged on GitHub`, false);
  if (pull.state === "closed") return end(l, "closed", `pull request #${pr.number} was closed on GitHub`, false);
  const reviewed = o.mergeWhen === "now" ? true : await reviewStep(l, pull);
  if (reviewed === "again" || typeof reviewed === "object") return reviewed;
  const merged = reviewed ? await mergeStep(l, pull) : undefined;
  return merged ?? { mayMerge: reviewed };
}

/**
 * Follows pull request `pr` until one outcome (see the module's comment). Each poll reads the
 * pull request; unless `mergeWhen` is `now`, its reviews (and, on a request for changes, the
 * line comments); when it may merge, the head's checks. Changes requested on the current head
 * go to `attempt` while attempts are left; a new head must then be approved (or merged, with
 * `now`) again. An approval counts only on the current head, and only while no reviewer's
 * standing review requests changes on it. A head with no check at all merges only after a
 * second poll sees none either, so checks that register late are waited for. GitHub not
 * answering (or its rate limit: `unavailable`) is asked again at the next poll, until the deadline.
 * @throws LoopsmithError from GitHub (as {@link githubError}; `unavailable` only past the
 *   deadline), from `attempt`, `cancelled` when `signal` aborts
 */
export async function followPullRequest(
  client: GithubClient,
  target: GithubRepo,
  pr: { number: number; url: string },
  o: PrLoopOptions,
): Promise<PrLoopResult> {
  const now = o.now ?? Date.now;
  const sleep = o.sleep ?? defaultSleep;
  const deadline = o.deadline ?? now() + o.timeoutMs;
  const l: Loop = {
    client,
    target,
    pr,
    o,
    handled: new Set(),
    attempts: 0,
    sha: "",
    noChecksSeen: "",
    inAttempt: false,
  };
  const cancelled = (): LoopsmithError =>
    new LoopsmithError("cancelled", `stopped following pull request #${pr.number}`);
  for (;;) {
    if (o.signal?.aborted) throw cancelled();
    let state: Awaited<ReturnType<typeof poll>>;
    try {
      state = await poll(l);
    } catch (err) {
      // GitHub not answering, or its rate limit, is ridden out until the deadline: the loop may run for a day.
      if (l.inAttempt || !(err instanceof LoopsmithError) || err.code !== "unavailable" || now() >= deadline) throw err;
      o.onProgress?.(`pull request #${pr.number}: ${err.message}; asking again at the next poll`);
      state = { mayMerge: false };
    }
    if (state === "again") continue;
    if ("outcome" in state) return state;
    const reviewed = state.mayMerge;
    const left = deadline - now();
    if (left <= 0)
      return end(
        l,
        "timeout",
        `no merge within the review timeout (${shortDuration(o.timeoutMs)}): ${reviewed ? "the checks did not finish" : "no approving review of the current head"}; the pull request is closed.`,
        true,
      );
    await sleep(Math.min(o.pollMs ?? REVIEW_POLL_MS, left), o.signal).catch(() => {
      throw cancelled();
    });
  }
}
