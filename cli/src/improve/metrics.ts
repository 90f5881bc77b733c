/**
 * `loopsmith metrics`: the repository's quality metrics at one commit, measured in the sandbox
 * exactly as `improve` measures a parent, and nothing changed. The command submits a run that
 * only measures (`measureOnly`) to the architect's improver, so the measuring script, its
 * tools, the setup command and the time limits are the improver's own; it follows the run and
 * prints the figures of the summary's `parent` as a table, or as one JSON object.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { ImproveSummary, type ParentMeasure } from "@loopsmith/shared/contracts";
import { CliError } from "../errors.js";
import { jsonLine, printable } from "../terminal.js";
import { archiveCommit, checkRepo } from "../repo.js";
import { detectLanguage } from "../solve-repo.js";
import { openClient, type Client } from "../client.js";
import { steering } from "../steering.js";
import { improveBase, improveSettings, improveSetup, repoImproveSection, type ImproveFlags } from "./settings.js";

/** The flags of `loopsmith metrics`: those of `improve` that choose what is measured and how. */
export type MetricsFlags = Pick<
  ImproveFlags,
  "repo" | "base" | "metrics" | "check" | "bench" | "benchFormat" | "benchJunit" | "setupCmd" | "config" | "json"
>;

/** A tool as the measuring script names it, split: `pytest 8.3.5` → pytest, 8.3.5; `ast (python 3.11)` → ast, python 3.11. */
export function splitTool(tool: string | undefined): { tool?: string; version?: string } {
  if (!tool) return {};
  const paren = /^(.+?)\s+\((.+)\)$/.exec(tool);
  if (paren?.[1] && paren[2]) return { tool: paren[1], version: paren[2] };
  const plain = /^(.+?)\s+v?(\d[\w.+-]*)$/.exec(tool);
  if (plain?.[1] && plain[2]) return { tool: plain[1], version: plain[2] };
  return { tool };
}

/** A figure as the table shows it: at most 4 significant digits, no trailing zeros. */
function num(x: number): string {
  return String(Number(x.toPrecision(4)));
}

/** Rows of the table: metric, value, cases, tool, version, note. */
function rows(m: ParentMeasure): string[][] {
  const out: string[][] = [];
  for (const f of m.metrics ?? []) {
    const { tool, version } = splitTool(f.tool);
    const cases = f.passing !== undefined ? `${f.passing}/${f.cases}` : f.cases !== undefined ? String(f.cases) : "-";
    out.push(
      f.status === "measured"
        ? [f.metric, `${num(f.value ?? 0)} ${f.unit}`, cases, tool ?? "-", version ?? "-", `${f.direction} is better`]
        : [f.metric, "unavailable", "-", tool ?? "-", version ?? "-", f.reason ?? "not measured"],
    );
  }
  if (m.bench) {
    const b = m.bench;
    out.push(
      b.status === "measured"
        ? [
            "benchmark",
            `${num(b.passRate ?? 0)} %`,
            `${b.passed}/${b.cases}`,
            b.command,
            "-",
            b.meanScore !== undefined ? `mean score ${num(b.meanScore)} over ${b.scored} case(s)` : "cases passing",
          ]
        : ["benchmark", "unavailable", "-", b.command, "-", b.reason ?? "not measured"],
    );
  }
  if (m.check)
    out.push([
      "check",
      m.check.counts.status,
      `${m.check.counts.passed}/${m.check.counts.total}`,
      m.check.command,
      "-",
      `${m.check.counts.failed} failed, ${m.check.counts.skipped} skipped`,
    ]);
  return out;
}

const HEADER = ["METRIC", "VALUE", "CASES", "TOOL", "VERSION", "NOTE"];

/**
 * The figures as a table, one row per metric (then the benchmark and the check when they were
 * run): the value with its unit, the cases behind it (`passing/cases`, or the findings), the
 * tool and its version; an unavailable metric shows `unavailable` and its reason in NOTE.
 * @param title - the first line (what was measured where)
 */
export function metricsTable(m: ParentMeasure, title: string): string {
  const body = rows(m).map((r) => r.map((c) => printable(c)));
  const widths = HEADER.map((h, i) => Math.max(h.length, ...body.map((r) => [...(r[i] ?? "")].length)));
  const line = (r: string[]): string =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c + " ".repeat(Math.max(0, (widths[i] ?? 0) - [...c].length))))
      .join("  ")
      .trimEnd();
  return [title, line(HEADER), ...(body.length ? body.map(line) : ["(nothing measured)"])].join("\n");
}

/** What `loopsmith metrics --json` prints: the repository, the commit, and each figure by metric name. */
export function metricsJson(
  m: ParentMeasure,
  repo: { name?: string; commit: string },
  runId: string,
): Record<string, unknown> {
  const metrics = Object.fromEntries(
    (m.metrics ?? []).map((f) => {
      const { metric, tool: named, ...rest } = f;
      return [metric, { ...rest, ...splitTool(named) }];
    }),
  );
  return {
    kind: "metrics",
    ...(repo.name ? { repo: repo.name } : {}),
    commit: repo.commit,
    language: m.language,
    runId,
    metrics,
    ...(m.bench ? { bench: m.bench } : {}),
    ...(m.check ? { check: m.check } : {}),
    ms: m.ms,
  };
}

/** What {@link measureRepo} measured. */
export interface MetricsOutcome {
  parent: ParentMeasure;
  summary: ImproveSummary;
  commit: string;
  name?: string;
  runId: string;
}

/**
 * Measures the repository at its base commit (HEAD, or `--base`) in the sandbox, through the
 * stack the other commands use (one started here when none runs), and prints the figures.
 * @throws LoopsmithError `repo_invalid` (not a git repository, an unknown base), `bad_request`
 *   (a setting or `--metrics`), `config_invalid` before anything starts; `unavailable` when the
 *   stack cannot start or the measuring run ends in error; CliError `cancelled` when interrupted
 */
export async function measureRepo(flags: MetricsFlags, log: Logger): Promise<MetricsOutcome> {
  // The configuration as improve reads it (improveSteering): --config over the files found.
  const { config, childEnv } = await steering(flags, flags.config ? { file: flags.config } : {});
  const base = improveBase(flags, config);
  const repo = await checkRepo(flags.repo ?? ".", base ? { base } : {});
  const section = repoImproveSection(repo.root);
  // A benchmark only when asked for here: a configured one would hide the quality metrics.
  const settings = { ...improveSettings(flags, config, section), bench: flags.bench };
  const setupCommand = improveSetup(flags, config, section);
  const runId = `metrics-${randomBytes(4).toString("hex")}`;
  const snapshot = await archiveCommit(repo.root, repo.baseCommit);
  const language = await detectLanguage(repo.root, repo.baseCommit);

  let client: Client | undefined;
  const abort = new AbortController();
  const onSignal = (): void => abort.abort();
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    // Measuring needs the sandbox and the improver only: no model, no memory.
    client = await openClient({ config, log, env: childEnv, services: ["executor", "architect"] });
    await client.ensureImproveIntake();
    await client.submitImprovement(
      { runId, repo, snapshot, ...(setupCommand !== undefined ? { setupCommand } : {}) },
      { language, settings, measureOnly: true },
    );
    let summary: ImproveSummary | undefined;
    for await (const event of client.events(runId, abort.signal)) {
      // Progress on stderr: stdout holds the table (or the JSON object) alone.
      if (event.kind === "step" && !flags.json) process.stderr.write(`loopsmith: ${printable(event.message)}\n`);
      // An architect of an older build drops `measureOnly` and starts generations: stop following it.
      if (event.kind === "step" && event.data?.phase === "start")
        throw new CliError(
          "unavailable",
          `the running stack's architect does not know measure-only runs (it started generation 1 of ${runId}): restart the stack (loopsmith down, then loopsmith up) and measure again`,
        );
      if (event.kind === "result") {
        if (event.data?.summary === undefined) throw new CliError("unavailable", event.message);
        summary = ImproveSummary.parse(event.data.summary);
      }
    }
    if (!summary) throw new CliError("cancelled", "stopped before the measuring finished");
    if (summary.stopReason === "error" || !summary.parent)
      throw new CliError("unavailable", `the measuring run ${runId} ended in error: ${summary.message}`);
    return {
      parent: summary.parent,
      summary,
      commit: repo.baseCommit,
      ...(repo.name ? { name: repo.name } : {}),
      runId,
    };
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await client?.close();
  }
}

/** The table's first line: what was measured, where, how long it took. */
export function metricsTitle(o: Pick<MetricsOutcome, "parent" | "commit" | "name">): string {
  const what = o.parent.bench ? "the benchmark" : "quality metrics";
  return `${what} of ${o.name ?? "the repository"} at ${o.commit.slice(0, 12)} (${o.parent.language}), measured in the sandbox in ${(o.parent.ms / 1000).toFixed(1)} s`;
}

/** Runs `loopsmith metrics` and prints its table, or its JSON object with `--json`. */
export async function metricsCommand(flags: MetricsFlags, log: Logger): Promise<void> {
  const o = await measureRepo(flags, log);
  process.stdout.write(
    flags.json
      ? `${jsonLine(metricsJson(o.parent, { ...(o.name ? { name: o.name } : {}), commit: o.commit }, o.runId))}\n`
      : `${metricsTable(o.parent, metricsTitle(o))}\n`,
  );
}
