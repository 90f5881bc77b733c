/**
 * `improve` with no benchmark, on real NATS and the real sandbox (the executor on the Docker engine, the
 * sandbox-python image's pytest, coverage, pyflakes and mypy): a run with no benchmark judges
 * each generation on the repository's own quality metrics. The fixture (tests/fixtures/quality-repo)
 * has an unused import, a type error under `mypy.ini`'s strictness, and a branch the unit tests
 * do not cover that a subprocess test exercises. Generations (a stand-in conductor writes the
 * files; a scripted model names them):
 * 1. deletes the uncovered branch and lowers mypy's strictness in mypy.ini (coverage's
 *    percentage rises) → rejected `metric_regressed`, naming `tests` (the subprocess test fails)
 *    and `type_errors` (its configuration changed); coverage counts no line as newly covered;
 * 2. removes the unused import → accepted, lint improved.
 * mypy is given 0.1 s (it needs 0.9–1.5 s cold on an idle machine, ~15 s on a loaded one; a
 * 1 s limit made the outcome depend on the load), so `type_errors` is
 * `unavailable` with that reason: an unavailable metric takes no part (never a 0), while a
 * change of its tool's configuration still rejects. The decision's other cases are unit tests
 * (services/architect/src/improve/metrics.test.ts); each generation here costs two sandbox runs.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, onTestFinished } from "vitest";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import {
  DEFAULT_OWNER,
  ensureStreams,
  followEvents,
  materializeSnapshot,
  putSnapshot,
  submitImprove,
} from "@loopsmith/shared/bus";
import { snapshotName, type ImproveSummary } from "@loopsmith/shared/contracts";
import { type LlmProvider } from "@loopsmith/shared/llm";
import { startImprover } from "@loopsmith/architect";
import { createExecutor, snapshotLoader } from "@loopsmith/executor";
import { gate } from "@loopsmith/reviewer";
import { it } from "../fixtures/index.js";
import { docker, testConfig } from "../executor/helpers.js";
import { fakeConductor } from "./fake-conductor.js";
import { log, usage } from "./helpers.js";

const FIXTURE = join(import.meta.dirname, "..", "fixtures", "quality-repo");
const BASE = "c".repeat(40);
/** The check is `true` (one synthetic case): the checks are not what this test is about, and a pytest run costs ~15 s here. */
const CHECKS = ["true"];

/** Generation n's edit of the base tree. */
function edit(n: number, read: (p: string) => string | undefined): Record<string, string> {
  const text = (p: string): string => read(p) ?? "";
  if (n === 1)
    return {
      "mypy.ini": text("mypy.ini").replace("disallow_untyped_defs = True", "disallow_untyped_defs = False"),
      "qualkit/cli.py": text("qualkit/cli.py").replace(/ {4}if x < 0:\n.*\n.*\n/, ""),
    };
  return { "qualkit/core.py": text("qualkit/core.py").replace("import os\n", "") };
}

const model: LlmProvider = {
  info: { name: "scripted", model: "scripted", scripted: true },
  async complete<T>(req: { context: { iteration: number } }) {
    const titles = ["drop the uncovered negative branch, relax the type checker", "remove the unused import"];
    return {
      value: { title: titles[req.context.iteration - 1] ?? "nothing", rationale: "", expected: "", files: [] } as T,
      usage: usage(0),
      provider: { name: "scripted", model: "scripted", scripted: true },
    };
  },
} as unknown as LlmProvider;

async function summaryOf(nc: NatsConnection, runId: string): Promise<ImproveSummary> {
  for await (const e of followEvents(nc, DEFAULT_OWNER, runId, AbortSignal.timeout(120_000)))
    if (e.kind === "result") return e.data?.summary as ImproveSummary;
  throw new Error(`no result for ${runId}`);
}

describe("improve with no benchmark: the repository's quality metrics", () => {
  it("rejects a coverage-raising deletion and a lowered type-check setting with the metrics named, and accepts a lint fix", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    await ensureStreams(nc);
    const cache = mkdtempSync(join(tmpdir(), "metrics-cache-"));
    const ex = createExecutor({
      docker,
      config: testConfig({ warmPoolSize: 1 }),
      log,
      kinds: ["python"],
      loadBase: snapshotLoader(nc, cache),
    });
    await ex.start();
    const stop = fakeConductor(nc, {
      write: (_task, before) => before,
      files: (task, read) => edit(Number(/-gen-(\d+)$/.exec(task.taskId)?.[1] ?? 0), read),
      checks: CHECKS,
      summary: "one quality change",
    });
    const imp = await startImprover({
      nc,
      log,
      provider: model,
      execute: (req) => ex.run(req),
      gate: async (req) => gate(req),
      tree: (s) => materializeSnapshot(nc, s, cache),
      cancelTask: async () => undefined,
    });
    onTestFinished(async () => {
      stop();
      await imp.stop();
      await ex.stop();
      await nc.close();
      rmSync(cache, { recursive: true, force: true });
    });
    await putSnapshot(
      nc,
      snapshotName(BASE),
      execFileSync("tar", ["-cf", "-", "--exclude=README.md", "-C", FIXTURE, "."]),
    );
    await submitImprove(nc, {
      v: 1,
      runId: "quality",
      repo: { baseCommit: BASE, snapshot: snapshotName(BASE), setupCommand: "" },
      language: "python",
      settings: {
        check: "true",
        generations: 2,
        benchmarks: { enabled: ["tests", "coverage", "lint", "type_errors"], timeouts: { type_errors: 0.1 } },
      },
      submittedAt: new Date().toISOString(),
    });
    const summary = await summaryOf(nc, "quality");
    const { reports } = await imp.status("quality", DEFAULT_OWNER);
    expect(reports.map((r) => r.decision.reason)).toEqual(["metric_regressed", "accepted"]);
    expect(summary.accepted).toEqual([2]);
    expect(summary.alpha).toMatchObject({ budget: 0.05, tests: 2 });

    const [deleted, lint] = reports.map((r) => r.metrics);
    // 1: the subprocess test broke, and mypy.ini changed; mypy itself is unavailable (its 0.1 s limit).
    expect(deleted?.regressed).toEqual(["tests", "type_errors"]);
    const te = deleted?.metrics.find((m) => m.metric === "type_errors");
    expect(te).toMatchObject({ status: "unavailable", regressed: true, parentValues: [], candidateValues: [] });
    expect(te?.reason).toMatch(/time limit of 0\.1s/);
    expect(reports[0]?.decision.message).toContain("changed type_errors's configuration (mypy.ini)");
    // Coverage's percentage rose, and no line was newly covered.
    const cov = deleted?.metrics.find((m) => m.metric === "coverage");
    expect(cov?.delta).toBeGreaterThan(0);
    expect(cov).toMatchObject({ status: "measured", fixed: 0, broken: 0 });
    expect(cov?.tool.parent).toMatch(/^coverage \d/);
    const tests = deleted?.metrics.find((m) => m.metric === "tests");
    expect(tests).toMatchObject({ broken: 1, brokenCases: ["tests.test_cli::test_cli_prints_negative"] });

    // 2: the unused import is gone, nothing broke.
    const l = lint?.metrics.find((m) => m.metric === "lint");
    expect(l).toMatchObject({
      status: "measured",
      test: "deterministic",
      fixed: 1,
      broken: 0,
      parentValues: [1],
      candidateValues: [0],
    });
    expect(l?.tool.candidate).toMatch(/^pyflakes \d/);
    expect(lint?.improved).toEqual(["lint"]);
    expect(readFileSync(join(FIXTURE, "qualkit/core.py"), "utf8")).toContain("import os"); // the fixture is untouched
  });
});
