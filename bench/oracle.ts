/**
 * The oracle benchmark: every canonical solution of a HumanEval-format file through the
 * executor (hardened container, warm pool), and the first mutant of each, then counts and
 * timing. Run: npm run --silent bench:oracle -- --dataset <path> [--limit N] [--concurrency N]
 * Prints: canonical solutions passed under loopsmith's harness and under the baseline (plain
 * `python3` running HumanEval's own program, in the same sandbox image) with every record
 * where they disagree, first mutants failed, records with a failing mutant within 20 tries,
 * total, median and p95 wall time per run. Exits 1 when a canonical solution that plain
 * python3 passes does not pass loopsmith's harness.
 */
import Docker from "dockerode";
import { Command } from "commander";
import { quantile } from "simple-statistics";
import { createLogger, loadConfig } from "@loopsmith/shared/runtime";
import { type ExecutionResult } from "@loopsmith/shared/contracts";
import { createExecutor } from "@loopsmith/executor";
import { loadHumanEval, mutantsOf, plainRequest, runCompletion, type HumanEvalRecord } from "@loopsmith/evals";

const program = new Command()
  .requiredOption("--dataset <path>", "HumanEval JSONL file")
  .option("--limit <n>", "only the first n records", (v) => Number(v))
  .option("--concurrency <n>", "runs at once (default: the executor's concurrency)", (v) => Number(v))
  .parse(process.argv);
const opts = program.opts<{ dataset: string; limit?: number; concurrency?: number }>();

const config = loadConfig();
const concurrency = opts.concurrency ?? config.executor.concurrency;
const cfg = { ...config, executor: { ...config.executor, concurrency } };
const log = createLogger({ service: "bench", level: "warn" });
const records = loadHumanEval(opts.dataset).slice(0, opts.limit ?? Infinity);
const executor = createExecutor({ docker: new Docker(), config: cfg, log });

interface Row {
  id: string;
  canonical: ExecutionResult;
  canonicalMs: number;
  /** The same canonical solution under plain python3 (the baseline). */
  plain: ExecutionResult;
  mutant: ExecutionResult | null;
  mutantMs: number;
  /** Tries until a mutant's tests failed (what `script:humaneval --mutant-first` searches), or null. */
  triesToFail: number | null;
}

async function timed(rec: HumanEvalRecord, completion: string): Promise<[ExecutionResult, number]> {
  const t0 = performance.now();
  const r = await runCompletion(executor, rec, completion);
  return [r, performance.now() - t0];
}

/** The q-quantile (0..1) of `xs` (simple-statistics), NaN when there are none. */
const q = (xs: number[], p: number): number => (xs.length ? quantile(xs, p) : NaN);

await executor.start();
const rows: Row[] = [];
const started = performance.now();
try {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < records.length) {
      const rec = records[next++] as HumanEvalRecord;
      const [canonical, canonicalMs] = await timed(rec, rec.canonical_solution);
      const plain = await executor.run(plainRequest(rec, rec.canonical_solution));
      const all = mutantsOf(rec.canonical_solution).slice(0, 20);
      const first = all[0];
      const [mutant, mutantMs] = first ? await timed(rec, first.text) : [null, 0];
      let triesToFail: number | null = mutant?.status === "failed" ? 1 : null;
      for (let i = 1; triesToFail === null && i < all.length; i++) {
        const [r] = await timed(rec, (all[i] as { text: string }).text);
        if (r.status === "failed") triesToFail = i + 1;
      }
      rows.push({ id: rec.task_id, canonical, canonicalMs, plain, mutant, mutantMs, triesToFail });
      if (canonical.status !== "passed")
        process.stderr.write(`canonical ${rec.task_id}: ${canonical.status} ${canonical.reason ?? ""}\n`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
} finally {
  await executor.stop();
}
const wall = performance.now() - started;
const times = rows.flatMap((r) => (r.mutant ? [r.canonicalMs, r.mutantMs] : [r.canonicalMs]));
const passed = rows.filter((r) => r.canonical.status === "passed").length;
const withMutant = rows.filter((r) => r.mutant);
const killed = withMutant.filter((r) => r.mutant && r.mutant.status !== "passed").length;
const byStatus: Record<string, number> = {};
for (const r of withMutant) byStatus[r.mutant?.status ?? "none"] = (byStatus[r.mutant?.status ?? "none"] ?? 0) + 1;
const plainPassed = rows.filter((r) => r.plain.status === "passed");
const missed = plainPassed.filter((r) => r.canonical.status !== "passed");
const stricterPlain = rows.filter((r) => r.plain.status !== "passed" && r.canonical.status === "passed");
const lines = [
  `oracle benchmark on ${opts.dataset} (${records.length} records, concurrency ${concurrency})`,
  `canonical passed: ${passed}/${records.length} (loopsmith's harness: pytest, isolated)`,
  `baseline:         ${plainPassed.length}/${records.length} under plain python3 (HumanEval's own program)`,
  `passed plain python3 but not loopsmith: ${missed.length}${missed.length ? ` (${missed.map((r) => `${r.id}: ${r.canonical.status} ${r.canonical.reason ?? ""}`.trim()).join("; ")})` : ""}`,
  `passed loopsmith but not plain python3: ${stricterPlain.length}${stricterPlain.length ? ` (${stricterPlain.map((r) => `${r.id}: ${r.plain.status}`).join("; ")})` : ""}`,
  `mutants failed:   ${killed}/${withMutant.length} (first mutant of each; statuses ${JSON.stringify(byStatus)})`,
  `failing mutant within 20 tries (what script:humaneval --mutant-first needs): ${rows.filter((r) => r.triesToFail !== null).length}/${records.length}` +
    `${
      rows.some((r) => r.triesToFail === null)
        ? ` (none for ${rows
            .filter((r) => r.triesToFail === null)
            .map((r) => r.id)
            .join(", ")})`
        : ""
    }`,
  `timed runs:       ${times.length} (canonical and first mutant)`,
  `per run: median ${q(times, 0.5).toFixed(0)} ms, p95 ${q(times, 0.95).toFixed(0)} ms; wall ${(wall / 1000).toFixed(1)} s (${((times.length * 1000) / wall).toFixed(2)} runs/s)`,
];
process.stdout.write(`${lines.join("\n")}\n`);
process.exitCode = missed.length === 0 ? 0 : 1;
