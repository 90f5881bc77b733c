/**
 * `loopsmith solve`: build a task (goal string, task file or HumanEval record), make sure
 * NATS and the five services answer (starting what is missing), submit the task, show its
 * progress and print the result. Exit code 0 only when the tests pass; 130 when interrupted.
 */
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "pino";
import {
  Endpoints,
  LoopsmithError,
  Task,
  call,
  createProvider,
  ensureStreams,
  loadConfig,
  submitTask,
  watchEvents,
  type Config,
  type Language,
  type TaskInput,
  type TaskLimits,
  type TaskResult,
} from "@loopsmith/shared";
import { findHumanEval, humanevalTask, loadHumanEval } from "./humaneval.js";
import { eventLine, resultText } from "./output.js";
import { startLocalStack, type LocalStack } from "./stack.js";

/** Options of `solve`, as commander gives them. */
export interface SolveOptions {
  file?: string;
  humaneval?: string;
  dataset?: string;
  language?: Language;
  provider?: string;
  model?: string;
  script?: string;
  baseUrl?: string;
  transcript?: string;
  config?: string;
  maxIterations?: number;
  budgetUsd?: number;
  budgetTokens?: number;
  review?: boolean;
  taskId?: string;
  json?: boolean;
}

/** The flags layer of the configuration, also handed to child services. */
export function flagsOf(o: SolveOptions): Record<string, unknown> {
  const llm: Record<string, unknown> = {};
  if (o.provider) llm.provider = o.provider;
  if (o.model) llm.model = o.model;
  if (o.script) llm.scriptPath = resolve(o.script);
  if (o.baseUrl) llm.baseUrl = o.baseUrl;
  if (o.transcript) llm.transcriptPath = resolve(o.transcript);
  return Object.keys(llm).length ? { llm } : {};
}

function limitsOf(o: SolveOptions): Partial<TaskLimits> {
  const l: Partial<TaskLimits> = {};
  if (o.maxIterations !== undefined) l.maxIterations = o.maxIterations;
  if (o.budgetUsd !== undefined) l.maxCostUsd = o.budgetUsd;
  if (o.budgetTokens !== undefined) l.maxTokens = o.budgetTokens;
  return l;
}

/**
 * The task to submit.
 * @throws LoopsmithError `bad_request` for a missing goal, an unreadable or invalid task file.
 */
export function buildTask(goal: string | undefined, o: SolveOptions): TaskInput {
  const limits = limitsOf(o);
  if (o.humaneval) {
    if (!o.dataset) throw new LoopsmithError("bad_request", "--humaneval needs --dataset <path to humaneval.jsonl>");
    const rec = findHumanEval(loadHumanEval(o.dataset), o.humaneval);
    return humanevalTask(rec, { ...(o.taskId ? { taskId: o.taskId } : {}), limits });
  }
  if (o.file) {
    let raw: Record<string, unknown>;
    try {
      raw = JSON.parse(readFileSync(o.file, "utf8")) as Record<string, unknown>;
    } catch (err) {
      throw new LoopsmithError("bad_request", `cannot read the task file ${o.file}: ${(err as Error).message}`, { cause: err });
    }
    const input = {
      v: 1,
      taskId: o.taskId ?? `task-${randomBytes(5).toString("hex")}`,
      submittedAt: new Date().toISOString(),
      ...raw,
      limits: { ...((raw.limits as object | undefined) ?? {}), ...limits },
      ...(o.review !== undefined ? { review: o.review } : {}),
    };
    const parsed = Task.safeParse(input);
    if (!parsed.success) {
      throw new LoopsmithError("bad_request", `the task file ${o.file} is invalid: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
    }
    return input as TaskInput;
  }
  if (!goal?.trim()) throw new LoopsmithError("bad_request", "give a goal, --file <task.json> or --humaneval <id> --dataset <path>");
  return {
    v: 1,
    taskId: o.taskId ?? `task-${randomBytes(5).toString("hex")}`,
    goal,
    language: o.language ?? "python",
    limits,
    ...(o.review !== undefined ? { review: o.review } : {}),
    submittedAt: new Date().toISOString(),
  };
}

/** Exit code after an interruption (128 + SIGINT). */
export const INTERRUPTED = 130;

/** Writes one line to stdout. */
function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

/**
 * Runs `solve` end to end. Returns the process exit code: 0 when the tests pass, 1 when the
 * task stopped without passing, 2 for a usage or configuration error.
 */
export async function solve(goal: string | undefined, o: SolveOptions, log: Logger): Promise<number> {
  const flags = flagsOf(o);
  const config: Config = loadConfig({ ...(o.config ? { file: o.config } : {}), flags });
  const task = buildTask(goal, o);
  // Fail before starting anything when the provider cannot work (missing key, bad key).
  const provider = createProvider({ config, log });
  if (provider.info.scripted) {
    const banner = `SCRIPTED RUN: replies are replayed from ${config.llm.scriptPath}; no model is called.`;
    if (o.json) out(JSON.stringify({ kind: "notice", scripted: true, message: banner }));
    else out(banner);
  }
  if (provider.verify) await provider.verify();

  const childEnv: NodeJS.ProcessEnv = {
    LOOPSMITH_CONFIG_JSON: JSON.stringify(flags),
    ...(o.config ? { LOOPSMITH_CONFIG: resolve(o.config) } : {}),
  };
  // One handler from the start: the first signal cancels a submitted task (the result is
  // still awaited and printed); a second one, or one before submission, stops waiting.
  // Either way everything this command started is stopped before it exits.
  const abort = new AbortController();
  let nc: NatsConnection | undefined;
  let submittedId: string | undefined;
  let signals = 0;
  const onSignal = (): void => {
    signals += 1;
    if (signals === 1 && nc && submittedId) {
      process.stderr.write("loopsmith: cancelling the task (press Ctrl-C again to stop waiting)\n");
      void call(nc, Endpoints.architect.cancel, { v: 1, taskId: submittedId, reason: "interrupted" }, { timeoutMs: 5_000, retries: 0 }).catch(() => abort.abort());
    } else {
      abort.abort();
    }
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  let stack: LocalStack | undefined;
  try {
    stack = await startLocalStack({ config, log, env: childEnv });
    if (abort.signal.aborted) return INTERRUPTED;
    const reused = 5 - stack.started.length;
    if (reused > 0 && Object.keys(flags).length > 0) {
      process.stderr.write(
        `loopsmith: ${reused} service(s) were already running on ${stack.natsUrl} and keep their own configuration; --provider/--model/--script/--base-url apply only to the ${stack.started.length} started now\n`,
      );
    }
    nc = await connect({ servers: stack.natsUrl });
    await ensureStreams(nc);
    const submitted = await submitTask(nc, task);
    submittedId = submitted.taskId;
    if (!o.json) out(`task ${submitted.taskId} submitted${submitted.duplicate ? " (a duplicate of a task already submitted)" : ""}`);
    let result: TaskResult | undefined;
    for await (const event of watchEvents(nc, task.taskId, abort.signal)) {
      if (o.json) {
        if (event.kind !== "result") out(JSON.stringify(event));
      } else {
        const line = eventLine(event);
        if (line) out(line);
      }
      if (event.kind === "result" && event.result) result = event.result;
    }
    if (!result) {
      process.stderr.write(`loopsmith: stopped waiting; task ${task.taskId} may still be running\n`);
      return INTERRUPTED;
    }
    out(o.json ? JSON.stringify(result) : resultText(result));
    return result.status === "passed" ? 0 : result.status === "cancelled" ? INTERRUPTED : 1;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await nc?.close().catch(() => undefined);
    await stack?.stop();
  }
}
