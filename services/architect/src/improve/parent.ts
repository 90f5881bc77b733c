/**
 * The base commit measured on its own, before any generation: what a dry run shows of the
 * parent, and all a `measureOnly` run does (`loopsmith metrics`). The same sandbox runs as a
 * generation's: the quality metrics through {@link measureOnce} (the measuring script), or the
 * benchmark once through {@link readBench}; with `measureOnly` and a check, the check too.
 */
import { ownerOfTask } from "@loopsmith/shared/bus";
import { type ParentMeasure } from "@loopsmith/shared/contracts";
import { detectCommands, listTree, readBaseFile } from "../repo/context.js";
import { benchShell, checkCounts, readBench, runCommand, type BenchRead, type CommandContext } from "./commands.js";
import { generationTaskId, type GenerationDeps } from "./generation.js";
import { measureOnce, metricFigures } from "./metrics.js";
import type { ImproveState } from "./state.js";

/**
 * The command context of the runs on the base parent before generation 1 (calibration,
 * measuring): task id `<runId>-gen-0`, so a resumed run gets the executor's recorded answers;
 * the setup command is the request's, else the one detected in the parent's tree.
 */
export async function parentContext(
  state: ImproveState,
  io: Pick<GenerationDeps, "execute" | "tree">,
): Promise<CommandContext> {
  const { request } = state;
  const root = await io.tree(state.parent.snapshot, ownerOfTask(request));
  const detected = detectCommands(listTree(root), (p) => readBaseFile(root, p));
  return {
    execute: io.execute,
    request,
    taskId: generationTaskId(request.runId, 0),
    generation: 0,
    setupCommand: request.repo.setupCommand ?? detected.setupCommand ?? "",
  };
}

/** One benchmark run as figures: its cases, how many passed, the pass rate and the mean score. */
export function benchFigure(
  read: BenchRead,
  command: string,
  format: "json" | "junit",
): NonNullable<ParentMeasure["bench"]> {
  if (!read.ok) return { command, format, status: "unavailable", cases: 0, passed: 0, reason: read.error };
  const passed = read.cases.filter((c) => c.pass).length;
  const scores = read.cases.flatMap((c) => (c.score === undefined ? [] : [c.score]));
  return {
    command,
    format,
    status: "measured",
    cases: read.cases.length,
    passed,
    passRate: read.cases.length ? (100 * passed) / read.cases.length : 0,
    ...(scores.length ? { meanScore: scores.reduce((a, b) => a + b, 0) / scores.length, scored: scores.length } : {}),
  };
}

/**
 * Measures the run's base parent once: the benchmark when the run has one, else the enabled
 * quality metrics; with `measureOnly` and a check command, the check's counts as well. What
 * cannot be measured is `unavailable` with its reason, not an error.
 * @throws LoopsmithError from the executor call (retryable ones: the run resumes here)
 */
export async function measureParent(
  state: ImproveState,
  io: Pick<GenerationDeps, "execute" | "tree">,
): Promise<ParentMeasure> {
  const started = Date.now();
  const { request } = state;
  const s = request.settings;
  const ctx = await parentContext(state, io);
  const measure: Omit<ParentMeasure, "ms"> = { tree: state.parent.commit, language: request.language };
  if (s.bench !== undefined) {
    const result = await runCommand(
      ctx,
      "measure_bench",
      benchShell(s.bench, s.benchJunit),
      state.parent,
      undefined,
      0,
    );
    measure.bench = benchFigure(readBench(result, s.benchFormat), s.bench, s.benchFormat);
  } else {
    measure.metrics = metricFigures(
      await measureOnce(ctx, state.parent, undefined, "measure_metrics", 0),
      s.benchmarks,
    );
  }
  if (request.measureOnly && s.check !== undefined) {
    const counts = checkCounts(await runCommand(ctx, "check_parent", s.check, state.parent, undefined, 0));
    measure.check = { command: s.check, counts };
  }
  return { ...measure, ms: Date.now() - started };
}

/**
 * One line per figure, for the run's event: `tests 100 % (4 of 4; pytest 8.3.5)`,
 * `lint 2 findings (pyflakes 3.2.0)`, `type_errors unavailable: …`, then the benchmark and the check.
 */
export function parentLines(m: ParentMeasure): string[] {
  const n = (x: number): string => String(Number(x.toFixed(2)));
  const lines: string[] = [];
  if (m.bench) {
    const b = m.bench;
    lines.push(
      b.status === "measured"
        ? `benchmark: ${b.passed} of ${b.cases} case(s) pass (${n(b.passRate ?? 0)} %)${b.meanScore !== undefined ? `, mean score ${n(b.meanScore)} over ${b.scored} scored case(s)` : ""}`
        : `benchmark unavailable: ${b.reason ?? "not measured"}`,
    );
  }
  for (const f of m.metrics ?? []) {
    if (f.status !== "measured") lines.push(`${f.metric} unavailable: ${f.reason ?? "not measured"}`);
    else {
      // Outcomes show how many of their cases pass; a count of findings is its own value.
      const cases = f.passing !== undefined ? `${f.passing} of ${f.cases}` : "";
      const detail = [cases, f.tool].filter(Boolean).join("; ");
      lines.push(`${f.metric} ${n(f.value ?? 0)} ${f.unit}${detail ? ` (${detail})` : ""}`);
    }
  }
  if (m.check)
    lines.push(
      `check \`${m.check.command}\`: ${m.check.counts.status}, ${m.check.counts.passed} of ${m.check.counts.total} test(s) passed`,
    );
  return lines;
}
