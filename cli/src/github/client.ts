/**
 * loopsmith's one GitHub client, through `@octokit/rest`, used by `improve --pr github` and
 * `solve --issue`: the repository named by a spec or a remote URL, the token (from the
 * environment or the `gh` CLI's configuration), GitHub's failures as loopsmith errors with an
 * actionable sentence, the access check and the pull request (idempotent, optionally a draft).
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { Octokit } from "@octokit/rest";
import { parse as parseYaml } from "yaml";
import { LoopsmithError } from "@loopsmith/shared/runtime";

/** A GitHub repository. */
export interface GithubRepo {
  owner: string;
  repo: string;
}

/** The client {@link githubClient} makes (an Octokit with the REST endpoint methods and `paginate`). */
export type GithubClient = Octokit;

/** GitHub's rules for an account name (1 to 39 characters, letters, digits, inner hyphens). */
export const GITHUB_OWNER = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})";
/** GitHub's rule for a repository name (letters, digits, `.`, `_`, `-`; at most 100). */
export const GITHUB_NAME = "[A-Za-z0-9._-]{1,100}?";
const FORMS = [
  new RegExp(`^(${GITHUB_OWNER})/(${GITHUB_NAME})(?:\\.git)?$`),
  new RegExp(`^https?://(?:[^@/]+@)?(?:www\\.)?github\\.com/(${GITHUB_OWNER})/(${GITHUB_NAME})(?:\\.git)?/?$`),
  new RegExp(`^(?:ssh://)?git@github\\.com[:/](${GITHUB_OWNER})/(${GITHUB_NAME})(?:\\.git)?/?$`),
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

/** True when `a` and `b` name the same repository (GitHub compares names without case). */
export function sameRepo(a: GithubRepo, b: GithubRepo): boolean {
  return a.owner.toLowerCase() === b.owner.toLowerCase() && a.repo.toLowerCase() === b.repo.toLowerCase();
}

/** A token and where it came from (an environment variable's name, or the file's path). */
export interface GithubToken {
  token: string;
  source: string;
}

/**
 * The `gh` CLI's `hosts.yml`: in `$GH_CONFIG_DIR`, else `$XDG_CONFIG_HOME/gh`, else
 * `~/.config/gh` (gh's own order; on Windows `%AppData%\GitHub CLI`, not looked at here).
 */
export function ghHostsFile(env: NodeJS.ProcessEnv = process.env): string {
  if (env.GH_CONFIG_DIR) return join(env.GH_CONFIG_DIR, "hosts.yml");
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, "gh", "hosts.yml");
  return join(env.HOME || homedir(), ".config", "gh", "hosts.yml");
}

/**
 * The token for github.com in the `gh` CLI's `hosts.yml` text: `github.com.oauth_token`, else
 * that of the active `user` under `github.com.users` (gh ≥ 2.40 with several accounts). gh
 * keeps the token there only when it was logged in with `--insecure-storage` or before 2.24;
 * otherwise it is in the system keyring and this returns undefined. Pure.
 * @throws Error from the YAML parser when the text is not YAML
 */
export function ghHostsToken(text: string): string | undefined {
  const doc = parseYaml(text) as unknown;
  const host = (doc as Record<string, unknown> | null)?.["github.com"] as Record<string, unknown> | undefined;
  if (!host || typeof host !== "object") return undefined;
  if (typeof host.oauth_token === "string" && host.oauth_token) return host.oauth_token;
  const users = host.users as Record<string, { oauth_token?: unknown } | null> | undefined;
  const user = typeof host.user === "string" ? host.user : undefined;
  const token = user ? users?.[user]?.oauth_token : undefined;
  return typeof token === "string" && token ? token : undefined;
}

/** How long `gh auth token` may take, in ms (it reads the system keyring). */
const GH_AUTH_TOKEN_TIMEOUT_MS = 5_000;

/**
 * The token `gh auth token --hostname github.com` prints: where gh ≥ 2.24 keeps it by
 * default (the system keyring), which `hosts.yml` does not hold. Undefined when gh is not on
 * `PATH`, is logged out (exit 1), or takes over 5 s.
 */
export function ghAuthToken(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const run = spawnSync("gh", ["auth", "token", "--hostname", "github.com"], {
    env,
    encoding: "utf8",
    timeout: GH_AUTH_TOKEN_TIMEOUT_MS,
    stdio: ["ignore", "pipe", "ignore"],
  });
  const token = run.status === 0 ? run.stdout.trim() : "";
  return token && !/\s/.test(token) ? token : undefined;
}

/**
 * The user's GitHub token: `GITHUB_TOKEN`, else `GH_TOKEN`, else the `gh` CLI's `hosts.yml`
 * ({@link ghHostsFile}, {@link ghHostsToken}) when it holds one, else what `gh auth token`
 * prints ({@link ghAuthToken}: the keyring). An unreadable or malformed file counts as none.
 * @returns the token and its source, or undefined when there is none
 */
export function discoverGithubToken(env: NodeJS.ProcessEnv = process.env): GithubToken | undefined {
  for (const name of ["GITHUB_TOKEN", "GH_TOKEN"]) {
    const value = env[name];
    if (value) return { token: value, source: name };
  }
  const file = ghHostsFile(env);
  let fromFile: string | undefined;
  try {
    fromFile = ghHostsToken(readFileSync(file, "utf8"));
  } catch {
    fromFile = undefined;
  }
  if (fromFile) return { token: fromFile, source: file };
  const fromGh = ghAuthToken(env);
  return fromGh ? { token: fromGh, source: "gh auth token" } : undefined;
}

const REQUEST_TIMEOUT_MS = 30_000;

/**
 * An Octokit client. The token comes from `opts.token`, else {@link discoverGithubToken}; the
 * API from `opts.baseUrl`, else `GITHUB_API_URL`, else https://api.github.com. Each request
 * times out after 30 s and is not retried; Octokit's request log is silenced (failures become
 * errors).
 * @param opts.anonymous - without a token, make an unauthenticated client instead of throwing
 *   (public data only, 60 requests an hour)
 * @param opts.purpose - what needs the token, for the error (default "--pr github")
 * @throws LoopsmithError `config_invalid` when there is no token and `anonymous` is not set
 */
export function githubClient(opts: {
  token?: string;
  baseUrl?: string;
  anonymous?: boolean;
  purpose?: string;
}): GithubClient {
  const token = opts.token || discoverGithubToken()?.token;
  if (!token && !opts.anonymous)
    throw new LoopsmithError(
      "config_invalid",
      `${opts.purpose ?? "--pr github"} needs a token: set GITHUB_TOKEN (or GH_TOKEN) to a token that can open pull requests on the repository, or log in with gh auth login`,
    );
  const baseUrl = (opts.baseUrl || process.env.GITHUB_API_URL || "https://api.github.com").replace(/\/+$/, "");
  const noop = (): void => undefined;
  return new Octokit({
    ...(token ? { auth: token } : {}),
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

/** A response header of an Octokit error (lower-case name), when there was a response. */
function headerOf(err: unknown, name: string): string | undefined {
  const headers = (err as { response?: { headers?: Record<string, unknown> } } | null)?.response?.headers;
  const value = headers?.[name];
  return value === undefined || value === null ? undefined : String(value);
}

/** GitHub's own words in an Octokit error, on one line. */
function detail(err: unknown): string {
  return (
    String((err as Error | undefined)?.message ?? err)
      .split("\n")[0]
      ?.slice(0, 300) ?? ""
  );
}

/**
 * When a 403 or 429 is GitHub's rate limit, the time it ends: `x-ratelimit-reset` (Unix
 * seconds, primary limit, with `x-ratelimit-remaining: 0`), else `retry-after` (seconds from
 * `now`, secondary limit); `null` for a rate limit that names no time; undefined when the
 * error is not a rate limit. Source: GitHub's REST docs, "Rate limits for the REST API".
 */
export function rateLimitReset(err: unknown, now: Date = new Date()): Date | null | undefined {
  const status = statusOf(err);
  if (status !== 403 && status !== 429) return undefined;
  const remaining = headerOf(err, "x-ratelimit-remaining");
  const retryAfter = Number(headerOf(err, "retry-after"));
  const limited = status === 429 || remaining === "0" || /rate limit/i.test(detail(err));
  if (!limited) return undefined;
  const reset = Number(headerOf(err, "x-ratelimit-reset"));
  if (remaining === "0" && Number.isFinite(reset) && reset > 0) return new Date(reset * 1000);
  if (Number.isFinite(retryAfter) && retryAfter >= 0) return new Date(now.getTime() + retryAfter * 1000);
  if (Number.isFinite(reset) && reset > 0) return new Date(reset * 1000);
  return null;
}

/**
 * An Octokit error as a LoopsmithError with one actionable sentence:
 * 401 → `config_invalid` (the token was refused); 403 or 429 from the rate limit →
 * `unavailable` (retryable), naming the reset time in UTC; another 403 → `config_invalid`;
 * 404 → `not_found` (`missing` names what, default "repository"); 422 → `bad_request`;
 * anything else, or no response → `unavailable`.
 * @param target - the repository the request was about
 * @param doing - what was being done, for the sentence ("reading the repository")
 */
export function githubError(
  err: unknown,
  target: GithubRepo,
  doing: string,
  missing = `repository ${target.owner}/${target.repo}`,
): LoopsmithError {
  const slug = `${target.owner}/${target.repo}`;
  const status = statusOf(err);
  if (status === 401)
    return new LoopsmithError(
      "config_invalid",
      `GitHub refused the token (401) while ${doing}: set GITHUB_TOKEN (or GH_TOKEN) to a valid token with access to ${slug}`,
      { cause: err },
    );
  const reset = rateLimitReset(err);
  if (reset !== undefined) {
    const when = reset
      ? `it resets at ${reset.toISOString().replace(/\.\d{3}Z$/, "Z")} (in ${Math.max(0, Math.ceil((reset.getTime() - Date.now()) / 60_000))} min)`
      : "GitHub names no reset time";
    return new LoopsmithError(
      "unavailable",
      `GitHub's API rate limit is exhausted (${status}) while ${doing} on ${slug}: ${when}; try again then, or use a token (GITHUB_TOKEN) for a higher limit`,
      { cause: err, retryable: true, details: { resetAt: reset?.toISOString() ?? null } },
    );
  }
  if (status === 403)
    return new LoopsmithError(
      "config_invalid",
      `GitHub denied access (403) while ${doing} on ${slug}: ${detail(err)}`,
      { cause: err },
    );
  if (status === 404)
    return new LoopsmithError(
      "not_found",
      `GitHub has no ${missing}, or the token cannot see it (404 while ${doing})`,
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
 * Checks that the token can read `target` (`GET /repos/{owner}/{repo}`); run before any work.
 * @returns the repository's default branch (the pull requests' base)
 * @throws LoopsmithError as {@link githubError}
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
 * Opens a pull request from branch `head` (in `target` itself) into `base`; a draft when
 * `pr.draft`. Idempotent: when GitHub answers 422 because one is already open for `head`,
 * that one is returned.
 * @returns the pull request's number and web URL
 * @throws LoopsmithError `bad_request` on another 422 (no commits between the branches, …),
 *   else as {@link githubError}
 */
export async function openPullRequest(
  client: GithubClient,
  target: GithubRepo,
  pr: { head: string; base: string; title: string; body: string; draft?: boolean },
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
      ...(pr.draft ? { draft: true } : {}),
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
