/**
 * What the SWE-bench run and its agent part (agent.ts) share: the command's options, the
 * run's metadata, the result line of a grade, and writing an instance's records. Apart from
 * run.ts so the agent part, which run.ts loads only for an agent run, does not import it back.
 */
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import { z } from "zod";
import type { BenchArm, BenchResult, ProviderLabel } from "../types.js";
import type { EnvFile, Grade, Grader, SweInstance } from "@loopsmith/evals";

/** Options of `loopsmith bench --format swe-bench`. */
export interface SweBenchOptions {
  dataset: string;
  /** The folder of bundles or bare clones (`owner__name.bundle`, `owner__name.git`, `owner__name`). */
  repos?: string;
  /** An environment file over the built-in spec (env.ts). */
  env?: string;
  /** Grade the reference patches. */
  gold?: boolean;
  /** Grade empty patches. */
  empty?: boolean;
  /** Grade a predictions file. */
  predictions?: string;
  /** Instance ids (exact). */
  ids?: string[];
  limit?: number;
  /** Instances in flight at once. @defaultValue 2 */
  concurrency?: number;
  out?: string;
  resume?: boolean;
  /** A test run's wall-clock limit, ms. @defaultValue 300000 */
  testTimeoutMs?: number;
  /**
   * The image each instance runs in: `official` (the harness's
   * `swebench/sweb.eval.x86_64.<id>:latest`), or a template of `{instance_id}`, `{repo}`,
   * `{version}`; an instance's `image_name` wins. Absent: loopsmith's sandbox image.
   */
  images?: string;
  config?: string;
  json?: boolean;
  /** Agent run: `on`, `off` or `ab` (each instance with memory off, then on). @defaultValue "on" */
  memory?: "on" | "off" | "ab";
  /** Agent run: a folder of scripted transcripts, `<instance_id>.json`. */
  script?: string;
  /** Agent run: add `hints_text` to the goal. */
  hints?: boolean;
  provider?: string;
  model?: string;
  baseUrl?: string;
  transcript?: string;
  maxIterations?: number;
  /** Agent run: wall-clock limit of one task, ms. @defaultValue 1800000 */
  taskTimeoutMs?: number;
}

/** Where a run's patches come from. */
export type PatchSource = "gold" | "empty" | "predictions" | "agent";

/** What a run's folder records about it, so `--resume` continues the same run. */
export const SweRunMeta = z.object({
  v: z.literal(1),
  kind: z.literal("swe-bench"),
  runId: z.string(),
  source: z.enum(["gold", "empty", "predictions", "agent"]),
  dataset: z.string(),
  memory: z.enum(["on", "off", "ab"]),
  provider: z.object({ label: z.enum(["model", "scripted", "simulated"]), name: z.string(), model: z.string() }),
  caseIds: z.array(z.string()),
  startedAt: z.string(),
});
export type SweRunMeta = z.infer<typeof SweRunMeta>;

/** One result line from a grade. */
export function gradeLine(
  g: Grade,
  o: {
    runId: string;
    inst: SweInstance;
    arm: BenchArm;
    taskId: string;
    label: ProviderLabel;
    wallMs: number;
    /** The agent task's figures, when an agent made the patch. */
    task?: {
      iterations: number;
      steps: number;
      tokensIn: number;
      tokensOut: number;
      costUsd: number;
      passed: boolean;
      attempts: number;
    };
    error?: string;
  },
): BenchResult {
  const counts = (t: { passed: number; total: number }) => ({ passed: t.passed, total: t.total });
  const error = o.error ?? g.message;
  // The code the summary counts infrastructure failures by: the test run's own status (a
  // missing image is a sandbox_error), else the grade's.
  const errorCode =
    g.status === "error" ? (g.execution === "timeout" ? "run_timeout" : (g.execution ?? "grade_error")) : undefined;
  return {
    v: 1,
    runId: o.runId,
    caseId: o.inst.instance_id,
    arm: o.arm,
    taskId: o.taskId,
    status: g.status === "resolved" ? "passed" : g.status === "error" ? "error" : "failed",
    stopReason: g.status,
    passed: g.status === "resolved",
    visiblePassed: o.task ? o.task.passed : g.status === "resolved",
    hidden: {
      passed: g.failToPass.passed + g.passToPass.passed,
      total: g.failToPass.total + g.passToPass.total,
    },
    iterations: o.task?.iterations ?? 0,
    tokensIn: o.task?.tokensIn ?? 0,
    tokensOut: o.task?.tokensOut ?? 0,
    costUsd: o.task?.costUsd ?? 0,
    wallMs: o.wallMs,
    provider: o.label,
    attempts: o.task?.attempts ?? 1,
    ...(error ? { error } : {}),
    ...(errorCode ? { errorCode } : {}),
    swe: {
      status: g.status,
      failToPass: counts(g.failToPass),
      passToPass: counts(g.passToPass),
      steps: o.task?.steps ?? 0,
      testMs: g.testMs,
    },
    finishedAt: new Date().toISOString(),
  };
}

/** A grade for an instance that could not be graded (no repository, no test command, ...). */
export function errorGrade(inst: SweInstance, raw: string): Grade {
  const message = raw.trim();
  const none = (tests: string[]) => ({ passed: 0, total: tests.length, failing: tests.slice(0, 20) });
  return {
    status: "error",
    failToPass: none(inst.FAIL_TO_PASS),
    passToPass: none(inst.PASS_TO_PASS),
    testMs: 0,
    log: message,
    message,
  };
}

/** What one instance's run needs. */
export interface InstanceContext {
  meta: SweRunMeta;
  out: string;
  grader: Grader;
  env: EnvFile;
  log: Logger;
  signal: AbortSignal;
}

/**
 * Appends an instance's line and its prediction, and writes its test log, in the run's
 * folder. With `--memory ab` each arm has its own predictions file (`predictions.<arm>.jsonl`)
 * and log (`logs/<id>.<arm>.log`), since the official shape has one line per instance.
 */
export function recordInstance(
  out: string,
  ab: boolean,
  line: BenchResult,
  prediction: { model: string; patch: string },
  testLog: string,
): void {
  appendFileSync(join(out, "results.jsonl"), `${JSON.stringify(line)}\n`);
  appendFileSync(
    join(out, ab ? `predictions.${line.arm}.jsonl` : "predictions.jsonl"),
    `${JSON.stringify({ instance_id: line.caseId, model_name_or_path: prediction.model, model_patch: prediction.patch })}\n`,
  );
  const name = line.caseId.replace(/[^\w.-]/g, "_");
  writeFileSync(join(out, "logs", ab ? `${name}.${line.arm}.log` : `${name}.log`), testLog);
}
