import { describe, expect, it } from "vitest";
import { GenerationReport } from "@loopsmith/shared/contracts";
import { PR_BODY_MAX, prBody } from "./github.js";

describe("prBody", () => {
  const side = (passes: number) => ({ passes, runs: 2, scores: [] });
  const report = (generation: number, n: number, caseName = (i: number) => `case-${i}`): GenerationReport =>
    GenerationReport.parse({
      v: 1,
      runId: "r",
      generation,
      parent: "0123456789abcdef0123456789abcdef01234567",
      hypothesis: { title: "Normalize accents | before slugifying", rationale: "8 titles have accents" },
      change: {
        summary: "normalize",
        patch: "",
        changed: ["textkit/slug.py"],
        deleted: ["old.py"],
        stat: { files: 2, insertions: 5, deletions: 1 },
      },
      bench: {
        command: "python3 bench/run.py",
        format: "json",
        repeats: 2,
        cases: Array.from({ length: n }, (_, i) => ({
          case: caseName(i),
          parent: side(i % 2 ? 0 : 2),
          candidate: side(2),
        })),
      },
      statistic: {
        test: "mcnemar_exact",
        cases: n,
        fixed: Math.floor(n / 2),
        broken: 0,
        pValue: 2 * 0.5 ** 8,
        alpha: 0.05,
        effect: 0.5,
      },
      decision: { verdict: "accepted", reason: "accepted", message: "8 fixed, none broken" },
      usage: {
        calls: 4,
        inputTokens: 12000,
        outputTokens: 3456,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        costUsd: 0.05678,
        latencyMs: 1,
      },
      phasesMs: {},
      startedAt: "2025-01-01T00:00:00Z",
      finishedAt: "2025-01-01T00:01:00Z",
    });

  it("gives the hypothesis, decision, statistic, diff stat, the changed cases only, and the cost", () => {
    const body = prBody(report(6, 16), "run-1");
    expect(body).toContain("## loopsmith improvement run `run-1`");
    expect(body).toContain("**Hypothesis:** Normalize accents \\| before slugifying");
    expect(body).toContain("**Decision:** accepted (`accepted`): 8 fixed, none broken");
    expect(body).toContain(
      "exact McNemar test on 16 paired cases: 8 fixed, 0 broken, p = 0.00781 (alpha 0.05), effect +50.0 percentage points",
    );
    expect(body).toContain("2 files changed, +5 −1");
    expect(body).toContain("`textkit/slug.py`, `old.py` (deleted)");
    expect(body).toContain("16/32 passes on the parent, 32/32 on the candidate");
    const rows = body.split("\n").filter((l) => /^\| case-/.test(l));
    expect(rows).toEqual(Array.from({ length: 8 }, (_, k) => `| case-${2 * k + 1} | 0/2 | 2/2 |`));
    expect(body).toContain("8 of 16 cases unchanged.");
    expect(body).toContain("4 model calls, 15,456 tokens (12,000 in, 3,456 out), $0.0568");
    expect(body).not.toMatch(/scripted/i);
  });

  it("says so first when the run was scripted", () => {
    const body = prBody([report(1, 4), report(2, 4)], "run-1", { scripted: true });
    expect(body.split("\n")[2]).toMatch(/^> \*\*Scripted run:\*\* .*no model was called/);
    expect(body.match(/^### Generation \d+: accepted$/gm)).toEqual([
      "### Generation 1: accepted",
      "### Generation 2: accepted",
    ]);
  });

  it("stays under GitHub's limit by cutting the case list, with a note", () => {
    const body = prBody(
      report(3, 8000, (i) => `tests/very/long/path/to/a/benchmark/case/number/${i}/${"x".repeat(60)}`),
      "run-1",
    );
    expect(body.length).toBeLessThanOrEqual(PR_BODY_MAX);
    expect(body.length).toBeGreaterThan(PR_BODY_MAX - 500);
    const rows = body.split("\n").filter((l) => l.startsWith("| tests/")).length;
    expect(rows).toBeGreaterThan(100);
    expect(rows).toBeLessThan(4000);
    expect(body).toContain(`…and ${(4000 - rows).toLocaleString("en-US")} more changed cases, left out`);
    expect(body).toContain("**Cost:**");
  });
});
