/**
 * `loopsmith bench --format swe-bench`: grades SWE-bench instances by
 * the official rule (grade.ts) and writes the run's folder:
 *
 * - `results.jsonl`: one {@link BenchResult} a line as each instance ends (its `swe` field
 *   holds the grade), so `--resume` continues an interrupted run;
 * - `predictions.jsonl`: the graded patches in the official shape (`instance_id`,
 *   `model_name_or_path`, `model_patch`), for the official harness to grade the same run;
 * - `logs/<instance_id>.log`: the test run's output;
 * - `summary.json`, `report.md`, `report.html` (the other formats' reports; pass@1 is the
 *   resolved rate).
 *
 * Where the patches come from: `--gold` (the reference `patch`, must resolve 100 %),
 * `--empty` (no change, must resolve 0 %), `--predictions <file>` (any agent's, offline), or
 * the agent run (agent.ts): each instance a repo-mode task of the running stack.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join, resolve } from "node:path";
import PQueue from "p-queue";
import type { Logger } from "pino";
import { LoopsmithError, loadConfig } from "@loopsmith/shared/runtime";
import { jsonLine, printable } from "../../terminal.js";
import { progressReporter } from "../progress.js";
import { reportHtml, reportMarkdown } from "../report.js";
import { readResults } from "../results.js";
import { lastResults, summarize } from "../summary.js";
import type { BenchArm, BenchResult, BenchSummary, ProviderLabel } from "../types.js";
import { cpuTimes, machineState, referenceMs } from "../machine.js";
import {
  BUILTIN_ENV,
  createGrader,
  instanceImage,
  loadEnvFile,
  loadInstances,
  loadPredictions,
  mergeEnv,
  resolveEnv,
  type EnvFile,
  type Grade,
  type SweInstance,
} from "@loopsmith/evals";
import {
  SweRunMeta,
  errorGrade,
  gradeLine,
  recordInstance,
  type InstanceContext,
  type PatchSource,
  type SweBenchOptions,
} from "./record.js";

/**
 * The sentence a run without a model carries (terminal, summary.json, reports): gold, empty and
 * scripted agent runs; none for predictions or a model's run.
 */
export function noticeOf(source: PatchSource, label: ProviderLabel): string | undefined {
  if (source === "gold")
    return "GOLD RUN: the reference patches are graded; no model is called. Every instance must resolve, or the environment is wrong.";
  if (source === "empty")
    return "EMPTY RUN: empty patches are graded; no model is called. No instance may resolve, or the tests do not test the fix.";
  if (source === "predictions") return undefined;
  return label === "model"
    ? undefined
    : "SCRIPTED RUN: the agent's tool calls are replayed from scripted transcripts; no model is called.";
}

/** The patch source the flags name. @throws LoopsmithError `bad_request` for more than one */
export function patchSource(o: Pick<SweBenchOptions, "gold" | "empty" | "predictions">): PatchSource {
  const named = [o.gold && "--gold", o.empty && "--empty", o.predictions && "--predictions"].filter(Boolean);
  if (named.length > 1) throw new LoopsmithError("bad_request", `${named.join(" and ")} exclude each other`);
  return o.gold ? "gold" : o.empty ? "empty" : o.predictions ? "predictions" : "agent";
}

/** The instances of the run: `ids` in dataset order, then the first `limit`. */
export function selectInstances(all: SweInstance[], o: Pick<SweBenchOptions, "ids" | "limit">): SweInstance[] {
  let out = all;
  if (o.ids?.length) {
    const missing = o.ids.filter((id) => !all.some((i) => i.instance_id === id));
    if (missing.length) throw new LoopsmithError("not_found", `no instance ${missing.join(", ")} in the dataset`);
    out = all.filter((i) => o.ids?.includes(i.instance_id));
  }
  return o.limit ? out.slice(0, o.limit) : out;
}

/** The run's metadata: a new run, or the one in `out` for `--resume` (which must match). */
function openRun(
  o: SweBenchOptions,
  instances: SweInstance[],
  source: PatchSource,
  provider: SweRunMeta["provider"],
): { meta: SweRunMeta; out: string } {
  const memory = source === "agent" ? (o.memory ?? "on") : "off";
  if (o.resume) {
    if (!o.out) throw new LoopsmithError("bad_request", "--resume needs --out <the run's folder>");
    const metaPath = join(o.out, "run.json");
    let meta: SweRunMeta;
    try {
      meta = SweRunMeta.parse(JSON.parse(readFileSync(metaPath, "utf8")));
    } catch (err) {
      throw new LoopsmithError(
        "bad_request",
        `--resume: ${metaPath} is not a SWE-bench run's record: ${(err as Error).message}`,
        { cause: err },
      );
    }
    if (meta.source !== source || meta.memory !== memory)
      throw new LoopsmithError(
        "bad_request",
        `--resume: the run in ${o.out} graded ${meta.source} patches (memory ${meta.memory}), not ${source} (memory ${memory})`,
      );
    return { meta, out: o.out };
  }
  const runId = randomBytes(5).toString("hex");
  const out = o.out ?? join("bench-runs", runId);
  if (existsSync(join(out, "results.jsonl")))
    throw new LoopsmithError("bad_request", `${out} already holds a run; use --resume to continue it or another --out`);
  mkdirSync(join(out, "logs"), { recursive: true });
  const meta: SweRunMeta = {
    v: 1,
    kind: "swe-bench",
    runId,
    source,
    dataset: resolve(o.dataset),
    memory,
    provider,
    caseIds: instances.map((i) => i.instance_id),
    startedAt: new Date().toISOString(),
  };
  writeFileSync(join(out, "run.json"), `${JSON.stringify(meta, null, 2)}\n`);
  return { meta, out };
}

/** The resolved rate and counts by status, in a few lines for the terminal. */
export function sweSummaryText(summary: BenchSummary, results: readonly BenchResult[], out: string): string {
  const lines: string[] = [];
  if (summary.notice) lines.push(summary.notice);
  const last = lastResults(results);
  for (const arm of ["off", "on"] as const) {
    const a = summary.arms[arm];
    if (!a) continue;
    const rs = last.filter((r) => r.arm === arm);
    const by = (s: string) => rs.filter((r) => r.swe?.status === s).length;
    const label = summary.memory === "ab" ? `memory ${arm}: ` : "";
    lines.push(
      `${label}resolved ${a.passed}/${a.tasks} (${(a.passAt1 * 100).toFixed(1)} %); unresolved ${by("unresolved")}, patch_failed ${by("patch_failed")}, error ${by("error")}` +
        (summary.provider.label === "model" && summary.provider.name !== "predictions"
          ? `; tokens/task ${Math.round(a.tokensInPerTask)} in ${Math.round(a.tokensOutPerTask)} out, $${a.usdPerTask.toFixed(4)}/task`
          : ""),
    );
  }
  lines.push(`${(summary.wallMs / 1000).toFixed(1)} s (concurrency ${summary.concurrency})`);
  // With --memory ab each arm has its own predictions file (record.ts).
  const predictions =
    summary.memory === "ab" ? ["predictions.off.jsonl", "predictions.on.jsonl"] : ["predictions.jsonl"];
  lines.push(
    `wrote ${["results.jsonl", ...predictions, "summary.json", "report.md", "report.html"].map((f) => join(out, f)).join(", ")}`,
  );
  return lines.join("\n");
}

/** The environment spec: built-in, then `--env` over it. */
export function envOf(o: Pick<SweBenchOptions, "env">): EnvFile {
  return o.env ? mergeEnv(BUILTIN_ENV, loadEnvFile(o.env)) : BUILTIN_ENV;
}

/** The patch an offline run grades for `inst`. */
function patchOf(source: PatchSource, inst: SweInstance, predictions?: Map<string, { model_patch: string }>): string {
  if (source === "gold") return inst.patch;
  if (source === "empty") return "";
  return predictions?.get(inst.instance_id)?.model_patch ?? "";
}

/** Grades `todo` offline, `--concurrency` at a time; each line goes to the run's folder and `onLine`. */
async function gradeAll(
  ctx: InstanceContext,
  todo: { inst: SweInstance; arm: BenchArm; index: number }[],
  patch: (inst: SweInstance) => string,
  onLine: (line: BenchResult) => void,
  concurrency = 2,
): Promise<void> {
  const { meta, grader, signal } = ctx;
  const queue = new PQueue({ concurrency });
  for (const t of todo)
    void queue.add(async () => {
      if (signal.aborted) return;
      const started = Date.now();
      let grade: Grade;
      try {
        grade = await grader.grade(t.inst, patch(t.inst), signal);
      } catch (err) {
        if (signal.aborted) return;
        grade = errorGrade(t.inst, `${(err as LoopsmithError).code ?? "internal"}: ${(err as Error).message}`);
      }
      if (signal.aborted) return;
      const line = gradeLine(grade, {
        runId: meta.runId,
        inst: t.inst,
        arm: t.arm,
        taskId: `swe-${meta.runId}-${t.index}`,
        label: meta.provider.label,
        wallMs: Date.now() - started,
      });
      recordInstance(
        ctx.out,
        meta.memory === "ab",
        line,
        { model: meta.provider.model, patch: patch(t.inst) },
        grade.log,
      );
      onLine(line);
    });
  await queue.onIdle();
}

/**
 * The instances a run grades: the dataset's, selected (`--ids`, `--limit`) and, with
 * `--predictions`, only those that have one (the others are told on stderr).
 * @throws LoopsmithError `not_found` for a prediction of an instance the dataset lacks, `bad_request` when none is left
 */
function instancesToGrade(o: SweBenchOptions): {
  instances: SweInstance[];
  predictions?: ReturnType<typeof loadPredictions>;
} {
  const all = loadInstances(o.dataset);
  let instances = selectInstances(all, o);
  const predictions = o.predictions ? loadPredictions(o.predictions) : undefined;
  if (predictions) {
    const unknown = [...predictions.keys()].filter((id) => !all.some((i) => i.instance_id === id));
    if (unknown.length)
      throw new LoopsmithError("not_found", `${o.predictions}: no instance ${unknown.join(", ")} in ${o.dataset}`);
    const without = instances.filter((i) => !predictions.has(i.instance_id));
    if (without.length)
      process.stderr.write(
        `loopsmith bench: ${without.length} instance(s) have no prediction and are not graded: ${without
          .slice(0, 5)
          .map((i) => printable(i.instance_id))
          .join(", ")}${without.length > 5 ? ", ..." : ""}\n`,
      );
    instances = instances.filter((i) => predictions.has(i.instance_id));
  }
  if (instances.length === 0) throw new LoopsmithError("bad_request", `no instance to grade in ${o.dataset}`);
  return { instances, ...(predictions ? { predictions } : {}) };
}

/** Writes summary.json, report.md and report.html, and prints the summary (or its JSON line). */
function writeSweReports(
  o: SweBenchOptions,
  meta: SweRunMeta,
  out: string,
  notice: string | undefined,
  machine: ReturnType<typeof machineState>,
): void {
  const results = readResults(join(out, "results.jsonl"));
  const summary = summarize({
    results,
    runId: meta.runId,
    dataset: meta.dataset,
    format: "swe-bench",
    provider: meta.provider,
    ...(notice ? { notice } : {}),
    memory: meta.memory,
    concurrency: o.concurrency ?? 2,
    startedAt: meta.startedAt,
    finishedAt: new Date().toISOString(),
    skipped: [],
    machine,
  });
  writeFileSync(join(out, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
  writeFileSync(join(out, "report.md"), reportMarkdown(summary, results));
  writeFileSync(join(out, "report.html"), reportHtml(summary, results));
  process.stdout.write(
    o.json ? `${jsonLine({ kind: "summary", ...summary })}\n` : `${sweSummaryText(summary, results, out)}\n`,
  );
}

/**
 * Runs `loopsmith bench --format swe-bench`.
 * @returns exit code 0 when the run completed (whatever its resolved rate), 130 when interrupted
 * @throws LoopsmithError `bad_request` (no `--repos`, an unreadable or invalid dataset,
 *   predictions or environment file, a bad `--resume`, exclusive flags), `not_found` (an
 *   unknown `--ids` entry, a prediction for an instance the dataset lacks), `unavailable`
 *   (no Docker engine)
 */
export async function sweBenchCommand(o: SweBenchOptions, log: Logger): Promise<number> {
  if (!o.repos)
    throw new LoopsmithError("bad_request", "--format swe-bench needs --repos <dir> (bundles or bare clones)");
  const source = patchSource(o);
  const { instances, predictions } = instancesToGrade(o);
  const env = envOf(o);
  // Every instance needs a test command before anything starts.
  // Every instance's environment and image, checked before anything runs.
  for (const i of instances) instanceImage(i, resolveEnv(env, i.repo, i.version), o.images);

  const config = loadConfig({ ...(o.config ? { file: o.config } : {}) });
  const firstModel = predictions?.values().next().value?.model_name_or_path;
  const provider: SweRunMeta["provider"] =
    source === "gold"
      ? { label: "scripted", name: "gold", model: "gold" }
      : source === "empty"
        ? { label: "scripted", name: "empty", model: "empty" }
        : source === "predictions"
          ? { label: "model", name: "predictions", model: firstModel || "unknown" }
          : await (await import("./agent.js")).agentProvider(o, config);
  const { meta, out } = openRun(o, instances, source, provider);
  mkdirSync(join(out, "logs"), { recursive: true });
  const notice = noticeOf(source, provider.label);
  if (notice) process.stderr.write(`${notice}\n`);
  const arms: BenchArm[] = meta.memory === "ab" ? ["off", "on"] : [meta.memory];
  const resultsPath = join(out, "results.jsonl");
  const done = new Set(readResults(resultsPath).map((r) => `${r.arm}\u0000${r.caseId}`));
  const runInstances = instances.filter((i) => meta.caseIds.includes(i.instance_id));
  const todo = runInstances
    .flatMap((inst) => arms.map((arm) => ({ inst, arm, index: meta.caseIds.indexOf(inst.instance_id) })))
    .filter((t) => !done.has(`${t.arm}\u0000${t.inst.instance_id}`));

  const abort = new AbortController();
  const onSignal = (): void => {
    if (!abort.signal.aborted)
      process.stderr.write("loopsmith bench: interrupted; stopping the running instances (resume with --resume)\n");
    abort.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  const total = runInstances.length * arms.length;
  const progress = progressReporter({ total, already: total - todo.length, json: !!o.json });
  // The machine's state over the instances (the reference workload, then CPU time).
  const machineAt = { refMs: referenceMs(), cpu: cpuTimes() };
  try {
    if (todo.length) {
      const grader = await createGrader({
        config,
        log,
        env,
        reposDir: o.repos,
        ...(o.testTimeoutMs !== undefined ? { testTimeoutMs: o.testTimeoutMs } : {}),
        ...(o.images ? { images: o.images } : {}),
      });
      try {
        const ctx: InstanceContext = { meta, out, grader, env, log, signal: abort.signal };
        if (source === "agent") {
          const { runAgentInstances } = await import("./agent.js");
          await runAgentInstances(ctx, o, config, todo, (line) => progress.done(line));
        } else
          await gradeAll(
            ctx,
            todo,
            (inst) => patchOf(source, inst, predictions),
            (line) => progress.done(line),
            o.concurrency ?? 2,
          );
      } finally {
        await grader.stop();
      }
    }
  } finally {
    progress.stop();
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
  writeSweReports(o, meta, out, notice, machineState(machineAt.refMs, machineAt.cpu, cpuTimes()));
  return abort.signal.aborted ? 130 : 0;
}
