/**
 * The repository's own quality metrics: what `improve` judges a generation
 * on when the run has no benchmark. The metrics are measured in the sandbox on the parent and
 * on the candidate ({@link measureBoth}: a script sent with the request, `measure-python.ts`
 * or `measure-node.ts`), then `judgeMetrics` (`metrics-judge.ts`) decides, a pure function:
 *
 * - a metric whose tool is missing or failed on either side is `unavailable`, with the reason,
 *   and takes no part (never a 0);
 * - a metric **regresses** when more of its cases broke than its tolerance (a test that passed
 *   fails, a new lint or type finding or suppression, a covered line no longer covered, a
 *   documented function undocumented, a module that no longer imports), or, for `complexity`,
 *   when its value moved the wrong way by more than its tolerance; and when the candidate
 *   changed the configuration of the metric's tool ({@link changedToolConfig}): a metric is
 *   measured under the parent's rules;
 * - a metric **improves** significantly when, for cases of a static analyser that gave the same
 *   cases in every repeat of each side (`deterministic`), more were fixed than broken; for cases
 *   of a run of the code (tests, coverage, imports), when the one-sided exact sign test on the
 *   cases is below its level (α_j of the run, split equally over the metrics with a weight,
 *   Bonferroni); for `complexity`, when deterministic and better, else a one-sided signed-rank
 *   test on the per-repeat differences;
 * - accepted when no metric regressed, the weighted improvement Σ w·s (s: fixed − broken over
 *   the cases compared; for complexity the relative change) is > 0, and some metric with a
 *   weight improved significantly. Else `metric_regressed` (naming the metrics) or
 *   `no_improvement`.
 */
import picomatch from "picomatch";
import { z } from "zod";
import {
  QUALITY_METRICS,
  type ExecutionResult,
  type FileChange,
  type GenerationReport,
  type ImproveSettings,
  type ParentMeasure,
  type QualityBenchmarks,
  type QualityMetric,
} from "@loopsmith/shared/contracts";
import { runCommand, type CommandContext, type Overlay } from "./commands.js";
import { MEASURE_PY, MEASURE_SCRIPT_PATH, METRICS_MARKER } from "./measure-python.js";
import { MEASURE_NODE, MEASURE_NODE_PATH } from "./measure-node.js";
import type { Tree } from "./state.js";

/** What a metric is and its defaults. */
export interface MetricDefaults {
  direction: "higher" | "lower";
  unit: string;
  /** `findings`: every case is a finding, gone = fixed, new = broken; `outcomes`: keyed pass/fail; `value`: no cases. */
  kind: "findings" | "outcomes" | "value";
  /** A static analyser of the tree (the same tree gives the same result). */
  static: boolean;
  /** `outcomes`: a case only on the candidate that fails counts as broken (a new failing test or module). */
  newFailingBreaks: boolean;
  weight: number;
  /** Cases (or the unit, for `value`) the metric may regress by. */
  tolerance: number;
  /** Seconds. */
  timeout: number;
}

/** The defaults of each metric (docs/USAGE.md's table). */
export const METRIC_DEFAULTS: Readonly<Record<QualityMetric, MetricDefaults>> = {
  tests: {
    direction: "higher",
    unit: "%",
    kind: "outcomes",
    static: false,
    newFailingBreaks: true,
    weight: 2,
    tolerance: 0,
    timeout: 300,
  },
  coverage: {
    direction: "higher",
    unit: "%",
    kind: "outcomes",
    static: false,
    newFailingBreaks: false,
    weight: 1,
    tolerance: 0,
    timeout: 300,
  },
  lint: {
    direction: "lower",
    unit: "findings",
    kind: "findings",
    static: true,
    newFailingBreaks: true,
    weight: 1,
    tolerance: 0,
    timeout: 120,
  },
  type_errors: {
    direction: "lower",
    unit: "errors",
    kind: "findings",
    static: true,
    newFailingBreaks: true,
    weight: 1,
    tolerance: 0,
    timeout: 120,
  },
  complexity: {
    direction: "lower",
    unit: "mean CC",
    kind: "value",
    static: true,
    newFailingBreaks: false,
    weight: 1,
    tolerance: 0.5,
    timeout: 120,
  },
  doc_coverage: {
    direction: "higher",
    unit: "%",
    kind: "outcomes",
    static: true,
    newFailingBreaks: false,
    weight: 1,
    tolerance: 0,
    timeout: 60,
  },
  imports: {
    direction: "higher",
    unit: "%",
    kind: "outcomes",
    static: false,
    newFailingBreaks: true,
    weight: 1,
    tolerance: 0,
    timeout: 120,
  },
  security: {
    direction: "lower",
    unit: "findings",
    kind: "findings",
    static: true,
    newFailingBreaks: true,
    weight: 1,
    tolerance: 0,
    timeout: 120,
  },
};

/** One metric of one measurement, as the script reports it. */
export const MeasuredMetric = z.union([
  z.object({
    status: z.literal("ok"),
    tool: z.string().optional(),
    value: z.number(),
    cases: z.record(z.string(), z.boolean()).optional(),
  }),
  z.object({ status: z.literal("unavailable"), tool: z.string().nullish(), reason: z.string() }),
]);
export type MeasuredMetric = z.infer<typeof MeasuredMetric>;

/** One measurement of one side: each enabled metric. */
export type Measurement = Partial<Record<QualityMetric, MeasuredMetric>>;

const ScriptOutput = z.object({ metrics: z.record(z.string(), z.unknown()) });

/** The enabled metrics with their settings: the defaults under `improve.benchmarks`. */
export function metricSettings(b: QualityBenchmarks): Array<{ metric: QualityMetric } & MetricDefaults> {
  return QUALITY_METRICS.filter((m) => b.enabled.includes(m)).map((m) => ({
    metric: m,
    ...METRIC_DEFAULTS[m],
    weight: b.weights[m] ?? METRIC_DEFAULTS[m].weight,
    tolerance: b.tolerances[m] ?? METRIC_DEFAULTS[m].tolerance,
    timeout: b.timeouts[m] ?? METRIC_DEFAULTS[m].timeout,
  }));
}

/** The measuring script and its command line for a repository's language. */
export function measureCommand(
  language: "python" | "typescript" | "javascript",
  b: QualityBenchmarks,
): { file: FileChange; shell: string; timeoutMs: number } {
  const set = metricSettings(b);
  const arg = JSON.stringify({
    enabled: set.map((s) => s.metric),
    timeouts: Object.fromEntries(set.map((s) => [s.metric, s.timeout])),
  });
  const quoted = `'${arg.replace(/'/g, "'\\''")}'`;
  // The tools run one after another (tests and coverage in one run): the sum bounds the command.
  const timeoutMs = Math.min(600_000, Math.round(set.reduce((t, s) => t + s.timeout * 1000, 0)) + 30_000);
  return language === "python"
    ? {
        file: { path: MEASURE_SCRIPT_PATH, content: MEASURE_PY },
        shell: `python3 ${MEASURE_SCRIPT_PATH} ${quoted}`,
        timeoutMs,
      }
    : {
        file: { path: MEASURE_NODE_PATH, content: MEASURE_NODE },
        shell: `node ${MEASURE_NODE_PATH} ${quoted}`,
        timeoutMs,
      };
}

/**
 * Reads one measurement from the sandbox's result: the script's `LOOPSMITH_METRICS` line. A run
 * that ended otherwise (time limit, memory, no such command, no line) makes every enabled metric
 * unavailable with that reason; a metric the line lacks is unavailable too.
 */
export function readMeasurement(result: ExecutionResult, enabled: readonly QualityMetric[]): Measurement {
  const all = (reason: string): Measurement =>
    Object.fromEntries(enabled.map((m) => [m, { status: "unavailable", reason } as const]));
  const line = result.stdout
    .split("\n")
    .reverse()
    .find((l) => l.startsWith(METRICS_MARKER));
  if (!line) {
    const tail = (result.stderr || result.stdout).trim().split("\n").slice(-3).join(" | ").slice(0, 300);
    return all(
      `the measuring run ended ${result.status}${result.reason ? ` (${result.reason})` : ""} without its result${tail ? `: ${tail}` : ""}`,
    );
  }
  let parsed: z.infer<typeof ScriptOutput>;
  try {
    parsed = ScriptOutput.parse(JSON.parse(line.slice(METRICS_MARKER.length)));
  } catch (err) {
    return all(`the measuring script's result cannot be read: ${(err as Error).message.slice(0, 200)}`);
  }
  const out: Measurement = {};
  for (const m of enabled) {
    const r = MeasuredMetric.safeParse(parsed.metrics[m]);
    out[m] = r.success ? r.data : { status: "unavailable", reason: `the measuring script reported no ${m} result` };
  }
  return out;
}

/**
 * Measures one tree once: the measuring script laid over `tree` (and over `overlay`, a
 * candidate's files), under a command time limit that fits every enabled metric's. `step`
 * and `attempt` name the run in its idempotency key (see {@link runCommand}).
 * @throws LoopsmithError from the executor call
 */
export async function measureOnce(
  ctx: CommandContext,
  tree: Tree,
  overlay: Overlay | undefined,
  step: string,
  attempt: number,
): Promise<Measurement> {
  const s = ctx.request.settings;
  const { file, shell, timeoutMs } = measureCommand(ctx.request.language, s.benchmarks);
  const enabled = metricSettings(s.benchmarks).map((m) => m.metric);
  const timed: CommandContext = {
    ...ctx,
    request: { ...ctx.request, settings: { ...s, commandTimeoutMs: Math.max(s.commandTimeoutMs, timeoutMs) } },
  };
  const laid: Overlay = {
    files: [...(overlay?.files ?? []).filter((f) => f.path !== file.path), file],
    deleted: overlay?.deleted ?? [],
  };
  return readMeasurement(await runCommand(timed, step, shell, tree, laid, attempt), enabled);
}

/**
 * Measures both sides `repeats` times, interleaved (parent, candidate, …), like the benchmark.
 * `onRun` may throw to stop (the generation's time limit).
 * @throws LoopsmithError from the executor call
 */
export async function measureBoth(
  ctx: CommandContext,
  parent: Tree,
  candidate: Overlay,
  onRun: (side: "parent" | "candidate", repeat: number) => void,
): Promise<{ parent: Measurement[]; candidate: Measurement[] }> {
  const sides: { parent: Measurement[]; candidate: Measurement[] } = { parent: [], candidate: [] };
  for (let r = 0; r < ctx.request.settings.repeats; r++) {
    for (const side of ["parent", "candidate"] as const) {
      onRun(side, r + 1);
      const overlay = side === "parent" ? undefined : candidate;
      sides[side].push(await measureOnce(ctx, parent, overlay, `metrics_${side}`, r));
    }
  }
  return sides;
}

/**
 * One measurement as figures, one per enabled metric in report order: the value, the tool,
 * and the cases behind the value (for `outcomes`, how many pass), or why it is unavailable.
 */
export function metricFigures(m: Measurement, b: QualityBenchmarks): NonNullable<ParentMeasure["metrics"]> {
  return metricSettings(b).map((s) => {
    const x = m[s.metric];
    const base = { metric: s.metric, unit: s.unit, direction: s.direction, ...(x?.tool ? { tool: x.tool } : {}) };
    if (!x || x.status !== "ok")
      return {
        ...base,
        status: "unavailable",
        reason: x?.reason ?? `the measuring script reported no ${s.metric} result`,
      };
    const cases = x.cases ? Object.values(x.cases) : undefined;
    return {
      ...base,
      status: "measured",
      value: x.value,
      ...(cases && s.kind !== "value" ? { cases: cases.length } : {}),
      ...(cases && s.kind === "outcomes" ? { passing: cases.filter(Boolean).length } : {}),
    };
  });
}

// ---------------------------------------------------------------------------------------------
// The configuration of the metrics' tools: measured under the parent's rules.
// ---------------------------------------------------------------------------------------------

/** Files that configure a metric's tool as a whole, and sections of shared files. */
const TOOL_CONFIG: Partial<Record<QualityMetric, { files: string[]; sections: Array<[string, RegExp]> }>> = {
  type_errors: {
    files: ["**/mypy.ini", "**/.mypy.ini", "**/tsconfig.json", "**/tsconfig.*.json", "**/jsconfig.json"],
    sections: [
      ["setup.cfg", /^\[mypy/],
      ["pyproject.toml", /^\[tool\.mypy/],
    ],
  },
  lint: {
    files: ["**/.flake8", "**/.pyflakes", "**/.eslintrc", "**/.eslintrc.*", "**/eslint.config.*", "**/.eslintignore"],
    sections: [
      ["setup.cfg", /^\[(flake8|pyflakes)/],
      ["pyproject.toml", /^\[tool\.(ruff|flake8|pylint)/],
    ],
  },
  coverage: {
    // vitest's and jest's own configuration files hold their coverage settings (include, exclude).
    files: ["**/.coveragerc", "**/vitest.config.*", "**/vitest.workspace.*", "**/jest.config.*"],
    sections: [
      ["setup.cfg", /^\[coverage:/],
      ["pyproject.toml", /^\[tool\.coverage/],
    ],
  },
  security: { files: ["**/.bandit"], sections: [["pyproject.toml", /^\[tool\.bandit/]] },
  complexity: { files: ["**/radon.cfg"], sections: [["setup.cfg", /^\[radon/]] },
};

/** The lines of the INI/TOML sections whose header matches, in order (header included). */
function sectionText(text: string | undefined, header: RegExp): string {
  if (text === undefined) return "";
  const out: string[] = [];
  let inside = false;
  for (const line of text.split(/\r?\n/)) {
    if (/^\s*\[/.test(line)) inside = header.test(line.trim());
    if (inside && line.trim() && !/^\s*[#;]/.test(line)) out.push(line.trim());
  }
  return out.join("\n");
}

/** A file the candidate changed: its text on the parent and on the candidate (undefined: absent). */
export interface ChangedFile {
  path: string;
  before: string | undefined;
  after: string | undefined;
}

/**
 * The enabled metrics whose tool configuration the candidate changed, each with the file: a
 * whole configuration file (`mypy.ini`, `tsconfig.json`, `.flake8`, …) added, changed or
 * deleted, or the tool's section of a shared file (`[mypy]` of setup.cfg, `[tool.mypy]` of
 * pyproject.toml, …) whose settings differ. Comment and blank lines of a section do not count.
 */
export function changedToolConfig(
  changes: readonly ChangedFile[],
  enabled: readonly QualityMetric[],
): Array<{ metric: QualityMetric; file: string }> {
  const out: Array<{ metric: QualityMetric; file: string }> = [];
  for (const metric of enabled) {
    const cfg = TOOL_CONFIG[metric];
    if (!cfg) continue;
    const whole = picomatch(cfg.files, { dot: true });
    for (const c of changes) {
      if (c.before === c.after) continue;
      if (whole(c.path)) {
        out.push({ metric, file: c.path });
        continue;
      }
      const base = c.path.split("/").pop() ?? c.path;
      for (const [file, header] of cfg.sections)
        if (base === file && sectionText(c.before, header) !== sectionText(c.after, header)) {
          out.push({ metric, file: c.path });
          break;
        }
    }
  }
  return out;
}

/** The hypothesis prompt's section on the metrics: what is judged and the last report's figures. */
export function metricsPromptSection(s: ImproveSettings, reports: readonly GenerationReport[]): string {
  const set = metricSettings(s.benchmarks);
  const rules = set
    .map((m) => `- ${m.metric} (${m.direction} is better, ${m.unit}; weight ${m.weight}; tolerance ${m.tolerance})`)
    .join("\n");
  const last = [...reports].reverse().find((r) => r.metrics)?.metrics;
  const figures = last
    ? `\nLast measured (parent → candidate):\n${last.metrics.map((o) => `- ${o.metric}: ${o.note}`).join("\n")}`
    : "";
  return `No benchmark: the repository's own quality metrics are measured on the parent and the candidate. Accepted when no metric regresses beyond its tolerance (a new finding, a failing test, a line no longer covered; changing a tool's configuration or adding a suppression such as \`# type: ignore\` counts as a regression) and the weighted improvement is significant.\n${rules}${figures}`;
}
