/**
 * The recall benchmark: does memory give back the past failure that had the same cause?
 * Run: npm run --silent bench:recall -- --dataset <humaneval.jsonl> [--limit N] [--skip K]
 *        [--mutants M] [--cache <file.json>] [--concurrency N] [--seed S]
 *
 * Corpus (real failures, made in the real sandbox like bench/oracle.ts): for each of the
 * first N HumanEval records (after skipping K, to evaluate on records no one tuned on), the first M single-site mutants of the canonical solution whose
 * tests fail (status `failed`) are each run TWICE, as two different tasks: occurrence `a` is
 * the mutant as it is, occurrence `b` the same mutant with a comment line added at the top of
 * the body (as a second attempt at the task might look: every line number below it moves; the
 * sandbox's function addresses differ from run to run anyway). Each run gives one failure as
 * the loop stores it: the goal (`humanevalTask`'s), the error text (`errorTextOf`, the first
 * failing test's JUnit message and report), the failing tests and the code (`solution.py`).
 * The corpus is cached as JSON at --cache (default: a file named after the dataset, N and M in
 * the temp directory), so reruns skip the sandbox.
 *
 * Label: two failures have the same cause when they are the two occurrences of the same
 * mutant (the same mutation of the same function) met in two different tasks. Nothing else
 * is relevant: another mutant of the same function is a different mistake even when it fails
 * the same assertion with the same message (its fix is different). Every failure is a query;
 * its one relevant answer is its twin; every other failure of the corpus is a candidate, and
 * the query's own task is left out (it is the only row of that task).
 *
 * Methods, on the same queries and the same candidates, inserted in one seeded random order
 * (so ties fall in no method's favour):
 * - loopsmith: the real memory store on embedded PGlite (`rememberFailure` each failure with
 *   its goal, error text, failing tests and code, then `recall` with the same fields, k = 20,
 *   excludeSameTask); and the same store queried without the code (goal, error text and
 *   failing tests only: what the architect's recall sends today);
 * - BM25 over the raw error text (minisearch, OR of the query's terms);
 * - goal text only (minisearch BM25 over the goals);
 * - BM25 over everything loopsmith is given, raw (goal + error text + tests + code).
 * Reported: recall@1, recall@5 (the twin at rank 1, within the top 5) and MRR over the top 20
 * (1 / rank, 0 beyond 20), with how many failures, pairs, headline signatures and full keys.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import Docker from "dockerode";
import { Command } from "commander";
import { createLogger, loadConfig } from "@loopsmith/shared/runtime";
import { createExecutor } from "@loopsmith/executor";
import { errorTextOf, failingTests } from "@loopsmith/architect";
import {
  humanevalTask,
  loadHumanEval,
  mutantsOf,
  runCompletion,
  solutionFile,
  type HumanEvalRecord,
} from "@loopsmith/evals";
import { openMemoryStore, signature } from "@loopsmith/memory";
import { TOP, bm25, evaluate, metricsTable, type EvaluationRule, type Ranker, type Ranks } from "./retrieval.js";

const program = new Command()
  .requiredOption("--dataset <path>", "HumanEval JSONL file")
  .option("--limit <n>", "only the first n records", (v) => Number(v))
  .option("--skip <k>", "skip the first k records", (v) => Number(v), 0)
  .option("--mutants <m>", "failing mutants per record (each run twice)", (v) => Number(v), 3)
  .option("--cache <path>", "corpus cache (JSON); built when absent")
  .option("--concurrency <n>", "sandbox runs at once (default: the executor's)", (v) => Number(v))
  .option("--seed <s>", "seed of the insertion order", (v) => Number(v), 11)
  .parse(process.argv);
const opts = program.opts<{
  dataset: string;
  limit?: number;
  skip: number;
  mutants: number;
  cache?: string;
  concurrency?: number;
  seed: number;
}>();

/** One failure of the corpus. */
interface Failure {
  /** `<record>#<mutant>/<occurrence>`; the twin differs only in the occurrence. */
  id: string;
  cause: string;
  taskId: string;
  goal: string;
  errorText: string;
  failingTests: string[];
  code: string;
  mutation: string;
}

interface Corpus {
  dataset: string;
  skip?: number;
  limit: number | null;
  mutants: number;
  createdAt: string;
  failures: Failure[];
}

const records = loadHumanEval(opts.dataset).slice(opts.skip, opts.skip + (opts.limit ?? Infinity));
const cachePath =
  opts.cache ??
  join(tmpdir(), `loopsmith-recall-${basename(opts.dataset)}-${opts.skip}-${opts.limit ?? "all"}-${opts.mutants}.json`);
const MAX_TRIES = 30;

/** The body with a comment line on top: the same code, every line number one further. */
function secondAttempt(body: string): string {
  const indent = /^[ \t]*/.exec(body.split("\n").find((l) => l.trim() !== "") ?? "")?.[0] ?? "    ";
  return `${indent}# second attempt\n${body}`;
}

async function buildCorpus(): Promise<Corpus> {
  const config = loadConfig();
  const concurrency = opts.concurrency ?? config.executor.concurrency;
  const log = createLogger({ service: "bench", level: "warn" });
  const executor = createExecutor({
    docker: new Docker(),
    config: { ...config, executor: { ...config.executor, concurrency } },
    log,
  });
  const failures: Failure[] = [];
  const started = performance.now();
  let runs = 0;
  await executor.start();
  try {
    let next = 0;
    const failureOf = async (
      rec: HumanEvalRecord,
      n: number,
      mutant: { text: string; description: string },
      occ: "a" | "b",
      body: string,
    ): Promise<Failure | null> => {
      runs++;
      const result = await runCompletion(executor, rec, body, { timeoutMs: 10_000 });
      if (result.status !== "failed") return null;
      const task = humanevalTask(rec);
      return {
        id: `${rec.task_id}#${n}/${occ}`,
        cause: `${rec.task_id}#${n}`,
        taskId: task.taskId,
        goal: task.goal,
        errorText: errorTextOf(result),
        failingTests: failingTests(result),
        code: solutionFile(rec, body).content,
        mutation: mutant.description,
      };
    };
    const worker = async (): Promise<void> => {
      while (next < records.length) {
        const rec = records[next++] as HumanEvalRecord;
        let kept = 0;
        for (const [n, mutant] of mutantsOf(rec.canonical_solution).slice(0, MAX_TRIES).entries()) {
          if (kept >= opts.mutants) break;
          const a = await failureOf(rec, n, mutant, "a", mutant.text);
          if (!a) continue;
          const b = await failureOf(rec, n, mutant, "b", secondAttempt(mutant.text));
          if (!b) continue;
          failures.push(a, b);
          kept++;
        }
        process.stderr.write(
          `\r${rec.task_id}: ${failures.length} failures, ${runs} runs, ${((performance.now() - started) / 1000).toFixed(0)} s   `,
        );
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    await executor.stop();
    process.stderr.write("\n");
  }
  failures.sort((x, y) => x.id.localeCompare(y.id, "en", { numeric: true }));
  return {
    dataset: basename(opts.dataset),
    skip: opts.skip,
    limit: opts.limit ?? null,
    mutants: opts.mutants,
    createdAt: new Date().toISOString(),
    failures,
  };
}

async function loadCorpus(): Promise<Corpus> {
  if (existsSync(cachePath)) {
    const cached = JSON.parse(await readFile(cachePath, "utf8")) as Corpus;
    if (
      cached.mutants === opts.mutants &&
      cached.limit === (opts.limit ?? null) &&
      (cached.skip ?? 0) === opts.skip &&
      cached.dataset === basename(opts.dataset)
    ) {
      process.stderr.write(`corpus from ${cachePath}\n`);
      return cached;
    }
  }
  const corpus = await buildCorpus();
  await writeFile(cachePath, JSON.stringify(corpus));
  process.stderr.write(`corpus cached at ${cachePath}\n`);
  return corpus;
}

/** A seeded permutation (mulberry32 + Fisher–Yates). */
function shuffled<T>(xs: readonly T[], seed: number): T[] {
  let a = seed >>> 0;
  const rnd = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/** The twin is the one relevant answer; the query alone is left out (its task holds no other failure). */
const RULE: EvaluationRule<Failure> = { label: (f) => f.cause, exclude: "self" };

const corpus = await loadCorpus();
const failures = corpus.failures;
const causes = new Map<string, number>();
for (const f of failures) causes.set(f.cause, (causes.get(f.cause) ?? 0) + 1);
const paired = failures.filter((f) => causes.get(f.cause) === 2);
const order = shuffled(paired, opts.seed);
const byId = new Map(paired.map((f) => [f.id, f]));

const dataDir = await mkdtemp(join(tmpdir(), "loopsmith-bench-recall-"));
const log = createLogger({ service: "bench", level: "warn" });
const store = await openMemoryStore({ config: loadConfig({ env: { LOOPSMITH_DATA_DIR: dataDir } }), log });
const rows: Array<[string, Ranks]> = [];
let storeMs = 0;
let recallMs = 0;
try {
  const taskOf = new Map<string, string>();
  const t0 = performance.now();
  for (const f of order) {
    await store.rememberFailure({
      v: 1,
      taskId: f.taskId,
      iteration: 1,
      idempotencyKey: `${f.taskId}/1/remember_failure`,
      language: "python",
      goal: f.goal,
      errorText: f.errorText,
      failingTests: f.failingTests,
      outputTail: "",
      status: "failed",
      code: f.code,
    });
    taskOf.set(f.taskId, f.id);
  }
  storeMs = performance.now() - t0;
  const t1 = performance.now();
  const mine =
    (withCode: boolean): Ranker<Failure> =>
    async (q) => {
      const r = await store.recall({
        v: 1,
        taskId: q.taskId,
        language: "python",
        text: q.goal,
        errorText: q.errorText,
        failingTests: q.failingTests,
        ...(withCode ? { code: q.code } : {}),
        k: TOP,
        excludeSameTask: true,
      });
      return r.failures.map((x) => taskOf.get(x.taskId) ?? x.taskId);
    };
  rows.push(["loopsmith recall (PGlite, hybrid)", await evaluate(order, byId, mine(true), RULE)]);
  recallMs = performance.now() - t1;
  rows.push(["loopsmith recall, query without code", await evaluate(order, byId, mine(false), RULE)]);
} finally {
  await store.close();
  await rm(dataDir, { recursive: true, force: true });
}
rows.push([
  "BM25, raw error text",
  await evaluate(
    order,
    byId,
    bm25(order, (f) => f.errorText),
    RULE,
  ),
]);
rows.push([
  "goal text only (BM25)",
  await evaluate(
    order,
    byId,
    bm25(order, (f) => f.goal),
    RULE,
  ),
]);
rows.push([
  "BM25, raw goal+error+tests+code",
  await evaluate(
    order,
    byId,
    bm25(order, (f) => [f.goal, f.errorText, f.failingTests.join(" "), f.code].join("\n")),
    RULE,
  ),
]);

const headlines = new Set(paired.map((f) => signature(f.errorText).signature));
const keys = new Set(paired.map((f) => signature(f.errorText).key));
const sameErrorSibling = paired.filter((q) =>
  paired.some(
    (o) => o.cause !== q.cause && o.goal === q.goal && signature(o.errorText).key === signature(q.errorText).key,
  ),
).length;
const lines = [
  `recall benchmark on ${corpus.dataset} (${records.length} records from #${opts.skip}, up to ${corpus.mutants} failing mutants each, seed ${opts.seed})`,
  `failures: ${paired.length} (${paired.length / 2} same-cause pairs; ${failures.length - paired.length} unpaired dropped); ` +
    `headline signatures: ${headlines.size}; full signature keys: ${keys.size}`,
  `queries whose function has another mutant failing with the same full signature: ${sameErrorSibling}`,
  "",
  ...metricsTable(rows, 36),
  "",
  `loopsmith: ${paired.length} failures stored in ${(storeMs / 1000).toFixed(1)} s, ${paired.length} recalls in ${(recallMs / 1000).toFixed(1)} s (${(recallMs / Math.max(1, paired.length)).toFixed(0)} ms each)`,
];
process.stdout.write(`${lines.join("\n")}\n`);
