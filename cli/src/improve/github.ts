/**
 * `--pr github`'s API side, through `@octokit/rest`: the target repository, a client with the
 * user's token, the access check made before any generation runs, the pull request of an
 * accepted generation (idempotent) and its Markdown body.
 */
import { Octokit } from "@octokit/rest";
import { LoopsmithError, type GenerationReport } from "@loopsmith/shared";
import { codeSpan } from "../run-view.js";
import { benchTotals, formatP } from "./reports.js";

/** A GitHub repository. */
export interface GithubRepo {
  owner: string;
  repo: string;
}

/** The client {@link githubClient} makes (an Octokit with the REST endpoint methods). */
export type GithubClient = Octokit;

const OWNER = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})";
const NAME = "[A-Za-z0-9._-]{1,100}?";
const FORMS = [
  new RegExp(`^(${OWNER})/(${NAME})(?:\\.git)?$`),
  new RegExp(`^https?://(?:[^@/]+@)?(?:www\\.)?github\\.com/(${OWNER})/(${NAME})(?:\\.git)?/?$`),
  new RegExp(`^(?:ssh://)?git@github\\.com[:/](${OWNER})/(${NAME})(?:\\.git)?/?$`),
];

/**
 * The owner and name in `spec`: `owner/name`, `https://github.com/owner/name(.git)` or
 * `git@github.com:owner/name.git` (also `ssh://git@github.com/owner/name.git`). Pure.
 * @throws LoopsmithError `bad_request` for anything else (another host, a path, a bad name)
 */
export function parseGithubRepo(spec: string): GithubRepo {
  const text = spec.trim();
  for (const form of FORMS) {
    const m = form.exec(text);
    if (m?.[1] && m[2] && m[2] !== "." && m[2] !== "..") return { owner: m[1], repo: m[2] };
  }
  throw new LoopsmithError(
    "bad_request",
    `"${spec}" is not a GitHub repository: give owner/name, https://github.com/owner/name or git@github.com:owner/name.git`,
  );
}

const REQUEST_TIMEOUT_MS = 30_000;

/**
 * An Octokit client. The token comes from `opts.token`, else `GITHUB_TOKEN`, else `GH_TOKEN`;
 * the API from `opts.baseUrl`, else `GITHUB_API_URL`, else https://api.github.com. Each
 * request times out after 30 s; Octokit's request log is silenced (failures become errors).
 * @throws LoopsmithError `config_invalid` when there is no token
 */
export function githubClient(opts: { token?: string; baseUrl?: string }): GithubClient {
  const token = opts.token || process.env.GITHUB_TOKEN || process.env.GH_TOKEN;
  if (!token)
    throw new LoopsmithError(
      "config_invalid",
      "--pr github needs a token: set GITHUB_TOKEN (or GH_TOKEN) to a token that can open pull requests on the repository",
    );
  const baseUrl = (opts.baseUrl || process.env.GITHUB_API_URL || "https://api.github.com").replace(/\/+$/, "");
  const noop = (): void => undefined;
  return new Octokit({
    auth: token,
    baseUrl,
    userAgent: "loopsmith",
    log: { debug: noop, info: noop, warn: console.warn, error: noop },
    request: {
      retries: 0,
      fetch: (url: string | URL, init?: RequestInit) =>
        fetch(url, { ...init, signal: init?.signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS) }),
    },
  });
}

/** The HTTP status of an Octokit error (0 when there was no response). */
function statusOf(err: unknown): number {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" ? status : 0;
}

/** GitHub's own words in an Octokit error, on one line. */
function detail(err: unknown): string {
  return (
    String((err as Error | undefined)?.message ?? err)
      .split("\n")[0]
      ?.slice(0, 300) ?? ""
  );
}

/** An Octokit error as a LoopsmithError with an actionable message. */
function githubError(err: unknown, target: GithubRepo, doing: string): LoopsmithError {
  const slug = `${target.owner}/${target.repo}`;
  const status = statusOf(err);
  if (status === 401)
    return new LoopsmithError(
      "config_invalid",
      `GitHub refused the token (401) while ${doing}: set GITHUB_TOKEN (or GH_TOKEN) to a valid token with access to ${slug}`,
      { cause: err },
    );
  if (status === 403)
    return new LoopsmithError(
      "config_invalid",
      `GitHub denied access (403) while ${doing} on ${slug}: ${detail(err)}`,
      { cause: err },
    );
  if (status === 404)
    return new LoopsmithError(
      "not_found",
      `GitHub has no repository ${slug}, or the token cannot see it (404 while ${doing})`,
      { cause: err },
    );
  if (status === 422)
    return new LoopsmithError("bad_request", `GitHub refused ${doing} on ${slug} (422): ${detail(err)}`, {
      cause: err,
    });
  return new LoopsmithError(
    "unavailable",
    `GitHub did not answer while ${doing} on ${slug} (${status || "no response"}): ${detail(err)}`,
    { cause: err },
  );
}

/**
 * Checks that the token can read `target` (`GET /repos/{owner}/{repo}`); run before any generation.
 * @returns the repository's default branch (the pull requests' base)
 * @throws LoopsmithError `config_invalid` on 401 or 403, `not_found` on 404, `unavailable` otherwise
 */
export async function checkGithubAccess(client: GithubClient, target: GithubRepo): Promise<{ defaultBranch: string }> {
  try {
    const { data } = await client.repos.get({ owner: target.owner, repo: target.repo });
    return { defaultBranch: data.default_branch };
  } catch (err) {
    throw githubError(err, target, "reading the repository");
  }
}

/**
 * Opens a pull request from branch `head` (in `target` itself) into `base`. Idempotent: when
 * GitHub answers 422 because one is already open for `head`, that one is returned.
 * @returns the pull request's number and web URL
 * @throws LoopsmithError `bad_request` on another 422 (no commits between the branches, …),
 *   `config_invalid` on 401/403, `not_found` on 404, `unavailable` otherwise
 */
export async function openPullRequest(
  client: GithubClient,
  target: GithubRepo,
  pr: { head: string; base: string; title: string; body: string },
): Promise<{ number: number; url: string }> {
  const { owner, repo } = target;
  try {
    const { data } = await client.pulls.create({
      owner,
      repo,
      head: pr.head,
      base: pr.base,
      title: pr.title,
      body: pr.body,
    });
    return { number: data.number, url: data.html_url };
  } catch (err) {
    if (statusOf(err) !== 422) throw githubError(err, target, "opening a pull request");
    let open: { number: number; html_url: string } | undefined;
    try {
      ({
        data: [open],
      } = await client.pulls.list({ owner, repo, head: `${owner}:${pr.head}`, state: "open" }));
    } catch (listErr) {
      throw githubError(listErr, target, "listing pull requests");
    }
    if (!open) throw githubError(err, target, "opening a pull request");
    return { number: open.number, url: open.html_url };
  }
}

/** GitHub refuses bodies over 65,536 characters; this leaves room. */
export const PR_BODY_MAX = 60_000;

/** `text` safe in a Markdown table cell or a one-line paragraph. */
function md(text: string): string {
  return text.replace(/\r?\n|\r/g, " ").replace(/[|\\`*_[\]<>]/g, (c) => `\\${c}`);
}

const num = (n: number): string => n.toLocaleString("en-US");

/** One generation's part of the body; `maxRows` caps its changed-case rows. */
function generationMarkdown(r: GenerationReport, maxRows: number): string {
  const out: string[] = [`### Generation ${r.generation}: ${r.decision.verdict}`, ""];
  if (r.hypothesis) {
    out.push(`**Hypothesis:** ${md(r.hypothesis.title)}`, "");
    if (r.hypothesis.rationale) out.push(md(r.hypothesis.rationale), "");
  }
  out.push(`**Decision:** ${r.decision.verdict} (${codeSpan(r.decision.reason)}): ${md(r.decision.message)}`, "");
  const s = r.statistic;
  if (s) {
    const test = s.test === "mcnemar_exact" ? "exact McNemar test" : "Wilcoxon signed-rank test";
    const effect =
      s.test === "mcnemar_exact"
        ? `${s.effect >= 0 ? "+" : ""}${(s.effect * 100).toFixed(1)} percentage points of pass rate`
        : `${s.effect >= 0 ? "+" : ""}${s.effect.toPrecision(3)} median score difference`;
    out.push(
      `**Statistic:** ${test} on ${num(s.cases)} paired cases: ${num(s.fixed)} fixed, ${num(s.broken)} broken, p = ${formatP(s.pValue)} (alpha ${s.alpha}), effect ${effect}.`,
      "",
    );
  }
  if (r.change) {
    const { stat } = r.change;
    out.push(
      `**Change:** ${md(r.change.summary)} (${stat.files} file${stat.files === 1 ? "" : "s"} changed, +${stat.insertions} −${stat.deletions})`,
      "",
    );
    const files = [...r.change.changed.map(codeSpan), ...r.change.deleted.map((f) => `${codeSpan(f)} (deleted)`)];
    if (files.length)
      out.push(
        `Files: ${files.slice(0, 50).join(", ")}${files.length > 50 ? `, and ${files.length - 50} more` : ""}`,
        "",
      );
  }
  const t = benchTotals(r);
  if (r.bench && t) {
    out.push(
      `**Benchmark:** ${codeSpan(r.bench.command)} (${r.bench.format}, ${r.bench.repeats} repeat${r.bench.repeats === 1 ? "" : "s"} per side): ${t.parent.passes}/${t.parent.runs} passes on the parent, ${t.candidate.passes}/${t.candidate.runs} on the candidate.`,
      "",
    );
    const changed = r.bench.cases.filter(
      (c) =>
        c.parent.passes !== c.candidate.passes ||
        c.parent.runs !== c.candidate.runs ||
        String(c.parent.scores) !== String(c.candidate.scores),
    );
    if (changed.length) {
      out.push("| case | parent passes/runs | candidate passes/runs |", "|---|---:|---:|");
      for (const c of changed.slice(0, maxRows))
        out.push(`| ${md(c.case)} | ${c.parent.passes}/${c.parent.runs} | ${c.candidate.passes}/${c.candidate.runs} |`);
      if (changed.length > maxRows)
        out.push(
          "",
          `_…and ${num(changed.length - maxRows)} more changed cases, left out: GitHub limits a pull request's body; see reports/gen-${r.generation}.json._`,
        );
      out.push("", `${num(t.cases - changed.length)} of ${num(t.cases)} cases unchanged.`, "");
    } else out.push("No case changed.", "");
  }
  const u = r.usage;
  out.push(
    `**Cost:** ${num(u.calls)} model calls, ${num(u.inputTokens + u.outputTokens)} tokens (${num(u.inputTokens)} in, ${num(u.outputTokens)} out), $${u.costUsd.toFixed(4)}`,
    "",
  );
  return out.join("\n");
}

/**
 * The Markdown body of the pull request for `report` (or for several generations) of run
 * `runId`: for each, the hypothesis, the decision with its reason code and message, the
 * statistic (fixed and broken counts, p-value, effect), the diff stat, the benchmark cases
 * that changed (parent and candidate passes/runs) and the cost (tokens, USD). With
 * `opts.scripted` it says first, in bold, that the replies were replayed and no model was
 * called. At most {@link PR_BODY_MAX} characters: the case lists are cut first (with a note),
 * then the text itself. Pure.
 */
export function prBody(
  report: GenerationReport | GenerationReport[],
  runId: string,
  opts: { scripted?: boolean } = {},
): string {
  const reports = Array.isArray(report) ? report : [report];
  const head = [`## loopsmith improvement run ${codeSpan(runId)}`, ""];
  if (opts.scripted)
    head.push(
      "> **Scripted run:** the model's replies were replayed from a script; no model was called. The evidence below is from a test fixture, not a real improvement.",
      "",
    );
  const render = (maxRows: number): string =>
    [
      ...head,
      ...reports.map((r) => generationMarkdown(r, maxRows)),
      "_Opened by loopsmith `improve --pr github`._",
      "",
    ].join("\n");
  let body = render(Number.MAX_SAFE_INTEGER);
  if (body.length > PR_BODY_MAX) {
    let lo = 0;
    let hi = Math.max(0, ...reports.map((r) => r.bench?.cases.length ?? 0));
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (render(mid).length <= PR_BODY_MAX) lo = mid;
      else hi = mid - 1;
    }
    body = render(lo);
  }
  if (body.length > PR_BODY_MAX) {
    const note = "\n\n_…cut: GitHub limits a pull request's body; see the run's reports._\n";
    body = body.slice(0, PR_BODY_MAX - note.length) + note;
  }
  return body;
}
