/**
 * `loopsmith bench --format swe-bench` end to end with the agent: the
 * first shipped instance (examples/swe-bench) becomes an agent-mode repo task of a stack the run
 * starts (real NATS, PGlite memory, the Docker sandbox), answered by its scripted transcript
 * (examples/swe-bench/scripts: search, read, run, edit, run, submit) with no model; the
 * task's patch is then graded by the official rule. The first instance resolves, the transcript's
 * steps are the script's tools, and predictions.jsonl holds the agent's patches, which the
 * offline `--predictions` grading resolves too.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO, jsonLines, loopsmith } from "../fixtures/cli.js";

const EX = join(REPO, "examples/swe-bench");
const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-swe-agent-"));
const env = { LOOPSMITH_DATA_DIR: dataDir, NATS_URL: "", DATABASE_URL: "", LOG_LEVEL: "warn" };
// One instance keeps the suite's time down (about a minute each on the CI machine); all three
// resolve this way by hand (`bench --format swe-bench ... --provider scripted`), and every
// one's gold patch is graded in tests/cli/swe-bench.test.ts.
const ids = jsonLines(readFileSync(join(EX, "instances.jsonl"), "utf8"))
  .map((l) => String(l.instance_id))
  .slice(0, 1);
const common = [
  "bench",
  "--format",
  "swe-bench",
  "--dataset",
  join(EX, "instances.jsonl"),
  "--repos",
  join(EX, "repos"),
  "--env",
  join(EX, "env.json"),
  "--ids",
  ids.join(","),
];

describe("swe-bench agent run (scripted transcripts through the stack)", () => {
  it("resolves a shipped instance from the agent's own patch", async () => {
    const out = join(dataDir, "agent");
    const run = await loopsmith(
      [...common, "--provider", "scripted", "--concurrency", "3", "--out", out, "--json"],
      env,
      1_500_000,
    );
    expect(run.code, run.stderr).toBe(0);
    const results = jsonLines(readFileSync(join(out, "results.jsonl"), "utf8"));
    expect(results.map((r) => r.caseId).sort()).toEqual([...ids].sort());
    for (const r of results) {
      const swe = r.swe as { status: string; steps: number };
      expect(swe.status, `${String(r.caseId)}: ${String(r.error)}`).toBe("resolved");
      const steps = jsonLines(readFileSync(join(out, "logs", `${String(r.caseId)}.steps.jsonl`), "utf8"));
      expect(swe.steps).toBe(steps.length);
      // The script's first iteration, in order: search, read, run, edit, run, submit.
      expect(steps.filter((s) => s.iteration === 1).map((s) => s.tool)).toEqual([
        "search",
        "read",
        "run",
        "edit",
        "run",
        "submit",
      ]);
    }
    const predictions = jsonLines(readFileSync(join(out, "predictions.jsonl"), "utf8"));
    expect(predictions.every((p) => String(p.model_patch).includes("diff --git a/more_itertools/more.py"))).toBe(true);

    // The same patches, graded offline as any agent's predictions.
    const regrade = await loopsmith(
      [...common, "--predictions", join(out, "predictions.jsonl"), "--out", join(dataDir, "regrade"), "--json"],
      env,
      900_000,
    );
    expect(regrade.code, regrade.stderr).toBe(0);
    const summary = jsonLines(regrade.stdout).find((l) => l.kind === "summary") as {
      arms: { off: { passed: number; tasks: number } };
    };
    expect(summary.arms.off).toMatchObject({ passed: ids.length, tasks: ids.length });
  }, 2_400_000);
});
