/**
 * The agent run of `loopsmith bench --format swe-bench`: each instance becomes a repo-mode
 * task of the stack (the one `loopsmith up` started, or one started for the run), in agent
 * mode. The task sees the problem statement (and `hints_text` with `--hints`), the tracked
 * tree at `base_commit` (a snapshot: no `.git`, so no history) and the environment's test
 * command without test files; never `patch`, `test_patch` or the test lists. The task's
 * patch (`RepoChange.patch`) is the prediction, graded as the offline modes grade (grade.ts).
 *
 * Without a model (`--provider scripted`, or no key), `--script <dir>` (default: `scripts/`
 * beside the dataset) gives each instance its scripted transcript, `<instance_id>.json`: a
 * `loopsmith-script` whose `replies.agent` lists the turns (docs/SCRIPTS.md).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import PQueue from "p-queue";
import { LoopsmithError, loadConfig, type Config } from "@loopsmith/shared/runtime";
import {
  ScriptFile,
  snapshotName,
  type SandboxImage,
  type TaskEvent,
  type TaskInput,
  type TaskResult,
} from "@loopsmith/shared/contracts";
import { createProvider } from "@loopsmith/shared/llm";
import { putSnapshot } from "@loopsmith/shared/bus";
import { archiveCommit } from "../../repo.js";
import { openClient, type Client } from "../../client.js";
import { transcriptSteps } from "../../transcript-record.js";
import type { BenchArm, BenchResult } from "../types.js";
import { armPrefix } from "../tasks.js";
import {
  checkoutInstance,
  instanceImage,
  resolveEnv,
  setupCommandOf,
  type Grade,
  type SweInstance,
} from "@loopsmith/evals";
import {
  errorGrade,
  gradeLine,
  recordInstance,
  type InstanceContext,
  type SweBenchOptions,
  type SweRunMeta,
} from "./record.js";

/** Who answers the agent run: the flag, else the configured model when it has a key, else `scripted`. */
export async function agentProvider(o: SweBenchOptions, config: Config): Promise<SweRunMeta["provider"]> {
  const name =
    o.provider ??
    (config.llm.provider === "scripted" || (config.llm.provider === "anthropic" && !config.llm.apiKey)
      ? "scripted"
      : config.llm.provider);
  if (name === "scripted") return { label: "scripted", name: "scripted", model: "script:task" };
  const provider = { label: "model" as const, name, model: o.model ?? config.llm.model };
  const p = createProvider({
    config: loadConfig({ ...(o.config ? { file: o.config } : {}), flags: stackFlags(o, provider.label) }),
    log: (await import("@loopsmith/shared/runtime")).createLogger({ service: "cli", level: "warn" }),
  });
  if (p.verify) await p.verify();
  return provider;
}

/** The configuration flags the stack's services get. */
function stackFlags(o: SweBenchOptions, label: SweRunMeta["provider"]["label"]): Record<string, unknown> {
  const llm: Record<string, unknown> = {};
  if (label !== "model") llm.provider = "scripted";
  else {
    if (o.provider) llm.provider = o.provider;
    if (o.model) llm.model = o.model;
    if (o.baseUrl) llm.baseUrl = o.baseUrl;
  }
  return { llm };
}

/**
 * The scripted transcript of an instance: `<dir>/<instance_id>.json`, `dir` being `--script`
 * or `scripts/` beside the dataset; undefined when there is none.
 * @throws LoopsmithError `bad_request` when the file is not a `loopsmith-script`
 */
export function scriptOf(o: Pick<SweBenchOptions, "script" | "dataset">, id: string): ScriptFile | undefined {
  const path = join(o.script ?? join(dirname(o.dataset), "scripts"), `${id}.json`);
  if (!existsSync(path)) return undefined;
  const parsed = ScriptFile.safeParse(JSON.parse(readFileSync(path, "utf8")));
  if (!parsed.success)
    throw new LoopsmithError(
      "bad_request",
      `${path} is not a loopsmith-script: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  return parsed.data;
}

/** The goal of an instance: the problem statement, and the hints with `--hints`. */
export function goalOf(inst: SweInstance, hints: boolean): string {
  const text = inst.problem_statement.trim();
  return hints && inst.hints_text.trim() ? `${text}\n\nHints:\n${inst.hints_text.trim()}` : text;
}

/**
 * The task of one instance in one arm: repo mode, agent mode, the environment's test command
 * without test files. Nothing of `patch`, `test_patch` or the test lists goes in.
 */
export function agentTask(
  inst: SweInstance,
  o: {
    taskId: string;
    arm: BenchArm;
    runId: string;
    paired: boolean;
    testCommand: string;
    setupCommand: string;
    hints: boolean;
    maxIterations?: number;
    /** The task's test runs: wall-clock limit, ms (at most 600000); the floor of the one PREPARE derives. */
    runTimeoutMs: number;
    /** `--test-timeout`, ms: the limit of every test run, as given (no derived limit). */
    testTimeoutMs?: number;
    /** The instance's image (`instanceImage`); undefined: loopsmith's sandbox image. */
    image?: SandboxImage | undefined;
    script?: ScriptFile;
  },
): TaskInput {
  return {
    v: 1,
    taskId: o.taskId,
    goal: goalOf(inst, o.hints),
    language: "python",
    memory: o.arm,
    ...(o.paired && o.arm === "on" ? { memoryScope: armPrefix(o.runId, "on") } : {}),
    ...(o.script ? { script: o.script } : {}),
    limits: {
      runTimeoutMs: Math.min(o.runTimeoutMs, 600_000),
      memoryMb: 2048,
      ...(o.maxIterations !== undefined ? { maxIterations: o.maxIterations } : {}),
    },
    repo: {
      baseCommit: inst.base_commit,
      snapshot: snapshotName(inst.base_commit),
      name: inst.repo,
      testCommand: o.testCommand,
      setupCommand: o.setupCommand,
      mode: "agent",
      ...(o.testTimeoutMs !== undefined ? { testTimeoutMs: Math.min(o.testTimeoutMs, 600_000) } : {}),
      ...(o.image ? { image: o.image } : {}),
    },
    source: { kind: "user", id: inst.instance_id },
    submittedAt: new Date().toISOString(),
  };
}

/** What one instance's run shares with the others: the client, the run's options, the uploads. */
interface AgentRun {
  ctx: InstanceContext;
  o: SweBenchOptions;
  client: Client;
  /** Where instances are checked out. */
  work: string;
  /** The snapshot upload of each base commit, made once. */
  uploaded: Map<string, Promise<unknown>>;
}

/** A task's outcome for the line: the result (none on a timeout), its patch, an error text, the agent's steps. */
interface AgentOutcome {
  result?: TaskResult;
  patch: string;
  error?: string;
  steps: unknown[];
}

/**
 * Uploads the snapshot of `inst`'s base commit (the tracked tree, no .git) once per commit,
 * submits its agent task and waits for the result (cancelling the task on a timeout).
 * @returns the outcome; undefined when the run was interrupted
 * @throws LoopsmithError `bad_request` for a scripted run without the instance's transcript, or what the checkout, the upload or the submit throws
 */
async function solveInstance(
  run: AgentRun,
  inst: SweInstance,
  arm: BenchArm,
  taskId: string,
): Promise<AgentOutcome | undefined> {
  const { ctx, o, client } = run;
  const { meta, env, signal } = ctx;
  const e = resolveEnv(env, inst.repo, inst.version);
  if (!run.uploaded.has(inst.base_commit))
    run.uploaded.set(
      inst.base_commit,
      (async () => {
        const dir = await checkoutInstance(o.repos ?? "", inst, join(run.work, inst.base_commit));
        await putSnapshot(
          client.nc,
          snapshotName(inst.base_commit),
          await archiveCommit(dir, inst.base_commit),
          client.owner,
        );
      })(),
    );
  await run.uploaded.get(inst.base_commit);
  const script = meta.provider.label === "scripted" ? scriptOf(o, inst.instance_id) : undefined;
  if (meta.provider.label === "scripted" && !script)
    throw new LoopsmithError(
      "bad_request",
      `no scripted transcript for ${inst.instance_id} (looked in ${o.script ?? join(dirname(o.dataset), "scripts")})`,
    );
  const task = agentTask(inst, {
    taskId,
    arm,
    runId: meta.runId,
    paired: meta.memory === "ab",
    testCommand: e.testCmd,
    setupCommand: setupCommandOf(e),
    hints: !!o.hints,
    runTimeoutMs: o.testTimeoutMs ?? 300_000,
    ...(o.testTimeoutMs !== undefined ? { testTimeoutMs: o.testTimeoutMs } : {}),
    image: instanceImage(inst, e, o.images),
    ...(o.maxIterations !== undefined ? { maxIterations: o.maxIterations } : {}),
    ...(script ? { script } : {}),
  });
  await client.submit(task);
  const limit = AbortSignal.any([signal, AbortSignal.timeout(o.taskTimeoutMs ?? 1_800_000)]);
  const seen: TaskEvent[] = [];
  // The agent's steps, read from the messages its events carry (transcript-record.ts).
  const result = await client.result(taskId, {
    signal: limit,
    onEvent: (event) => {
      if (event.kind === "usage" || (event.kind === "step" && event.phase === "explore")) seen.push(event);
    },
  });
  const steps: unknown[] = transcriptSteps(seen);
  if (!result) {
    await client
      .cancel(taskId, signal.aborted ? "bench interrupted" : "bench task timeout", 3_000)
      .catch(() => undefined);
    if (signal.aborted) return undefined;
    return { patch: "", error: `timeout: no result within ${o.taskTimeoutMs ?? 1_800_000} ms`, steps };
  }
  return {
    result,
    patch: result.repo?.patch ?? "",
    ...(result.error ? { error: `${result.error.code}: ${result.error.message}` } : {}),
    steps,
  };
}

/** Writes one instance's line, its patch and grading log, and its steps (logs/<id>[.<arm>].steps.jsonl). */
function recordOutcome(
  ctx: InstanceContext,
  t: { inst: SweInstance; arm: BenchArm; taskId: string; started: number },
  grade: Grade,
  outcome: AgentOutcome,
): BenchResult {
  const { meta } = ctx;
  const { result, steps, error, patch } = outcome;
  const line = gradeLine(grade, {
    runId: meta.runId,
    inst: t.inst,
    arm: t.arm,
    taskId: t.taskId,
    label: meta.provider.label,
    wallMs: Date.now() - t.started,
    ...(result
      ? {
          task: {
            iterations: result.iterations,
            steps: steps.length,
            tokensIn: result.usage.total.inputTokens,
            tokensOut: result.usage.total.outputTokens,
            costUsd: result.usage.total.costUsd,
            passed: result.status === "passed",
            attempts: 1,
          },
        }
      : {}),
    ...(error ? { error } : {}),
  });
  recordInstance(ctx.out, meta.memory === "ab", line, { model: meta.provider.model, patch }, grade.log);
  const name = `${t.inst.instance_id.replace(/[^\w.-]/g, "_")}${meta.memory === "ab" ? `.${t.arm}` : ""}`;
  writeFileSync(join(ctx.out, "logs", `${name}.steps.jsonl`), steps.map((s) => `${JSON.stringify(s)}\n`).join(""));
  return line;
}

/**
 * Runs `todo` as agent tasks over one stack and grades each task's patch; each line goes to
 * the run's folder and `onLine` as it ends.
 * @throws LoopsmithError `unavailable` when no stack could be started
 */
export async function runAgentInstances(
  ctx: InstanceContext,
  o: SweBenchOptions,
  config: Config,
  todo: { inst: SweInstance; arm: BenchArm; index: number }[],
  onLine: (line: BenchResult) => void,
): Promise<void> {
  const { meta, grader, log, signal } = ctx;
  const flags = stackFlags(o, meta.provider.label);
  if (o.transcript) (flags.llm as Record<string, unknown>).transcriptPath = o.transcript;
  const stackConfig = loadConfig({ ...(o.config ? { file: o.config } : {}), flags });
  let client: Client | undefined;
  const work = await mkdtemp(join(tmpdir(), "loopsmith-swe-agent-"));
  try {
    client = await openClient({
      config: stackConfig,
      log,
      env: { LOOPSMITH_CONFIG_JSON: JSON.stringify(flags), ...(o.config ? { LOOPSMITH_CONFIG: o.config } : {}) },
    });
    const run: AgentRun = { ctx, o, client, work, uploaded: new Map() };
    const queue = new PQueue({ concurrency: o.concurrency ?? 2 });
    for (const { inst, arm, index } of todo)
      void queue.add(async () => {
        if (signal.aborted) return;
        const taskId = `${armPrefix(meta.runId, arm)}${index}`;
        const started = Date.now();
        let outcome: AgentOutcome | undefined;
        let grade: Grade;
        try {
          outcome = await solveInstance(run, inst, arm, taskId);
          if (!outcome) return;
          grade = await grader.grade(inst, outcome.patch, signal);
        } catch (err) {
          if (signal.aborted) return;
          grade = errorGrade(inst, `${(err as LoopsmithError).code ?? "internal"}: ${(err as Error).message}`);
        }
        if (signal.aborted) return;
        onLine(recordOutcome(ctx, { inst, arm, taskId, started }, grade, outcome ?? { patch: "", steps: [] }));
      });
    await queue.onIdle();
  } finally {
    await client?.close();
    await rm(work, { recursive: true, force: true });
  }
}
