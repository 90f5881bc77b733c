/**
 * The commands of a generation, run in the sandbox through the executor: the check on the
 * parent, and the benchmark on the parent and on the candidate, interleaved. The command
 * lines come from the run's settings (never from the candidate), and the candidate's files
 * are laid over the PARENT's snapshot, so benchmark code and data are always the parent's:
 * a candidate that changed them was already rejected as `protected`.
 */
import {
  idempotencyKey,
  summarizeTests,
  type CheckCounts,
  type ExecutionRequest,
  type ExecutionResult,
  type FileChange,
  type ImproveRequest,
} from "@loopsmith/shared/contracts";
import { ownerOfTask } from "@loopsmith/shared/bus";
import { casesFromTests, parseBenchOutput, type CaseRun } from "./bench-output.js";
import type { Tree } from "./state.js";

/** Memory of a check or benchmark run, in MiB. */
export const COMMAND_MEMORY_MB = 1_024;
/** Sandbox failures of one command retried before the generation ends with `error`. */
const SANDBOX_RETRIES = 2;

/** What the commands need: the executor call and the generation's identity. */
export interface CommandContext {
  execute(req: ExecutionRequest): Promise<ExecutionResult>;
  request: ImproveRequest;
  /** The generation's task id (`<runId>-gen-<N>`) and number. */
  taskId: string;
  generation: number;
  setupCommand: string;
}

/** A candidate to run: the parent's tree with these files laid over it and these removed. */
export interface Overlay {
  files: FileChange[];
  deleted: string[];
}

/**
 * Runs one command line over `parent` (+ `overlay`). `step` names it in the idempotency key
 * (`attempt` = the repeat), so a resumed generation gets the executor's recorded answer.
 * @throws LoopsmithError from the executor call; a result still `sandbox_error` after the retries is returned as it is
 */
export async function runCommand(
  ctx: CommandContext,
  step: string,
  shell: string,
  parent: Tree,
  overlay: Overlay | undefined,
  attempt: number,
): Promise<ExecutionResult> {
  let result: ExecutionResult | undefined;
  for (let retry = 0; retry <= SANDBOX_RETRIES; retry++) {
    const req: ExecutionRequest = {
      v: 1,
      taskId: ctx.taskId,
      iteration: ctx.generation,
      idempotencyKey: idempotencyKey(ctx.taskId, ctx.generation, step, attempt * (SANDBOX_RETRIES + 1) + retry),
      language: ctx.request.language,
      files: overlay?.files ?? [],
      base: {
        snapshot: parent.snapshot,
        owner: ownerOfTask(ctx.request),
        commit: parent.commit,
        deleted: overlay?.deleted ?? [],
        setupCommand: ctx.setupCommand,
      },
      shell,
      timeoutMs: ctx.request.settings.commandTimeoutMs,
      memoryMb: COMMAND_MEMORY_MB,
    };
    result = await ctx.execute(req);
    if (result.status !== "sandbox_error") return result;
  }
  return result as ExecutionResult;
}

/** The test counts of a check run. */
export function checkCounts(result: Pick<ExecutionResult, "status" | "tests" | "summary">): CheckCounts {
  const s = result.summary ?? summarizeTests(result.tests);
  return { status: result.status, total: s.total, passed: s.passed, failed: s.failed + s.error, skipped: s.skipped };
}

/**
 * The benchmark's command line: the run's `bench`, and, when the run names a JUnit file
 * (`benchJunit`), a copy of it to `$LOOPSMITH_JUNIT` afterwards, where the sandbox reads JUnit;
 * the benchmark's exit status is kept.
 */
export function benchShell(bench: string, junit: string | undefined): string {
  if (!junit) return bench;
  const quoted = `'${junit.replace(/'/g, "'\\''")}'`;
  // A subshell, so an `exit` in the benchmark ends the benchmark, not the copy after it.
  return `(\n${bench}\n)\nstatus=$?\ncp -f -- ${quoted} "$LOOPSMITH_JUNIT" 2>/dev/null\nexit $status`;
}

/** One benchmark run read as cases, or why it could not be. */
export type BenchRead =
  { ok: true; cases: CaseRun[] } | { ok: false; error: string; status: ExecutionResult["status"] };

/**
 * Reads a benchmark run: its stdout (`json`) or its JUnit cases (`junit`). A run that timed
 * out, ran out of memory or could not start has no cases, whatever it printed; nor has one
 * whose verdict the sandbox saw forged (`tampering`: a JUnit benchmark run by pytest).
 */
export function readBench(result: ExecutionResult, format: "json" | "junit"): BenchRead {
  if (
    ["timeout", "oom", "output_limit", "killed", "sandbox_error", "blocked", "command_not_found", "tampering"].includes(
      result.status,
    )
  ) {
    return {
      ok: false,
      status: result.status,
      error: `the benchmark run ended with ${result.status}${result.reason ? ` (${result.reason})` : ""}`,
    };
  }
  const read = format === "json" ? parseBenchOutput(result.stdout) : casesFromTests(result.tests);
  if (read.ok) return read;
  const tail = result.stderr.trim().split("\n").slice(-3).join(" | ");
  return { ok: false, status: result.status, error: `${read.error}${tail ? ` (stderr: ${tail.slice(0, 300)})` : ""}` };
}

/**
 * The benchmark `repeats` times on each side, interleaved (parent, candidate, parent, …), so
 * drift in the machine's speed or state hits both sides alike. After each repeat of both sides
 * but the last, `enough(parentRuns, candidateRuns)` may end the benchmark early
 * (`futile` in `decision.ts`, when the evidence already rejects).
 * @returns each side's runs, or the first run that could not be read and on which side
 */
export async function benchBoth(
  ctx: CommandContext,
  parent: Tree,
  candidate: Overlay,
  onRun: (side: "parent" | "candidate", repeat: number) => void,
  enough?: (parent: CaseRun[][], candidate: CaseRun[][]) => boolean,
): Promise<
  | { ok: true; parent: CaseRun[][]; candidate: CaseRun[][] }
  | { ok: false; side: "parent" | "candidate"; error: string; status: string }
> {
  const { benchFormat, repeats } = ctx.request.settings;
  if (ctx.request.settings.bench === undefined) throw new Error("benchBoth: the run has no benchmark");
  const bench = benchShell(ctx.request.settings.bench, ctx.request.settings.benchJunit);
  const sides: { parent: CaseRun[][]; candidate: CaseRun[][] } = { parent: [], candidate: [] };
  for (let r = 0; r < repeats; r++) {
    for (const side of ["parent", "candidate"] as const) {
      onRun(side, r + 1);
      const result = await runCommand(
        ctx,
        side === "parent" ? "bench_parent" : "bench_candidate",
        bench,
        parent,
        side === "candidate" ? candidate : undefined,
        r,
      );
      const read = readBench(result, benchFormat);
      if (!read.ok) return { ok: false, side, error: read.error, status: read.status };
      sides[side].push(read.cases);
    }
    if (r + 1 < repeats && enough?.(sides.parent, sides.candidate)) break;
  }
  return { ok: true, ...sides };
}
