/**
 * `loopsmith bench --format swe-bench` grading on the shipped instances (examples/swe-bench),
 * in the real sandbox (Docker, the Python image, no network), no stack needed: the gold
 * patches resolve 3/3, empty patches 0/3, a patch that does not apply is `patch_failed`, and
 * a model patch that also changes a test file has that file put back before `test_patch`.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { readResults } from "../../cli/src/bench/results.js";
import { checkoutInstance, loadInstances } from "@loopsmith/evals";
import { sweBenchCommand } from "../../cli/src/bench/swe-bench/run.js";
import type { SweBenchOptions } from "../../cli/src/bench/swe-bench/record.js";
import { BenchSummary } from "../../cli/src/bench/types.js";

const EX = join(import.meta.dirname, "../../examples/swe-bench");
const DATASET = join(EX, "instances.jsonl");
const base = { dataset: DATASET, repos: join(EX, "repos"), env: join(EX, "env.json"), concurrency: 3 };
const work = mkdtempSync(join(tmpdir(), "swe-bench-test-"));
const log = pino({ level: "silent" });
const instances = loadInstances(DATASET);

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Runs the command into a fresh folder; its results by instance id and its summary. */
async function bench(name: string, o: Partial<SweBenchOptions>) {
  const out = join(work, name);
  const code = await sweBenchCommand({ ...base, out, ...o }, log);
  const results = new Map(readResults(join(out, "results.jsonl")).map((r) => [r.caseId, r]));
  const summary = BenchSummary.parse(JSON.parse(readFileSync(join(out, "summary.json"), "utf8")));
  return { code, out, results, summary };
}

describe("swe-bench grading (examples/swe-bench)", () => {
  it("--gold resolves every instance, writes predictions.jsonl in the official shape, and --resume has nothing left", async () => {
    const run = await bench("gold", { gold: true });
    expect(run.code).toBe(0);
    for (const inst of instances) {
      const r = run.results.get(inst.instance_id);
      expect(r?.swe?.status, `${inst.instance_id}: ${r?.error}`).toBe("resolved");
      expect(r?.swe?.failToPass).toEqual({ passed: inst.FAIL_TO_PASS.length, total: inst.FAIL_TO_PASS.length });
      expect(r?.swe?.passToPass).toEqual({ passed: inst.PASS_TO_PASS.length, total: inst.PASS_TO_PASS.length });
    }
    expect(run.summary.arms.off?.passAt1).toBe(1);
    expect(run.summary.format).toBe("swe-bench");
    const predictions = readFileSync(join(run.out, "predictions.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(predictions.map((p) => Object.keys(p).sort())).toEqual(
      instances.map(() => ["instance_id", "model_name_or_path", "model_patch"]),
    );
    expect(predictions.map((p) => p.model_patch).sort()).toEqual(instances.map((i) => i.patch).sort());
    expect(readFileSync(join(run.out, "report.html"), "utf8")).toContain("more-itertools__more-itertools-1028");

    await sweBenchCommand({ ...base, gold: true, out: run.out, resume: true }, log);
    expect(readResults(join(run.out, "results.jsonl"))).toHaveLength(instances.length);
  });

  it("--empty resolves none: each FAIL_TO_PASS test fails and the PASS_TO_PASS tests still pass", async () => {
    const run = await bench("empty", { empty: true });
    for (const inst of instances) {
      const r = run.results.get(inst.instance_id);
      expect(r?.swe?.status, `${inst.instance_id}: ${r?.error}`).toBe("unresolved");
      expect(r?.swe?.failToPass).toEqual({ passed: 0, total: inst.FAIL_TO_PASS.length });
      expect(r?.swe?.passToPass.passed).toBe(inst.PASS_TO_PASS.length);
    }
    expect(run.summary.arms.off?.passed).toBe(0);
  });

  it("--predictions: a patch that does not apply is patch_failed; a test file the model changed is put back before test_patch", async () => {
    const [first, second] = instances;
    if (!first || !second) throw new Error("the example has fewer than two instances");
    // The gold fix plus a change to the test file that would fail every test of it.
    const tree = await checkoutInstance(base.repos, first, join(work, "sabotage"));
    execFileSync("git", ["apply", "-"], { cwd: tree, input: first.patch });
    const testFile = join(tree, "tests/test_more.py");
    writeFileSync(testFile, `raise SystemExit("the model broke the tests")\n${readFileSync(testFile, "utf8")}`);
    const sabotage = execFileSync("git", ["diff"], { cwd: tree, encoding: "utf8" });
    expect(sabotage).toContain("diff --git a/tests/test_more.py b/tests/test_more.py");
    // The gold fix whose first removed line (not the `--- a/` header) is not in the file.
    const stale = second.patch.replace(/^-(?!-- )(\s*)(\S)/m, "-$1nonexistent_line_$2");
    expect(stale).toContain("nonexistent_line_");
    expect(stale).not.toBe(second.patch);
    const file = join(work, "predictions.jsonl");
    writeFileSync(
      file,
      [
        { instance_id: first.instance_id, model_name_or_path: "test", model_patch: sabotage },
        { instance_id: second.instance_id, model_name_or_path: "test", model_patch: stale },
      ]
        .map((p) => JSON.stringify(p))
        .join("\n"),
    );
    const run = await bench("predictions", { predictions: file });
    expect(run.results.size).toBe(2);
    const reverted = run.results.get(first.instance_id);
    expect(reverted?.swe?.status, reverted?.error).toBe("resolved");
    const failed = run.results.get(second.instance_id);
    expect(failed?.swe?.status).toBe("patch_failed");
    expect(failed?.swe?.testMs).toBe(0);
    expect(run.summary.provider).toMatchObject({ label: "model", name: "predictions", model: "test" });
  });
});
