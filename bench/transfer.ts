/**
 * The transfer benchmark: does a failure on one task bring back the lesson of a DIFFERENT
 * task that failed for the same cause?
 * Run: npm run --silent bench:transfer -- [--dataset <humaneval.jsonl>] [--tasks N] [--seed S]
 *        [--tries T] [--workers W] [--timeout-ms MS]
 *        [--embedder hashing|api] [--embeddings-base-url URL] [--embeddings-model M]
 *        [--embeddings-dimensions D] [--embeddings-truncate]
 *
 * Embedder: memory's hashing embedder by default (offline); `--embedder api` stores and
 * recalls with an OpenAI-compatible embeddings server instead (the flags, or
 * `LOOPSMITH_EMBEDDER`, `LOOPSMITH_EMBEDDINGS_BASE_URL`, `_MODEL`, `_DIMENSIONS`, `_TRUNCATE`;
 * the key only from `LOOPSMITH_EMBEDDINGS_API_KEY`). Memory is opened without a fallback: a
 * failed embed ends the run with the server's error, so every row and every recall is the
 * named embedder's. The output's `memory:` line names it.
 *
 * Corpus (`transfer/corpus.ts`): N tasks drawn (seeded) from a dataset in HumanEval's format
 * (default `LOOPSMITH_HUMANEVAL`, else `../shared/datasets/humaneval.jsonl` beside the
 * repository); on each, every named mutation operator (`transfer/operators.ts`: the project's
 * mutants from `evals/src/mutants.ts`, each named by its change, and the operators that module
 * lacks) is applied to the canonical solution, and the first of its candidates (at most T)
 * whose tests fail is kept. The tests are the record's `check(candidate)`, run on the host by
 * its `python3` and pytest, in a network namespace of their own, with a time and memory limit
 * (`transfer/run-local.ts`); a mutant that passes, times out or does not load is dropped.
 *
 * Label: the operator that made the failure, known from how it was made, never read from its
 * text. Every failure is stored, as the loop stores it, in a real memory store (embedded
 * PGlite, `rememberFailure`: goal, error text, failing tests, code; one task id per record,
 * the record's failures as its iterations). A query is one stored failure; its relevant
 * answers are the failures of OTHER tasks made by the same operator; every failure of the
 * query's own task is left out of every ranking (memory's `excludeSameTask`; the same filter
 * for the baselines). A failure whose operator failed on no other task has no answer and is
 * not a query.
 *
 * Methods, on the same queries, the store filled in one seeded random order:
 * - loopsmith recall: `recall` as the architect calls it after a failure (goal, error text,
 *   failing tests and code), k = 20;
 * - BM25 over the raw error text (minisearch, OR of the query's terms, as bench:recall);
 * - the goal alone (BM25 over the task prompts: "a similar task");
 * and, to see what carries the cause: loopsmith recall given the error and tests only (no
 * goal, no code), BM25 over the normalised signature keys, and a random ranking (expected
 * values, computed). Reported: recall@1 and recall@5 (a relevant failure at rank 1, within
 * the top 5) and MRR over the top 20, overall and recall@5 per operator, with the machine
 * line, the corpus size and the embedder. No model is called.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { createLogger, loadConfig } from "@loopsmith/shared/runtime";
import { loadHumanEval, type HumanEvalRecord } from "@loopsmith/evals";
import { openMemoryStore, signature } from "@loopsmith/memory";
import { cpuTimes, machineLine, referenceMs } from "./machine.js";
import {
  TOP,
  bm25,
  evaluate,
  markdownTable,
  metrics,
  metricsOf,
  metricsTable,
  randomMetrics,
  type EvaluationRule,
  type Metrics,
  type Ranker,
  type Ranks,
} from "./retrieval.js";
import { seeded } from "./seeded.js";
import { buildCorpus, type Corpus, type Failure } from "./transfer/corpus.js";
import { OPERATORS } from "./transfer/operators.js";
import { LocalRunner } from "./transfer/run-local.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const int = (v: string): number => Number.parseInt(v, 10);
const opts = new Command()
  .option(
    "--dataset <path>",
    "HumanEval-format JSONL file",
    process.env.LOOPSMITH_HUMANEVAL ?? resolve(ROOT, "../shared/datasets/humaneval.jsonl"),
  )
  .option("--tasks <n>", "tasks drawn from the dataset", int, 60)
  .option("--seed <s>", "seed of the task draw and of the insertion order", int, 7)
  .option("--tries <t>", "candidates tried per task and operator", int, 3)
  .option("--workers <w>", "test runs at once", int, 2)
  .option("--timeout-ms <ms>", "wall-clock limit of one test run", int, 3_000)
  .option(
    "--corpus-file <path>",
    "read the corpus from this JSON file when it exists, else build it and write it there",
  )
  .option("--embedder <kind>", "memory's embedder: hashing or api (else LOOPSMITH_EMBEDDER; hashing)")
  .option("--embeddings-base-url <url>", "the api embedder's server, the part before /embeddings")
  .option("--embeddings-model <model>", "the api embedder's model")
  .option("--embeddings-dimensions <d>", "the api embedder's vector length", int)
  .option("--embeddings-truncate", "cut longer vectors to the dimensions (Matryoshka models)")
  .parse(process.argv)
  .opts<{
    dataset: string;
    tasks: number;
    seed: number;
    tries: number;
    workers: number;
    timeoutMs: number;
    corpusFile?: string;
    embedder?: string;
    embeddingsBaseUrl?: string;
    embeddingsModel?: string;
    embeddingsDimensions?: number;
    embeddingsTruncate?: boolean;
  }>();

/** The embedder's settings given on the command line (flags over the environment). */
const embedderFlags = Object.fromEntries(
  Object.entries({
    kind: opts.embedder,
    baseUrl: opts.embeddingsBaseUrl,
    model: opts.embeddingsModel,
    dimensions: opts.embeddingsDimensions,
    truncate: opts.embeddingsTruncate,
  }).filter(([, v]) => v !== undefined),
);
/** The environment variables of memory's embedder (the rest of the environment is left out: the run stays its own). */
const embedderEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => k === "LOOPSMITH_EMBEDDER" || k.startsWith("LOOPSMITH_EMBEDDINGS_")),
);

/** A seeded permutation (Fisher–Yates over `seeded`). */
function shuffled<T>(xs: readonly T[], seed: number): T[] {
  const rnd = seeded(seed);
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** Relevant: another task's failure made by the query's operator; the query's whole task is left out. */
const RULE: EvaluationRule<Failure> = { label: (f) => f.operator, exclude: "same-task" };

const fmt = (x: number): string => x.toFixed(3);

/**
 * A 95% interval of the difference in recall@5 between two methods on the same queries,
 * resampling whole tasks (a task's queries share its goal and tests, so they are not
 * independent): 2,000 seeded resamples, the 2.5th and 97.5th percentiles.
 */
function taskBootstrap(
  a: ReadonlyArray<number | null>,
  b: ReadonlyArray<number | null>,
  queries: readonly Failure[],
  seed: number,
): [number, number] {
  const byTask = new Map<string, number[]>();
  queries.forEach((q, i) => byTask.set(q.taskId, [...(byTask.get(q.taskId) ?? []), i]));
  const groups = [...byTask.values()];
  const rnd = seeded(seed);
  const hit = (r: number | null | undefined): number => (r != null && r <= 5 ? 1 : 0);
  const diffs: number[] = [];
  for (let n = 0; n < 2_000; n++) {
    let d = 0;
    let count = 0;
    for (let g = 0; g < groups.length; g++) {
      for (const i of groups[Math.floor(rnd() * groups.length)] ?? []) {
        d += hit(a[i]) - hit(b[i]);
        count++;
      }
    }
    diffs.push(d / (count || 1));
  }
  diffs.sort((x, y) => x - y);
  return [diffs[Math.floor(0.025 * diffs.length)] ?? 0, diffs[Math.floor(0.975 * diffs.length)] ?? 0];
}

/**
 * The corpus of `--corpus-file` when that file exists and was built from the same records,
 * else a new one (written there when the flag is given): the same failures ranked again
 * without running the mutants again.
 */
let corpusRead = false;
async function loadOrBuild(records: readonly HumanEvalRecord[], runner: LocalRunner): Promise<Corpus> {
  const ids = records.map((r) => r.task_id);
  if (opts.corpusFile && existsSync(opts.corpusFile)) {
    const saved = JSON.parse(readFileSync(opts.corpusFile, "utf8")) as { records: string[]; corpus: Corpus };
    if (JSON.stringify(saved.records) !== JSON.stringify(ids)) {
      throw new Error(`${opts.corpusFile} was built from other records (another --dataset, --tasks or --seed)`);
    }
    corpusRead = true;
    return saved.corpus;
  }
  const built = await buildCorpus(records, runner, {
    tries: opts.tries,
    progress: (done, failures, runs) => {
      if (process.stderr.isTTY || done === records.length)
        process.stderr.write(`\rcorpus: ${done}/${records.length} tasks, ${failures} failures, ${runs} mutants run   `);
    },
  });
  if (opts.corpusFile) writeFileSync(opts.corpusFile, JSON.stringify({ records: ids, corpus: built }));
  return built;
}

// ---- corpus ----
const refMs = referenceMs();
const cpuBefore = cpuTimes();
const all = loadHumanEval(opts.dataset);
const drawn = new Set(shuffled(all, opts.seed).slice(0, opts.tasks));
const records: HumanEvalRecord[] = all.filter((r) => drawn.has(r));
const runner = await LocalRunner.open({ workers: opts.workers, timeoutMs: opts.timeoutMs, memoryMb: 512 });
let corpus: Corpus;
try {
  corpus = await loadOrBuild(records, runner);
} finally {
  await runner.close();
  process.stderr.write("\n");
}
const failures = corpus.failures;
const byId = new Map(failures.map((f) => [f.id, f]));
const tasksOf = new Map<string, Set<string>>();
for (const f of failures) tasksOf.set(f.operator, (tasksOf.get(f.operator) ?? new Set()).add(f.taskId));
const queries = failures.filter((f) => (tasksOf.get(f.operator)?.size ?? 0) >= 2);
const order = shuffled(failures, opts.seed + 1);

// ---- methods ----
const rows: Array<[string, Ranks | Metrics]> = [];
const dataDir = await mkdtemp(join(tmpdir(), "loopsmith-bench-transfer-"));
const log = createLogger({ service: "bench", level: "warn" });
const config = loadConfig({
  env: { ...embedderEnv, LOOPSMITH_DATA_DIR: dataDir },
  flags: { memory: { embedder: embedderFlags } },
});
const settings = config.memory.embedder;
const store = await openMemoryStore({ config, log, fallback: null });
const embedder = store.embedder.id;
const embedderText =
  settings.kind === "api"
    ? `${embedder} (api: model ${settings.model} at ${settings.baseUrl}, ${settings.dimensions} dimensions${settings.truncate ? ", truncated" : ""})`
    : `${embedder} (hashing: offline, lexical)`;
let storeMs = 0;
let recallMs = 0;
try {
  const idOf = new Map<string, string>();
  const t0 = performance.now();
  for (const f of order) {
    const stored = await store.rememberFailure({
      v: 1,
      taskId: f.taskId,
      iteration: f.iteration,
      idempotencyKey: `${f.taskId}/${f.iteration}/remember_failure`,
      language: "python",
      goal: f.goal,
      errorText: f.errorText,
      failingTests: f.failingTests,
      outputTail: "",
      status: "failed",
      code: f.code,
    });
    idOf.set(stored.id, f.id);
  }
  storeMs = performance.now() - t0;
  const recall =
    (what: "all" | "error"): Ranker<Failure> =>
    async (q) => {
      const r = await store.recall({
        v: 1,
        taskId: q.taskId,
        language: "python",
        text: what === "all" ? q.goal : "",
        errorText: q.errorText,
        failingTests: q.failingTests,
        ...(what === "all" ? { code: q.code } : {}),
        k: TOP,
        excludeSameTask: true,
      });
      if (r.embedder !== embedder) throw new Error(`recall answered with embedder ${r.embedder}, not ${embedder}`);
      return r.failures.map((x) => idOf.get(x.id) ?? x.id);
    };
  const t1 = performance.now();
  rows.push(["loopsmith recall (goal, error, tests, code)", await evaluate(queries, byId, recall("all"), RULE)]);
  recallMs = performance.now() - t1;
  rows.push([
    "BM25, raw error text",
    await evaluate(
      queries,
      byId,
      bm25(order, (f) => f.errorText),
      RULE,
    ),
  ]);
  rows.push([
    "goal only (BM25 over the task prompt)",
    await evaluate(
      queries,
      byId,
      bm25(order, (f) => f.goal),
      RULE,
    ),
  ]);
  rows.push(["diag: loopsmith recall, error + tests only", await evaluate(queries, byId, recall("error"), RULE)]);
} finally {
  await store.close();
  await rm(dataDir, { recursive: true, force: true });
}
rows.push([
  "diag: BM25, normalised signature key",
  await evaluate(
    queries,
    byId,
    bm25(order, (f) => signature(f.errorText).key),
    RULE,
  ),
]);
const chance = queries.map((q) => {
  const candidates = failures.filter((f) => f.taskId !== q.taskId);
  return randomMetrics(candidates.length, candidates.filter((f) => f.operator === q.operator).length);
});
const mean = (k: keyof Metrics): number => chance.reduce((s, m) => s + m[k], 0) / (chance.length || 1);
rows.push(["diag: random ranking (expected)", { r1: mean("r1"), r5: mean("r5"), mrr: mean("mrr") }]);
const cpuAfter = cpuTimes();

// ---- report ----
const [mine, bm] = [metricsOf(rows[0]?.[1] ?? []), metricsOf(rows[1]?.[1] ?? [])];
const ranksOf = (i: number): Ranks => {
  const x = rows[i]?.[1];
  return Array.isArray(x) ? x : [];
};
const [lo, hi] = taskBootstrap(ranksOf(0), ranksOf(1), queries, opts.seed + 2);
const points = (x: number): string => `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}`;
const ops = OPERATORS.filter((op) => (tasksOf.get(op)?.size ?? 0) >= 2);
const perOp = (i: number, op: string): string => {
  const sel = ranksOf(i).filter((_, j) => queries[j]?.operator === op);
  return fmt(metrics(sel).r5);
};
const headlineOf = new Map(failures.map((f) => [f.id, signature(f.errorText).signature]));
const headlines = new Set(headlineOf.values());
// How much of the cause the headline signature carries: among other tasks' failures with the
// query's headline, the share made by the query's operator, beside that share among all of them.
let sharing = 0;
let purity = 0;
let base = 0;
for (const q of queries) {
  const others = failures.filter((f) => f.taskId !== q.taskId);
  const same = others.filter((f) => headlineOf.get(f.id) === headlineOf.get(q.id));
  if (same.length === 0) continue;
  sharing++;
  purity += same.filter((f) => f.operator === q.operator).length / same.length;
  base += others.filter((f) => f.operator === q.operator).length / others.length;
}
const commonest = [...headlines]
  .map((h) => {
    const of = failures.filter((f) => headlineOf.get(f.id) === h);
    return { h, n: of.length, ops: new Set(of.map((f) => f.operator)).size };
  })
  .sort((a, b) => b.n - a.n)
  .slice(0, 5);
const lines = [
  `transfer benchmark on ${basename(opts.dataset)}: ${records.length} tasks drawn with seed ${opts.seed}, up to ${opts.tries} candidates per task and operator`,
  machineLine(refMs, cpuBefore, cpuAfter),
  `runner: ${runner.info.python}, ${runner.info.pytest ? `pytest ${runner.info.pytest}` : "no pytest (plain asserts)"}, no network (a network namespace of its own), ${opts.timeoutMs} ms and 512 MiB per run; ${corpus.runs} mutants run in ${corpus.seconds.toFixed(0)} s${opts.corpusFile && corpusRead ? ` (the corpus read from ${basename(opts.corpusFile)})` : ""}`,
  `memory: embedded PGlite, embedder ${embedderText}; ${failures.length} failures stored in ${(storeMs / 1000).toFixed(1)} s, ${queries.length} recalls in ${(recallMs / 1000).toFixed(1)} s`,
  `corpus: ${new Set(failures.map((f) => f.taskId)).size} tasks with a failure, ${new Set(failures.map((f) => f.operator)).size} operators, ${failures.length} failures (${headlines.size} headline signatures), ${queries.length} queries (${failures.length - queries.length} failures of an operator that failed on one task only)`,
  "",
  ...metricsTable(rows, 44),
  "",
  "recall@5 by operator (the queries made by each; random: the expected value):",
  "",
  ...markdownTable(
    [
      ["operator", "queries", "loopsmith", "BM25 error", "goal only", "random"],
      ["-".repeat(22), "-------", "---------", "----------", "---------", "------"],
      ...ops.map((op) => {
        const idx = queries.flatMap((q, j) => (q.operator === op ? [j] : []));
        const rnd = idx.reduce((s, j) => s + (chance[j]?.r5 ?? 0), 0) / (idx.length || 1);
        return [op, String(idx.length), perOp(0, op), perOp(1, op), perOp(2, op), fmt(rnd)];
      }),
    ],
    ["left", "right", "right", "right", "right", "right"],
  ),
  "",
  `headline signatures: ${sharing} of ${queries.length} queries share theirs with another task's failure; among those failures, ` +
    `${fmt(purity / (sharing || 1))} were made by the query's operator (among all other tasks' failures: ${fmt(base / (sharing || 1))})`,
  `commonest headlines: ${commonest.map((c) => `${c.h} (${c.n} failures, ${c.ops} operators)`).join("; ")}`,
  "",
  `goal (loopsmith at least 10 points above BM25 over the raw error text at recall@5): ${points(mine.r5 - bm.r5)} points ` +
    `(95% interval, resampling tasks: ${points(lo)} to ${points(hi)}): ${mine.r5 - bm.r5 >= 0.1 ? "met" : "NOT met"}`,
];
process.stdout.write(`${lines.join("\n")}\n`);
