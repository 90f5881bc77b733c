/**
 * examples/self-improve, as the README runs it: loopsmith improving its own repository (a
 * clone of this one) with the scripted replies, the real sandbox running the example's
 * benchmark (34 labelled failure pairs for services/memory/src/signature.ts) and its check.
 * Generation 1 is accepted on the statistics, 2 rejected for its regression, 3 rejected as
 * `protected` (it loosens the decision's alpha) before any benchmark runs.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GenerationReport } from "@loopsmith/shared/contracts";
import { REPO, loopsmith } from "../fixtures/cli.js";

const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-self-e2e-"));
const env = {
  LOOPSMITH_DATA_DIR: dataDir,
  NATS_URL: "",
  DATABASE_URL: "",
  ANTHROPIC_API_KEY: "",
  LOOPSMITH_PROVIDER: "",
  LOG_LEVEL: "info",
};

function git(dir: string, ...args: string[]): string {
  return execFileSync("git", ["-C", dir, ...args], { encoding: "utf8" }).trim();
}

describe("examples/self-improve (loopsmith on itself, scripted, real sandbox)", () => {
  it("accepts generation 1 on the statistics, rejects 2 for regression and 3 as protected", async () => {
    const clone = mkdtempSync(join(tmpdir(), "loopsmith-self-clone-"));
    execFileSync("git", ["clone", "-q", REPO, clone]);
    const head = git(clone, "rev-parse", "HEAD");
    // The example pins the commit it improves (its "base"), so its scripted edits still apply
    // after the product's own signatures changed.
    const config = JSON.parse(readFileSync(join(REPO, "examples/self-improve/loopsmith.json"), "utf8")) as {
      improve: { base: string };
    };
    const base = config.improve.base;
    const out = join(clone, "..", `${clone.split("/").pop()}-run`);
    const run = await loopsmith(
      [
        "improve",
        "--repo",
        clone,
        "--config",
        join(REPO, "examples/self-improve/loopsmith.json"),
        "--provider",
        "scripted",
        "--script",
        join(REPO, "examples/self-improve/script.json"),
        "--run-id",
        "self-e2e",
        "--out",
        out,
      ],
      env,
      600_000,
    );
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/^SCRIPTED RUN/);
    const reports = [1, 2, 3].map((n) =>
      GenerationReport.parse(JSON.parse(readFileSync(join(out, "reports", `gen-${n}.json`), "utf8"))),
    );
    const [g1, g2, g3] = reports as [GenerationReport, GenerationReport, GenerationReport];
    expect(reports.map((r) => [r.decision.verdict, r.decision.reason])).toEqual([
      ["accepted", "accepted"],
      ["rejected", "regression"],
      ["rejected", "protected"],
    ]);
    // Generation 1: 21/34 → 31/34, 10 fixed, none broken; on the selection set (70% of the
    // cases, the rest held out) the one-sided exact sign test p = 0.5^(selection's fixed), and the
    // held-out confirmation set confirms it.
    expect(g1.statistic).toMatchObject({ test: "mcnemar_exact", cases: 34, fixed: 10, broken: 0 });
    expect(g1.statistic?.pValue).toBeCloseTo(0.5 ** (g1.statistic?.selection?.fixed ?? 0), 10);
    expect(g1.statistic?.confirmation?.passed).toBe(true);
    expect(g1.check?.candidate?.total).toBe(g1.check?.parent?.total);
    // Generation 2 starts from generation 1 and breaks 10 of its passing cases.
    expect(g2.parent).toBe(g1.candidate);
    expect(g2.statistic).toMatchObject({ fixed: 2, broken: 10 });
    // Generation 3 edits the decision's contract: rejected before any benchmark ran.
    expect(g3.change?.changed).toEqual(["shared/src/contracts/improve.ts"]);
    expect(g3.bench).toBeUndefined();
    expect(g3.decision.message).toContain("shared/src/contracts/improve.ts");
    // The accepted chain is on the run's branch; the clone's own branch did not move.
    expect(git(clone, "rev-parse", "loopsmith/improve/self-e2e^")).toBe(base);
    expect(git(clone, "diff", "--name-only", base, "loopsmith/improve/self-e2e").split("\n").sort()).toEqual([
      "services/memory/src/signature.test.ts",
      "services/memory/src/signature.ts",
    ]);
    expect(git(clone, "rev-parse", "HEAD")).toBe(head);
    expect(git(clone, "status", "--porcelain")).toBe("");
    // As long as the CLI call may take: 397 s with its 3 calibration runs on a shared 2-core machine at load 16–20.
  }, 600_000);
});
