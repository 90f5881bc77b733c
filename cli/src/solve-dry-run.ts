/**
 * `solve --dry-run`: the task as `solve` would submit it, checked the same way (a repository's
 * work tree and base, a task file), and the prompt budget of one build call, without starting
 * NATS or a service and without calling any model.
 *
 * What it shows: the models each step would call (as `config show` resolves them), the task's
 * limits, and the build prompt's input, part by part, in approximate tokens (`approxTokens`,
 * 4 characters a token, the estimate the services use): the goal; an inline task's files and
 * acceptance tests; in repo mode the repository map's budget (`--map-tokens`; the architect
 * ranks the map toward the goal at run time) and the files the goal names, read from the base
 * commit. The plan itself is a model call (the plan step), so it is not made here.
 */
import { simpleGit } from "simple-git";
import { approxTokens, effectiveRoles } from "@loopsmith/shared/llm";
import { Task, type TaskInput } from "@loopsmith/shared/contracts";
import { type Config } from "@loopsmith/shared/runtime";
import type { PreparedRepoTask } from "./solve-repo.js";

/** The repository map's token budget when the task sets none (RepoSpec.mapTokens). */
const DEFAULT_MAP_TOKENS = 2048;

/** One part of the build prompt and its size. */
export interface PromptPart {
  part: string;
  tokens: number;
}

/** What `--dry-run` reports (also its `--json` object, with `kind: "dry_run"`). */
export interface DryRun {
  taskId: string;
  mode: "inline" | "repo";
  models: { plan: string; build: string; review: string };
  /** The task's limits: iterations, budgets, and its wall-clock limit in ms (`--timeout`). */
  limits: { maxIterations: number; budgetUsd?: number; budgetTokens?: number; timeLimitMs?: number };
  /** The build prompt's input, part by part. */
  buildPrompt: PromptPart[];
  /** Their sum, in estimated tokens. */
  buildPromptTokens: number;
  /** The input price of one build call at the build model's price, in USD (estimated, as the tokens are). */
  buildInputUsd: number;
  /**
   * Always `true`: the prompt's tokens are estimated (4 characters a token), not counted;
   * counts come from the provider's usage fields when the task runs.
   */
  estimated: true;
  /** Repo mode: the files the goal names that the base commit holds. */
  pickedFiles?: string[];
}

/** Paths of `files` that `text` names, whole or by their file name (a word of 3+ characters). */
export function namedFiles(text: string, files: readonly string[]): string[] {
  return files.filter((f) => {
    const name = f.split("/").at(-1) ?? f;
    return text.includes(f) || (name.length >= 3 && new RegExp(`(^|[^\\w.-])${escape(name)}($|[^\\w-])`).test(text));
  });
}

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The dry run of a task.
 * @throws LoopsmithError `bad_request` when the task is invalid (as submitting it would),
 *   `config_invalid` when a role's model cannot be resolved; git's error reading a repository
 */
export async function dryRun(
  input: TaskInput,
  prepared: PreparedRepoTask | undefined,
  config: Config,
): Promise<DryRun> {
  const task = Task.parse(input);
  const roles = effectiveRoles(config);
  const parts: PromptPart[] = [{ part: "goal", tokens: approxTokens(task.goal) }];
  let picked: string[] | undefined;
  if (prepared) {
    const git = simpleGit(prepared.repo.root);
    const base = prepared.repo.baseCommit;
    const files = (await git.raw(["ls-tree", "-r", "--name-only", base])).split("\n").filter(Boolean);
    picked = namedFiles(task.goal, files);
    parts.push({
      part: `repository map (budget; ${files.length} files at ${base.slice(0, 12)})`,
      tokens: task.repo?.mapTokens ?? DEFAULT_MAP_TOKENS,
    });
    for (const path of picked)
      parts.push({ part: `file ${path}`, tokens: approxTokens(await git.show([`${base}:${path}`])) });
    if (task.repo?.testCommand) parts.push({ part: "test command", tokens: approxTokens(task.repo.testCommand) });
  } else {
    for (const f of task.files) parts.push({ part: `file ${f.path}`, tokens: approxTokens(f.content) });
    for (const t of task.acceptanceTests) parts.push({ part: `test ${t.path}`, tokens: approxTokens(t.content) });
  }
  const total = parts.reduce((n, p) => n + p.tokens, 0);
  const build = roles.build;
  return {
    taskId: task.taskId,
    mode: prepared ? "repo" : "inline",
    models: {
      plan: `${roles.plan.provider}/${roles.plan.model}`,
      build: `${build.provider}/${build.model}`,
      review: `${roles.review.provider}/${roles.review.model}`,
    },
    limits: {
      maxIterations: task.limits.maxIterations,
      ...(task.limits.maxCostUsd !== undefined ? { budgetUsd: task.limits.maxCostUsd } : {}),
      ...(task.limits.maxTokens !== undefined ? { budgetTokens: task.limits.maxTokens } : {}),
      ...(task.limits.timeLimitMs !== undefined ? { timeLimitMs: task.limits.timeLimitMs } : {}),
    },
    buildPrompt: parts,
    buildPromptTokens: total,
    buildInputUsd: (total / 1_000_000) * build.price.inputPerMTok,
    estimated: true,
    ...(picked ? { pickedFiles: picked } : {}),
  };
}

/** The dry run for people: one line a fact, the prompt's parts as a list. */
export function dryRunText(d: DryRun): string {
  const limits = [
    `${d.limits.maxIterations} iterations`,
    ...(d.limits.budgetUsd !== undefined ? [`$${d.limits.budgetUsd}`] : []),
    ...(d.limits.budgetTokens !== undefined ? [`${d.limits.budgetTokens} tokens`] : []),
    ...(d.limits.timeLimitMs !== undefined ? [`${d.limits.timeLimitMs / 1000} s of wall clock`] : []),
  ].join(", ");
  return [
    `DRY RUN: task ${d.taskId} (${d.mode} mode) is not submitted; nothing is started and no model is called.`,
    `models: plan ${d.models.plan}, build ${d.models.build}, review ${d.models.review}`,
    `limits: ${limits}`,
    ...(d.pickedFiles ? [`files the goal names: ${d.pickedFiles.length ? d.pickedFiles.join(", ") : "none"}`] : []),
    `build prompt, about ${d.buildPromptTokens} tokens of input (estimated at 4 characters a token) ($${d.buildInputUsd.toFixed(4)} a call at the build model's price):`,
    ...d.buildPrompt.map((p) => `  ${String(p.tokens).padStart(7)}  ${p.part}`),
    "the plan is a model call: it is made when the task runs.",
  ].join("\n");
}
