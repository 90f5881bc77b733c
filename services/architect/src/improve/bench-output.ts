/**
 * Reading a benchmark's cases: the `json` form (one JSON object per case and line
 * of stdout) and the `junit` form (the test cases the sandbox read from the JUnit XML). Both
 * give one {@link CaseRun} per case for one run of one side (parent or candidate); pairing
 * runs and deciding is `decision.ts`. Pure functions: no I/O, no clock.
 */
import { z } from "zod";
import type { TestCase } from "@loopsmith/shared/contracts";

/**
 * One case of one benchmark run.
 * - `case`: the case id (unique within a run; the key that pairs parent and candidate).
 * - `pass`: whether the case passed in this run.
 * - `score`: a finite number, higher is better, when the benchmark scores its cases.
 */
export interface CaseRun {
  case: string;
  pass: boolean;
  score?: number;
}

/** What a benchmark run reads as: its cases, or one sentence saying why it cannot be read (`bench_unparsed`). */
export type CasesResult = { ok: true; cases: CaseRun[] } | { ok: false; error: string };

/** One case line of the `json` form (see `BenchFormat` in the contracts); other keys are ignored. */
const CaseLine = z.object({
  case: z.string({ error: "`case` must be a string" }).min(1, { error: "`case` must not be empty" }),
  pass: z.boolean({ error: "`pass` must be true or false" }),
  // zod 4 numbers refuse Infinity and NaN, so `1e999` fails here.
  score: z.number({ error: "`score` must be a finite number" }).optional(),
});

/** Ids quoted in messages are cut to this many characters. */
const ID_CHARS = 120;

/** A case id as messages quote it (JSON-quoted, long ids cut). */
export function quoteId(id: string): string {
  return JSON.stringify(id.length > ID_CHARS ? `${id.slice(0, ID_CHARS)}…` : id);
}

/**
 * Parses the `json` form of a benchmark's stdout: one object per case and line,
 * `{"case": "<id>", "pass": true|false, "score": <finite number, optional>}`.
 *
 * Rules (the contract of `BenchFormat` `json`):
 * - A line (leading and trailing blanks trimmed) that does not start with `{`, or that does
 *   but is not valid JSON, is ignored: benchmarks print other text (progress, logs, `{…}`
 *   in prose).
 * - A line that starts with `{` and parses as JSON must be a case: a non-empty string `case`,
 *   a boolean `pass` and, when present, a finite `score` (JSON's `1e999` reads as Infinity and
 *   is refused). Anything else is an error naming the 1-based line number.
 * - A case id seen twice is an error (the pairing would be ambiguous); no case at all is an error.
 *
 * @param stdout - the benchmark's standard output, whole.
 * @returns the cases in output order, or `{ ok: false, error }` with one sentence.
 */
export function parseBenchOutput(stdout: string): CasesResult {
  const cases: CaseRun[] = [];
  const seen = new Map<string, number>();
  const lines = stdout.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const text = (lines[i] ?? "").trim();
    if (!text.startsWith("{")) continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      continue;
    }
    const lineNo = i + 1;
    const parsed = CaseLine.safeParse(value);
    if (!parsed.success) {
      const why = parsed.error.issues[0]?.message ?? "it is not a case";
      return { ok: false, error: `Benchmark output line ${lineNo} is a JSON object but not a case (${why}).` };
    }
    const { case: id, pass, score } = parsed.data;
    const first = seen.get(id);
    if (first !== undefined) {
      return { ok: false, error: `Benchmark output reports case ${quoteId(id)} twice (lines ${first} and ${lineNo}).` };
    }
    seen.set(id, lineNo);
    cases.push(score === undefined ? { case: id, pass } : { case: id, pass, score });
  }
  if (cases.length === 0) {
    return {
      ok: false,
      error: 'Benchmark output holds no case line (one JSON object per line, {"case": "<id>", "pass": true|false}).',
    };
  }
  return { ok: true, cases };
}

/** A JUnit test case as {@link casesFromTests} needs it: `TestCase` from the contracts, `classname` optional. */
export type JUnitCase = Pick<TestCase, "name" | "status"> & { classname?: string };

/**
 * The `junit` form: the test cases the sandbox read from the run's JUnit XML, as benchmark cases.
 *
 * Rules:
 * - The case id is `classname::name`, or `name` when the classname is empty or absent.
 * - `pass` is `status === "passed"`; `failed`, `error` and `skipped` all count as not passed
 *   (a skip must not make a case look fine). JUnit cases have no score.
 * - An id seen twice is an error (as in the `json` form); no test case at all is an error.
 *
 * @param tests - `ExecutionResult.tests` of one benchmark run.
 * @returns the cases in report order, or `{ ok: false, error }` with one sentence.
 */
export function casesFromTests(tests: readonly JUnitCase[]): CasesResult {
  if (tests.length === 0) {
    return { ok: false, error: "The benchmark's JUnit report holds no test case." };
  }
  const cases: CaseRun[] = [];
  const seen = new Set<string>();
  for (const t of tests) {
    const id = t.classname ? `${t.classname}::${t.name}` : t.name;
    if (seen.has(id)) {
      return { ok: false, error: `The benchmark's JUnit report holds test case ${quoteId(id)} twice.` };
    }
    seen.add(id);
    cases.push({ case: id, pass: t.status === "passed" });
  }
  return { ok: true, cases };
}
