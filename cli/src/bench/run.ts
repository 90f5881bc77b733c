/**
 * `loopsmith bench`: runs a dataset's tasks over one stack (the
 * one `loopsmith up` started, or one started for the run), scores each on its hidden tests,
 * and writes `results.jsonl` (one line as each task ends, so `--resume` continues an
 * interrupted run), `summary.json`, `report.md` and `report.html` (with agent-mode tasks'
 * transcripts, kept in `transcripts.jsonl` as each task ends).
 *
 * Without a model (`--provider scripted|simulated`, or no API key) every task carries its own
 * replies (`Task.script`), so one stack serves any number of different tasks at once, and
 * every output says that no model was called. `--memory ab` runs each case twice from the
 * same start: memory off, and memory on recalling only the earlier tasks of its own arm.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join, resolve } from "node:path";
import PQueue from "p-queue";
import type { Logger } from "pino";
import { z } from "zod";
import { LoopsmithError, loadConfig, type Config } from "@loopsmith/shared/runtime";
import { createProvider } from "@loopsmith/shared/llm";
import { type TaskEvent } from "@loopsmith/shared/contracts";
import { answeringServices, startLocalStack, type LocalStack } from "../stack.js";
import { openClient, type Client } from "../client.js";
import { jsonLine, printable } from "../terminal.js";
import { loadDataset } from "@loopsmith/evals";
import { reportHtml, reportMarkdown } from "./report.js";
import { appendTranscript, readTranscripts } from "./transcripts.js";
import { summarize } from "./summary.js";
import { cpuTimes, machineState, referenceMs, type CpuTimes, type MachineState } from "./machine.js";
import { benchTask, type BenchTaskOptions } from "./tasks.js";
import type { BenchResult } from "./types.js";
import {
  DatasetFormat,
  type BenchArm,
  type BenchCase,
  type BenchSummary,
  type ProviderLabel,
  type SkippedLine,
} from "./types.js";
import { progressReporter } from "./progress.js";
import { errorLine, noticeFor, readResults, resultLine, summaryText } from "./results.js";
import { isRecallEvent, readMemoryUtility, readTaskMemory } from "./memory-use.js";

/** Options of `loopsmith bench`, as commander gives them. */
export interface BenchOptions {
  dataset: string;
  format?: DatasetFormat;
  /** Only these case ids (`HumanEval/3` or `3`). */
  ids?: string[];
  /** The first n cases (after `ids`). */
  limit?: number;
  /** Tasks in flight at once. @defaultValue 4 */
  concurrency?: number;
  /** `ab`: each case with memory off, then on. @defaultValue "on" */
  memory?: "on" | "off" | "ab";
  /** `scripted`, `simulated`, or a model provider; default: the configured model when a key is set, else `simulated`. */
  provider?: string;
  model?: string;
  baseUrl?: string;
  transcript?: string;
  config?: string;
  /** Output folder. @defaultValue `bench-runs/<runId>` */
  out?: string;
  /** Continue the run in `out` from its `results.jsonl`. */
  resume?: boolean;
  maxIterations?: number;
  /** Simulation: probability a reflection finds the cause unaided. @defaultValue 0.3 */
  findRate?: number;
  seed?: number;
  /** Wall-clock limit of one task, ms. @defaultValue 600000 */
  taskTimeoutMs?: number;
  /** Resubmissions of a task that ended in an infrastructure error. @defaultValue 1 */
  retries?: number;
  json?: boolean;
}

/** What a run's folder records about it, so `--resume` continues the same run. */
const RunMeta = z.object({
  v: z.literal(1),
  runId: z.string(),
  dataset: z.string(),
  format: DatasetFormat,
  memory: z.enum(["on", "off", "ab"]),
  provider: z.object({ label: z.enum(["model", "scripted", "simulated"]), name: z.string(), model: z.string() }),
  caseIds: z.array(z.string()),
  startedAt: z.string(),
});
type RunMeta = z.infer<typeof RunMeta>;

/** How often the run checks that all five services answer `$SRV.PING`, in ms. */
const WATCH_EVERY_MS = 3_000;

/** Error codes after which a task is submitted again (the stack is checked first). */
const RETRYABLE = new Set(["unavailable", "timeout", "internal", "nats_error", "db_error"]);

/** Which provider answers: the flag, else the configured model when it has credentials, else `simulated`. */
function providerOf(o: BenchOptions, config: Config): RunMeta["provider"] {
  const name =
    o.provider ??
    (config.llm.provider === "scripted"
      ? "scripted"
      : config.llm.provider === "anthropic" && !config.llm.apiKey
        ? "simulated"
        : config.llm.provider);
  if (name === "simulated") return { label: "simulated", name: "simulated", model: "simulated" };
  if (name === "scripted") return { label: "scripted", name: "scripted", model: "script:task" };
  return { label: "model", name, model: o.model ?? config.llm.model };
}

/** The configuration flags the stack's services get. */
function stackFlags(o: BenchOptions, label: ProviderLabel): Record<string, unknown> {
  const llm: Record<string, unknown> = {};
  if (label !== "model") llm.provider = "scripted";
  else {
    if (o.provider) llm.provider = o.provider;
    if (o.model) llm.model = o.model;
    if (o.baseUrl) llm.baseUrl = o.baseUrl;
  }
  if (o.transcript) llm.transcriptPath = resolve(o.transcript);
  return { llm };
}

/** The cases of the run: `ids` in dataset order, then the first `limit`. */
export function selectCases(cases: BenchCase[], o: Pick<BenchOptions, "ids" | "limit">): BenchCase[] {
  let out = cases;
  if (o.ids?.length) {
    const want = new Set(o.ids.flatMap((id) => [id, id.includes("/") ? id : ""]).filter(Boolean));
    const bare = new Set(o.ids.filter((id) => !id.includes("/")));
    out = cases.filter((c) => want.has(c.id) || bare.has(c.id.split("/").pop() ?? ""));
    const missing = o.ids.filter((id) => !out.some((c) => c.id === id || c.id.split("/").pop() === id));
    if (missing.length) throw new LoopsmithError("not_found", `no case ${missing.join(", ")} in the dataset`);
  }
  return o.limit ? out.slice(0, o.limit) : out;
}

/** The run: everything `benchCommand` sets up. */
interface Run {
  meta: RunMeta;
  out: string;
  resultsPath: string;
  /** The stack's client (its tasks carry the client's owner token). */
  client: Client;
  /** Starts the services that stopped answering (after a task's infrastructure error). */
  ensureStack(): Promise<void>;
  options: BenchOptions;
  log: Logger;
  abort: AbortSignal;
}

/**
 * One case in one arm: submit, wait, resubmit after an infrastructure error (at most
 * `retries` times, once the stack answers again), and append the line.
 */
async function runOne(run: Run, c: BenchCase, index: number, arm: BenchArm): Promise<BenchResult | undefined> {
  const { meta, options: o } = run;
  const retries = o.retries ?? 1;
  let line: BenchResult | undefined;
  for (let attempt = 1; attempt <= retries + 1 && !run.abort.aborted; attempt++) {
    const taskOpts: BenchTaskOptions = {
      runId: meta.runId,
      arm,
      index,
      attempt,
      provider: meta.provider.label,
      paired: meta.memory === "ab",
      ...(o.maxIterations !== undefined ? { maxIterations: o.maxIterations } : {}),
      ...(o.findRate !== undefined ? { findRate: o.findRate } : {}),
      ...(o.seed !== undefined ? { seed: o.seed } : {}),
    };
    const task = benchTask(c, taskOpts);
    const started = Date.now();
    const base = { runId: meta.runId, caseId: c.id, arm, attempts: attempt, label: meta.provider.label };
    try {
      await run.client.submit(task);
      const limit = AbortSignal.any([run.abort, AbortSignal.timeout(o.taskTimeoutMs ?? 600_000)]);
      const steps: TaskEvent[] = [];
      let recalls = 0;
      const result = await run.client.result(task.taskId, {
        signal: limit,
        onEvent: (event) => {
          if (event.kind === "step" && event.phase === "explore") steps.push(event);
          if (isRecallEvent(event)) recalls += 1;
        },
      });
      if (!result) {
        const reason = run.abort.aborted ? "bench interrupted" : "bench task timeout";
        await run.client.cancel(task.taskId, reason, 3_000).catch(() => undefined);
        if (run.abort.aborted) return undefined;
        line = errorLine({
          ...base,
          taskId: task.taskId,
          wallMs: Date.now() - started,
          message: `timeout: no result within ${o.taskTimeoutMs ?? 600_000} ms`,
          code: "task_timeout",
        });
      } else {
        line = resultLine(result, { ...base, wallMs: Date.now() - started });
        const memory = await readTaskMemory(run.client, run.log, task.taskId, recalls);
        if (memory) line = { ...line, memory };
        appendTranscript(join(run.out, "transcripts.jsonl"), task.taskId, steps);
        if (result.status !== "error" || !RETRYABLE.has(result.error?.code ?? "internal")) break;
      }
    } catch (err) {
      if (run.abort.aborted) return undefined;
      line = errorLine({
        ...base,
        taskId: task.taskId,
        wallMs: Date.now() - started,
        message: `${(err as LoopsmithError).code ?? "internal"}: ${(err as Error).message}`,
        code: (err as LoopsmithError).code ?? "internal",
      });
    }
    if (attempt <= retries) {
      run.log.warn(
        { taskId: task.taskId, error: line.error },
        "bench: the task ended in an infrastructure error; checking the stack and submitting it again",
      );
      await run.ensureStack().catch((err: unknown) => run.log.warn({ err }, "bench: the stack could not be restarted"));
    }
  }
  if (line) appendFileSync(run.resultsPath, `${JSON.stringify(line)}\n`);
  return line;
}

/** The run's metadata: a new run, or the one in `out` for `--resume` (which must match). */
function openRun(
  o: BenchOptions,
  cases: BenchCase[],
  format: DatasetFormat,
  provider: RunMeta["provider"],
): { meta: RunMeta; out: string } {
  const memory = o.memory ?? "on";
  if (o.resume) {
    if (!o.out) throw new LoopsmithError("bad_request", "--resume needs --out <the run's folder>");
    const metaPath = join(o.out, "run.json");
    let meta: RunMeta;
    try {
      meta = RunMeta.parse(JSON.parse(readFileSync(metaPath, "utf8")));
    } catch (err) {
      throw new LoopsmithError(
        "bad_request",
        `--resume: ${metaPath} is not a bench run's record: ${(err as Error).message}`,
        { cause: err },
      );
    }
    if (meta.memory !== memory)
      throw new LoopsmithError(
        "bad_request",
        `--resume: the run in ${o.out} used --memory ${meta.memory}, not ${memory}`,
      );
    if (meta.provider.label !== provider.label)
      throw new LoopsmithError(
        "bad_request",
        `--resume: the run in ${o.out} was ${meta.provider.label}, not ${provider.label}`,
      );
    return { meta, out: o.out };
  }
  const runId = randomBytes(5).toString("hex");
  const out = o.out ?? join("bench-runs", runId);
  if (existsSync(join(out, "results.jsonl")))
    throw new LoopsmithError("bad_request", `${out} already holds a run; use --resume to continue it or another --out`);
  mkdirSync(out, { recursive: true });
  const meta: RunMeta = {
    v: 1,
    runId,
    dataset: resolve(o.dataset),
    format,
    memory,
    provider,
    caseIds: cases.map((c) => c.id),
    startedAt: new Date().toISOString(),
  };
  writeFileSync(join(out, "run.json"), `${JSON.stringify(meta, null, 2)}\n`);
  return { meta, out };
}

/** Writes summary.json, report.md and report.html; returns the summary. */
function writeReports(
  run: { meta: RunMeta; out: string; resultsPath: string },
  o: BenchOptions,
  skipped: SkippedLine[],
  finishedAt: Date,
  machine?: MachineState,
  utility?: ReadonlyMap<string, number | null>,
): BenchSummary {
  const results = readResults(run.resultsPath);
  const notice = noticeFor(run.meta.provider.label);
  const summary = summarize({
    results,
    runId: run.meta.runId,
    dataset: run.meta.dataset,
    format: run.meta.format,
    provider: run.meta.provider,
    ...(notice ? { notice } : {}),
    memory: run.meta.memory,
    concurrency: o.concurrency ?? 4,
    startedAt: run.meta.startedAt,
    finishedAt: finishedAt.toISOString(),
    skipped,
    ...(machine ? { machine } : {}),
    ...(utility ? { utility } : {}),
  });
  writeFileSync(join(run.out, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
  writeFileSync(join(run.out, "report.md"), reportMarkdown(summary, results));
  writeFileSync(
    join(run.out, "report.html"),
    reportHtml(summary, results, readTranscripts(join(run.out, "transcripts.jsonl"))),
  );
  return summary;
}

/**
 * Keeps a run's stack answering: every {@link WATCH_EVERY_MS} the services are counted, and
 * the ones that stopped answering (killed, crashed) are started again on the same NATS, one
 * restart at a time; the tasks they left are redelivered to them by JetStream.
 * @returns `ensure` (start what is missing now), `quiet` (end the watch) and `stop` (end the
 *   watch, then stop the restarted services, newest first)
 */
function stackKeeper(
  client: Client,
  stackConfig: Config,
  env: NodeJS.ProcessEnv,
  log: Logger,
): { ensure: () => Promise<void>; quiet: () => void; stop: () => Promise<void> } {
  const { stack } = client;
  const stacks: LocalStack[] = [];
  let ending = false;
  let restarting: Promise<void> | undefined;
  const ensure = (): Promise<void> =>
    (restarting ??= (async () => {
      const s = await startLocalStack({
        config: { ...stackConfig, natsUrl: stack.natsUrl },
        log,
        env,
        ...(stack.users ? { users: stack.users } : {}),
      });
      if (s.started.length) process.stderr.write(`loopsmith bench: restarted ${s.started.join(", ")}\n`);
      stacks.push(s);
    })().finally(() => (restarting = undefined)));
  const watchdog = setInterval(() => {
    void answeringServices(client.nc)
      .then((up) => (up.size < 5 && !ending ? ensure() : undefined))
      // A check cut short by the end of the run is no failure.
      .catch((err: unknown) => (ending ? undefined : log.warn({ err }, "bench: the stack check failed")));
  }, WATCH_EVERY_MS);
  const quiet = (): void => {
    clearInterval(watchdog);
    ending = true;
  };
  return {
    ensure,
    quiet,
    stop: async () => {
      quiet();
      for (const s of stacks.reverse()) await s.stop();
    },
  };
}

/** A dataset's cases, loaded and selected (`--ids`, `--limit`); skipped lines are told on stderr. */
function benchCases(o: BenchOptions): { loaded: ReturnType<typeof loadDataset>; cases: BenchCase[] } {
  const loaded = loadDataset(o.dataset, o.format ? { format: o.format } : {});
  for (const s of loaded.skipped)
    process.stderr.write(`loopsmith bench: ${o.dataset} line ${s.line} skipped: ${printable(s.message)}\n`);
  const cases = selectCases(loaded.cases, o);
  if (cases.length === 0)
    throw new LoopsmithError(
      "bad_request",
      `no usable case in ${o.dataset} (${loaded.skipped.length} line(s) skipped)`,
    );
  return { loaded, cases };
}

/** Says, on stderr (and as a JSON line with `--json`), that no model is called, when none is. */
function sayNotice(label: ProviderLabel, json: boolean): void {
  const notice = noticeFor(label);
  if (!notice) return;
  process.stderr.write(`${notice}\n`);
  if (json)
    process.stdout.write(
      `${jsonLine({ kind: "notice", simulated: label === "simulated", scripted: true, message: notice })}\n`,
    );
}

/**
 * Runs `loopsmith bench`.
 * @returns exit code 0 when the run completed (whatever the pass rate), 130 when interrupted
 * @throws LoopsmithError `bad_request` (unreadable dataset, no usable case, a bad `--resume`),
 *   `not_found` (an unknown `--ids` entry), `config_invalid`/`llm_auth` (a model provider that
 *   cannot work), `unavailable` (no stack could be started)
 */
export async function benchCommand(o: BenchOptions, log: Logger): Promise<number> {
  const { loaded, cases } = benchCases(o);
  const config = loadConfig({ ...(o.config ? { file: o.config } : {}) });
  const provider = providerOf(o, config);
  const flags = stackFlags(o, provider.label);
  const stackConfig = loadConfig({ ...(o.config ? { file: o.config } : {}), flags });
  if (provider.label === "model") {
    const p = createProvider({ config: stackConfig, log });
    if (p.verify) await p.verify();
  }
  const { meta, out } = openRun(o, cases, loaded.format, provider);
  const resultsPath = join(out, "results.jsonl");
  sayNotice(provider.label, !!o.json);

  const arms: BenchArm[] = meta.memory === "ab" ? ["off", "on"] : [meta.memory];
  const done = new Set(readResults(resultsPath).map((r) => `${r.arm}\u0000${r.caseId}`));
  const runCases = cases.filter((c) => meta.caseIds.includes(c.id));
  const todo = runCases
    .flatMap((c) => arms.map((arm) => ({ c, index: meta.caseIds.indexOf(c.id), arm })))
    .filter((t) => !done.has(`${t.arm}\u0000${t.c.id}`));

  const abort = new AbortController();
  const onSignal = (): void => {
    if (!abort.signal.aborted)
      process.stderr.write("loopsmith bench: interrupted; cancelling the running tasks (resume with --resume)\n");
    abort.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const env: NodeJS.ProcessEnv = {
    LOOPSMITH_CONFIG_JSON: JSON.stringify(flags),
    ...(o.config ? { LOOPSMITH_CONFIG: resolve(o.config) } : {}),
  };
  let client: Client | undefined;
  let keeper: ReturnType<typeof stackKeeper> | undefined;
  let machineAt: { refMs: number; cpu: CpuTimes } | undefined;
  let machine: MachineState | undefined;
  let utility: Map<string, number | null> | undefined;
  const progress = progressReporter({
    total: runCases.length * arms.length,
    already: runCases.length * arms.length - todo.length,
    json: !!o.json,
  });
  try {
    client = await openClient({ config: stackConfig, log, env });
    keeper = stackKeeper(client, stackConfig, env, log);
    const run: Run = {
      meta,
      out,
      resultsPath,
      client,
      options: o,
      log,
      abort: abort.signal,
      ensureStack: keeper.ensure,
    };
    // The machine's state over the tasks: the reference workload first, then CPU time from here.
    machineAt = { refMs: referenceMs(), cpu: cpuTimes() };
    const queue = new PQueue({ concurrency: o.concurrency ?? 4 });
    for (const t of todo) {
      void queue.add(async () => {
        if (abort.signal.aborted) return;
        const line = await runOne(run, t.c, t.index, t.arm);
        if (line) progress.done(line);
      });
    }
    await queue.onIdle();
    // The utility of the memories shown, now that every task of the run has ended.
    if (meta.memory !== "off") utility = await readMemoryUtility(client, log);
  } finally {
    keeper?.quiet();
    if (machineAt) machine = machineState(machineAt.refMs, machineAt.cpu, cpuTimes());
    progress.stop();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    // The restarted services first, then the client's own stack (NATS last).
    await keeper?.stop();
    await client?.close();
  }
  const summary = writeReports({ meta, out, resultsPath }, o, loaded.skipped, new Date(), machine, utility);
  process.stdout.write(o.json ? `${jsonLine({ kind: "summary", ...summary })}\n` : `${summaryText(summary, out)}\n`);
  return abort.signal.aborted ? 130 : 0;
}
