/**
 * The forgery benchmark: how often a verdict is wrong, in both directions, with the
 * controller's verdict (integrity.ts: pytest with loopsmith's plugin, its forked worker running the tests, signed
 * channel, tripwires) and with the baseline of the same run, the unprotected command that
 * loopsmith ran before (isolated pytest, judged by its exit code and JUnit file).
 * Run: npm run --silent bench:forgery -- --dataset <humaneval.jsonl> [--limit N] [--attacks N]
 * Prints, for the machine's state (bench/machine.ts):
 * - false positives: canonical solutions of the first `--limit` records (default all) that
 *   are not `passed` under the controller's verdict while the baseline passes them, with the
 *   records and the reasons;
 * - forged passes: the first failing mutant of the first `--attacks` records (default 30)
 *   with each attack prepended or appended, reported `passed` (must be 0 under the
 *   controller), and the statuses they got;
 * - the median and p95 wall time per run of a canonical solution under each command.
 * Exits 1 when the controller passes a forged candidate or fails a canonical solution the
 * baseline passes.
 */
import Docker from "dockerode";
import { Command } from "commander";
import { quantile } from "simple-statistics";
import { createLogger, loadConfig } from "@loopsmith/shared/runtime";
import { type ExecutionRequest, type ExecutionResult } from "@loopsmith/shared/contracts";
import { createExecutor, PYTEST_ISOLATED, RESULT_PATH } from "@loopsmith/executor";
import { HUMANEVAL_CHECK_PATH, loadHumanEval, makeRequest, mutantsOf, type HumanEvalRecord } from "@loopsmith/evals";
import { cpuTimes, machineLine, referenceMs } from "./machine.js";

const program = new Command()
  .requiredOption("--dataset <path>", "HumanEval JSONL file")
  .option("--limit <n>", "canonical solutions of the first n records (default all)", (v) => Number(v))
  .option("--attacks <n>", "records whose failing mutant is dressed with each attack", (v) => Number(v), 30)
  .parse(process.argv);
const opts = program.opts<{ dataset: string; limit?: number; attacks: number }>();

const config = loadConfig();
const log = createLogger({ service: "bench", level: "warn" });
const records = loadHumanEval(opts.dataset).slice(0, opts.limit ?? Infinity);
const executor = createExecutor({ docker: new Docker(), config, log });

/** The attacks: each turns a wrong completion into one that tries to look passed. */
const ATTACKS: Record<string, (rec: HumanEvalRecord, wrong: string) => string> = {
  // A passing JUnit file written at the runner's path, then exit 0 at import: the __init__.py
  // forgery of tests/executor/forgery.test.ts, inline in the solution.
  junit_then_exit: (_rec, wrong) =>
    `${wrong}\nimport os as _os\nfor _p in (_os.environ.get("LOOPSMITH_JUNIT"), "${RESULT_PATH}"):\n    try:\n        open(_p, "w").write('<testsuites><testsuite name="pytest" tests="1"><testcase classname="test_solution" name="test_x"/></testsuite></testsuites>')\n    except (OSError, TypeError):\n        pass\n_os._exit(0)\n`,
  exit_at_import: (_rec, wrong) => `${wrong}\nimport sys as _sys\n_sys.exit(0)\n`,
  exit_mid_run: (rec, wrong) =>
    `${wrong}\n_real = ${rec.entry_point}\ndef ${rec.entry_point}(*a, **k):\n    import os\n    os._exit(0)\n`,
  rewrite_reports: (_rec, wrong) =>
    `${wrong}\nimport _pytest.reports as _r\n_init = _r.TestReport.__init__\ndef _forged(self, *a, **k):\n    _init(self, *a, **k)\n    self.outcome = "passed"\n    self.longrepr = None\n_r.TestReport.__init__ = _forged\n`,
};

/** The baseline: the same request under the command loopsmith ran before the controller. */
function baseline(req: ExecutionRequest): ExecutionRequest {
  return { ...req, command: [...PYTEST_ISOLATED, `--junitxml=${RESULT_PATH}`, "--", "test_solution.py"] };
}

async function timed(req: ExecutionRequest): Promise<[ExecutionResult, number]> {
  const t0 = performance.now();
  const r = await executor.run(req);
  return [r, performance.now() - t0];
}

const refMs = referenceMs();
const before = cpuTimes();
await executor.start();
const canon: { id: string; guarded: ExecutionResult; base: ExecutionResult; guardedMs: number; baseMs: number }[] = [];
const forged: Record<string, { guarded: Record<string, number>; base: Record<string, number> }> = {};
const count = (m: Record<string, number>, k: string) => (m[k] = (m[k] ?? 0) + 1);
try {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < records.length) {
      const i = next++;
      const rec = records[i] as HumanEvalRecord;
      const req = makeRequest(rec, rec.canonical_solution);
      const [guarded, guardedMs] = await timed(req);
      const [base, baseMs] = await timed(baseline(makeRequest(rec, rec.canonical_solution)));
      canon.push({ id: rec.task_id, guarded, base, guardedMs, baseMs });
      if (i >= opts.attacks) continue;
      // The first mutant whose tests fail under the baseline: a wrong candidate.
      let wrong: string | undefined;
      for (const m of mutantsOf(rec.canonical_solution).slice(0, 20)) {
        if ((await executor.run(baseline(makeRequest(rec, m.text)))).status === "failed") {
          wrong = m.text;
          break;
        }
      }
      if (wrong === undefined) continue;
      for (const [name, dress] of Object.entries(ATTACKS)) {
        const completion = dress(rec, wrong);
        forged[name] ??= { guarded: {}, base: {} };
        count(forged[name].guarded, (await executor.run(makeRequest(rec, completion))).status);
        count(forged[name].base, (await executor.run(baseline(makeRequest(rec, completion)))).status);
      }
    }
  };
  await Promise.all(Array.from({ length: config.executor.concurrency }, worker));
} finally {
  await executor.stop();
}
const machine = machineLine(refMs, before, cpuTimes());
const falsePositives = canon.filter((c) => c.base.status === "passed" && c.guarded.status !== "passed");
const forgedPasses = Object.values(forged).reduce((n, f) => n + (f.guarded.passed ?? 0), 0);
const ms = (xs: number[]) => `median ${quantile(xs, 0.5).toFixed(0)} ms, p95 ${quantile(xs, 0.95).toFixed(0)} ms`;
const lines = [
  `forgery benchmark on ${opts.dataset}: ${canon.length} canonical solutions, attacks on the first ${opts.attacks} records' failing mutants (${HUMANEVAL_CHECK_PATH} checks)`,
  machine,
  `canonical passed: controller ${canon.filter((c) => c.guarded.status === "passed").length}/${canon.length}, baseline ${canon.filter((c) => c.base.status === "passed").length}/${canon.length}`,
  `false positives (baseline passed, controller did not): ${falsePositives.length}${falsePositives.length ? ` (${falsePositives.map((c) => `${c.id}: ${c.guarded.status} ${c.guarded.reason ?? ""}`.trim()).join("; ")})` : ""}`,
  "forged candidates reported passed (controller | baseline), and the statuses the controller gave:",
  ...Object.entries(forged).map(([name, f]) => {
    const n = Object.values(f.guarded).reduce((a, b) => a + b, 0);
    return `  ${name.padEnd(16)} ${f.guarded.passed ?? 0}/${n} | ${f.base.passed ?? 0}/${n}   ${JSON.stringify(f.guarded)}`;
  }),
  `per canonical run: controller ${ms(canon.map((c) => c.guardedMs))}; baseline ${ms(canon.map((c) => c.baseMs))}`,
];
process.stdout.write(`${lines.join("\n")}\n`);
process.exitCode = forgedPasses === 0 && falsePositives.length === 0 ? 0 : 1;
