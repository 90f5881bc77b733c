/**
 * Checks made before anything heavy is loaded or started (no NATS, Docker, service or LLM
 * SDK): flag values, the files a command names, the HumanEval id, and whether anything
 * listens at a configured NATS URL. A usage error is reported in well under a second and a
 * closed NATS port in about one. Loads only `node:` modules and `commander`.
 *
 * The ranges and names of the contracts come from `@loopsmith/shared/contracts/values`, which
 * imports nothing (no zod): the same values the schemas are built from.
 */
import { readFileSync } from "node:fs";
import { createConnection } from "node:net";
import { resolve } from "node:path";
import { InvalidArgumentError } from "commander";
import type { Config } from "@loopsmith/shared/runtime";
import { ROLES, TIME_LIMIT_MS } from "@loopsmith/shared/contracts/values";
import { humanevalId } from "@loopsmith/evals";
import { CliError, usageError } from "./errors.js";

/** Units of a duration, in ms. */
const DURATION_UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses a wall-clock duration such as `90s`, `30m`, `2h`, `1d`, or several parts in
 * decreasing order without spaces (`1h30m`); the number of a part may have a fraction
 * (`1.5h`). A bare number has no unit and is refused, so `30` is never read as 30 ms or 30 min.
 * @returns the duration in whole ms, within {@link TIME_LIMIT_MS}
 * @throws InvalidArgumentError naming the forms it accepts and the range (commander adds the flag)
 */
export function parseDuration(value: string): number {
  const text = value.trim().toLowerCase();
  const forms = "expected a duration such as 90s, 30m, 2h or 1h30m (units s, m, h, d)";
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)([smhd])/g)];
  if (!text || parts.map((p) => p[0]).join("") !== text) throw new InvalidArgumentError(forms);
  let ms = 0;
  let last = Number.POSITIVE_INFINITY;
  for (const [, n, unit] of parts) {
    const size = DURATION_UNITS[unit ?? ""] ?? 0;
    if (size >= last) throw new InvalidArgumentError(`${forms}; give each unit once, largest first`);
    last = size;
    ms += Number(n) * size;
  }
  ms = Math.round(ms);
  if (ms < TIME_LIMIT_MS.min || ms > TIME_LIMIT_MS.max)
    throw new InvalidArgumentError("expected a duration from 1s to 7d");
  return ms;
}

/**
 * A commander parser for a whole number in `[min, max]`.
 * @throws InvalidArgumentError naming the allowed range (commander adds the flag)
 */
export function wholeNumber(min: number, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(
        max === Number.MAX_SAFE_INTEGER
          ? `expected a whole number of at least ${min}`
          : `expected a whole number from ${min} to ${max}`,
      );
    }
    return n;
  };
}

/** Units of a relative `--since`, in ms. */
const SINCE_UNITS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * Parses `stats --since`: an ISO-8601 date or date-time (`2026-11-01`, `2026-11-01T08:00:00Z`),
 * or an age such as `30m`, `24h`, `7d`, `2w` before `now`.
 * @returns the start of the window as ISO-8601 UTC
 * @throws InvalidArgumentError for anything else (commander prints it and exits 1)
 */
export function parseSince(value: string, now: Date = new Date()): string {
  const age = /^\s*(\d{1,6})\s*([mhdw])\s*$/i.exec(value);
  if (age?.[1] && age[2])
    return new Date(now.getTime() - Number(age[1]) * (SINCE_UNITS[age[2].toLowerCase()] ?? 0)).toISOString();
  if (/^\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?$/.test(value.trim())) {
    const at = Date.parse(value.trim());
    if (!Number.isNaN(at)) return new Date(at).toISOString();
  }
  throw new InvalidArgumentError("expected an ISO-8601 date (2026-11-01) or an age such as 30m, 24h, 7d, 2w");
}

/**
 * A commander parser for a number greater than 0.
 * @throws InvalidArgumentError
 */
export function positiveNumber(value: string): number {
  const n = Number(value);
  if (!value.trim() || !Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError("expected a number greater than 0");
  return n;
}

/**
 * A commander parser for a number in `[min, max]` (fractions allowed).
 * @throws InvalidArgumentError naming the allowed range
 */
export function boundedNumber(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!value.trim() || !Number.isFinite(n) || n < min || n > max)
      throw new InvalidArgumentError(`expected a number from ${min} to ${max}`);
    return n;
  };
}

function readable(flag: string, path: string, what: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message;
    throw usageError(`${flag} ${path}: ${why}; give ${what}`);
  }
}

/** The `task_id`s of a HumanEval JSONL text (lines that are not JSON are left to the full reader). */
function datasetIds(text: string): string[] {
  const ids: string[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      const id = (JSON.parse(line) as { task_id?: unknown }).task_id;
      if (typeof id === "string") ids.push(id);
    } catch {
      /* reported with its line number by loadHumanEval */
    }
  }
  return ids;
}

function describeIds(ids: string[]): string {
  if (ids.length === 0) return "none: the file has no HumanEval records";
  if (ids.length <= 8) return ids.join(", ");
  return `${ids[0]} … ${ids[ids.length - 1]} (${ids.length} tasks; the number alone also works, e.g. ${ids[0]?.split("/")[1] ?? "0"})`;
}

/** What `solve` was given, as far as the checks here need. */
export interface SolveInput {
  file?: string;
  humaneval?: string;
  dataset?: string;
  language?: string;
  script?: string;
  config?: string;
  repo?: string;
  base?: string;
  testCmd?: string;
  setupCmd?: string;
  dependencies?: string;
  mapTokens?: number;
  testTimeout?: number;
  mode?: "agent" | "oneshot";
  apply?: boolean;
  decompose?: boolean;
  parallel?: number;
  subtaskAttempts?: number;
  /** `--subtask-timeout`, in ms. */
  subtaskTimeout?: number;
}

/**
 * Checks the task source and the files `solve` names: exactly one of a goal, `--file` or
 * `--humaneval`; `--language` only with a goal; `--humaneval` with a readable `--dataset`
 * that holds the id; the repo-mode flags only with `--repo`; `--decompose` only with
 * `--repo`, `--parallel`, `--subtask-attempts` and `--subtask-timeout` only with `--decompose`; readable
 * `--file`, `--script` and `--config` files.
 * @throws CliError `bad_request` naming the flag and what it accepts
 */
export function checkSolveInput(goal: string | undefined, o: SolveInput): void {
  const sources = [goal?.trim() ? "a goal" : "", o.file ? "--file" : "", o.humaneval ? "--humaneval" : ""].filter(
    Boolean,
  );
  if (sources.length === 0)
    throw usageError("give a goal, --file <task.json> or --humaneval <id> --dataset <humaneval.jsonl>");
  if (sources.length > 1) throw usageError(`give one task: ${sources.join(" and ")} were given together`);
  if (o.dataset && !o.humaneval) throw usageError("--dataset is read only with --humaneval <id>");
  if (o.language && !sources.includes("a goal"))
    throw usageError(
      `--language applies to a goal only; ${o.file ? "the task file sets its own language" : "HumanEval tasks are python"}`,
    );
  if (o.humaneval) {
    if (!o.dataset) throw usageError("--humaneval needs --dataset <path to humaneval.jsonl>");
    const ids = datasetIds(
      readable("--dataset", o.dataset, "the HumanEval JSONL file (e.g. ../shared/datasets/humaneval.jsonl)"),
    );
    const want = humanevalId(o.humaneval);
    if (!ids.includes(want))
      throw usageError(`--humaneval ${o.humaneval}: no such task in ${o.dataset}; allowed: ${describeIds(ids)}`);
  }
  const dagFlags = [
    o.decompose ? "--decompose" : "",
    o.parallel !== undefined ? "--parallel" : "",
    o.subtaskAttempts !== undefined ? "--subtask-attempts" : "",
    o.subtaskTimeout !== undefined ? "--subtask-timeout" : "",
  ].filter(Boolean);
  if (!o.repo && dagFlags.length) {
    throw usageError(
      `${dagFlags.join(", ")} appl${dagFlags.length === 1 ? "ies" : "y"} to --repo only: a DAG task changes a repository (one with nothing but a README will do): loopsmith solve --repo <dir> --decompose "<goal>"`,
    );
  }
  if (!o.decompose && dagFlags.length)
    throw usageError(
      `${dagFlags.join(" and ")} appl${dagFlags.length === 1 ? "ies" : "y"} to --decompose only (a DAG task)`,
    );
  if (o.repo && !sources.includes("a goal"))
    throw usageError('--repo needs a goal: loopsmith solve --repo <path> "<what to change>"');
  const repoOnly = (
    ["base", "testCmd", "setupCmd", "dependencies", "mapTokens", "testTimeout", "mode", "apply"] as const
  ).filter((k) => o[k] !== undefined);
  if (!o.repo && repoOnly.length)
    throw usageError(
      `${repoOnly.map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`).join(", ")} apply to --repo only`,
    );
  if (o.file) readable("--file", o.file, "a task file (JSON with goal, language, files, acceptanceTests, limits)");
  if (o.script) readable("--script", o.script, "a replies file for the scripted provider");
  if (o.config) readable("--config", o.config, "a JSON configuration file");
}

/** A configured NATS URL and where it came from. */
export interface ConfiguredNats {
  url: string;
  /** `NATS_URL`, or `natsUrl in <file>`. */
  source: string;
}

function natsUrlIn(json: string | undefined): string | undefined {
  if (!json) return undefined;
  try {
    const v = (JSON.parse(json) as { natsUrl?: unknown } | null)?.natsUrl;
    return typeof v === "string" && v !== "" ? v : undefined;
  } catch {
    return undefined; // loadConfig reports it
  }
}

/**
 * The NATS URL the configuration will hold, by the same layers as `loadConfig` (the user's
 * file < the repository's file < `--config`/`LOOPSMITH_CONFIG` < `NATS_URL` <
 * `LOOPSMITH_CONFIG_JSON`; the files found as `findConfigFiles` finds them: the repository
 * of `opts.repo` when given, else the one holding `cwd`), or undefined when none is set (then
 * the CLI starts its own NATS). A file that cannot be read is skipped here; `loadConfig`
 * reports it.
 */
export async function configuredNats(
  opts: { config?: string; repo?: string },
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): Promise<ConfiguredNats | undefined> {
  // Loaded here, not at the top: this module is in every command's start, and usage errors
  // answer before the shared library (zod contracts, NATS) is loaded.
  const { findConfigFiles, repositoryRoot } = await import("@loopsmith/shared/runtime");
  let discovered: string[] = [];
  try {
    const repoRoot = opts.repo ? (repositoryRoot(resolve(opts.repo)) ?? resolve(opts.repo)) : undefined;
    const found = findConfigFiles({ cwd, env, ...(repoRoot ? { repoRoot } : {}) });
    discovered = [found.user, found.repo].filter((f): f is string => f !== undefined);
  } catch {
    discovered = []; // two repository files: loadConfig reports it
  }
  const explicit = opts.config ?? env.LOOPSMITH_CONFIG;
  let found: ConfiguredNats | undefined;
  for (const file of [...discovered, ...(explicit ? [explicit] : [])]) {
    let text: string | undefined;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      text = undefined;
    }
    const url = natsUrlIn(text);
    if (url) found = { url, source: `natsUrl in ${file}` };
  }
  if (env.NATS_URL) found = { url: env.NATS_URL, source: "NATS_URL" };
  const fromJson = natsUrlIn(env.LOOPSMITH_CONFIG_JSON);
  if (fromJson) found = { url: fromJson, source: "LOOPSMITH_CONFIG_JSON" };
  return found;
}

/** One server of a NATS URL list: where to connect, and how to show it (no credentials). */
export interface NatsServer {
  host: string;
  port: number;
  /** `scheme://host:port`, without user info, path or query. */
  shown: string;
}

/** The servers of a NATS URL (`nats://a:4222,nats://b:4222`, `host:port`, `tls://…`); unparsable ones are left out. */
export function natsServers(url: string): NatsServer[] {
  const out: NatsServer[] = [];
  for (const part of url
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    try {
      const u = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(part) ? part : `nats://${part}`);
      const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
      const port = u.port ? Number(u.port) : 4222;
      if (host) out.push({ host, port, shown: `${u.protocol}//${u.hostname}:${port}` });
    } catch {
      /* left to the NATS client */
    }
  }
  return out;
}

/** `url` shown without credentials: its servers as `scheme://host:port`, comma-separated. */
export function shownNatsUrl(url: string): string {
  const servers = natsServers(url);
  return servers.length ? servers.map((s) => s.shown).join(",") : "(an unparsable URL)";
}

/**
 * The one sentence for an unreachable NATS: what was tried, why it failed, and how to get one.
 * @param source - where the URL came from (`NATS_URL`, `natsUrl in <file>`, `LOOPSMITH_CONFIG_JSON`); unknown when absent
 */
export function natsUnreachableMessage(url: string, source: string | undefined, why: string): string {
  const fix =
    source === "NATS_URL"
      ? "unset NATS_URL"
      : source?.startsWith("natsUrl in ")
        ? `remove ${source.replace(/^natsUrl in /, "natsUrl from ")}`
        : source
          ? `remove natsUrl from ${source}`
          : "unset NATS_URL (or remove natsUrl from the configuration file)";
  return `no NATS server at ${shownNatsUrl(url)} (from ${source ?? "NATS_URL or natsUrl in the configuration"}): ${why}; start one (\`docker compose up\`) or ${fix} so that loopsmith starts its own`;
}

/** How a TCP connection to `host:port` went within `timeoutMs`: `open`, or why not. */
function tcpProbe(host: string, port: number, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    const done = (how: string): void => {
      socket.destroy();
      resolve(how);
    };
    socket.setTimeout(timeoutMs, () => done(`no answer within ${(timeoutMs / 1000).toFixed(1)} s`));
    socket.once("connect", () => done("open"));
    socket.once("error", (err: NodeJS.ErrnoException) =>
      done(err.code === "ECONNREFUSED" ? "the connection was refused" : (err.code ?? err.message)),
    );
  });
}

/**
 * Fails fast when nothing listens at a configured NATS URL: one TCP connection per server,
 * in parallel, each given `timeoutMs`. Passes when any server accepts (the NATS client then
 * does the real handshake) or when no server can be parsed (left to the client).
 * @throws CliError `unavailable` with {@link natsUnreachableMessage}
 */
export async function checkNatsListening(nats: ConfiguredNats, timeoutMs = 1_500): Promise<void> {
  const servers = natsServers(nats.url);
  if (servers.length === 0) return;
  const probes = await Promise.all(servers.map((s) => tcpProbe(s.host, s.port, timeoutMs)));
  if (!probes.includes("open")) {
    throw new CliError("unavailable", natsUnreachableMessage(nats.url, nats.source, [...new Set(probes)].join("; ")));
  }
}

/**
 * A USD budget over a model without a known price: `solve` and `improve` refuse
 * it before starting anything (`admitBudget`), or, without a USD budget, warn that the model's
 * calls count as $0. Prices come from `llm.prices` (and a role's `prices`), then
 * `@pydantic/genai-prices`; see `shared/src/llm/prices.ts`.
 * @param config the configuration the services started for this command will run with
 * @param limits `maxCostUsd` is `--budget-usd` (a task's limit, or an improvement run's), USD
 * @param warn where the warning goes (stderr)
 * @param scope whose budget: a task's (`task`, the default: the roles a task calls,
 *   `TASK_ROLES`), or an improvement run's (`generation`: every role, its hypotheses call `improve`)
 * @throws LoopsmithError `config_invalid` (exit 2) naming each unpriced model, its roles, the
 *   `llm.prices["<model>"]` key to set and the budget (`the task's USD budget (--budget-usd)`)
 */
export async function checkBudgetPrices(
  config: Config,
  limits: { maxCostUsd?: number | undefined } | undefined,
  warn: (message: string) => void,
  scope: "task" | "generation" = "task",
): Promise<void> {
  const { admitBudget, unpricedModels, unpricedWarning } = await import("@loopsmith/shared/llm");
  const unpriced = scope === "generation" ? unpricedModels(config, ROLES) : unpricedModels(config);
  if (unpriced.length === 0) return;
  admitBudget(unpriced, scope, { usd: limits?.maxCostUsd !== undefined });
  warn(unpricedWarning(unpriced));
}
