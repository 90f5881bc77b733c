/**
 * The reviewer service over real NATS: the gate and the review endpoints, typed errors for
 * garbage, and a service that keeps serving afterwards. The model is a test double (no LLM
 * is reachable); NATS is real.
 */
import { describe, expect } from "vitest";
import pino from "pino";
import { call, Endpoints } from "@loopsmith/shared/bus";
import { LoopsmithError, loadConfig, runService } from "@loopsmith/shared/runtime";
import { type Completion, type CompletionRequest, type LlmProvider } from "@loopsmith/shared/llm";
import { type Review, type ReviewRequest, type Usage } from "@loopsmith/shared/contracts";
import { reviewerService } from "@loopsmith/reviewer";
import { it } from "../fixtures/index.js";

const log = pino({ level: "silent" });

const usage: Usage = {
  calls: 1,
  inputTokens: 900,
  outputTokens: 60,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0.0036,
  latencyMs: 700,
};

/** A stand-in for the model: answers every review with `verdict`, or throws `error`. */
function fakeModel(verdict: Review, error?: LoopsmithError): LlmProvider & { calls: number } {
  return {
    info: { name: "fake", model: "fake-1", scripted: true },
    calls: 0,
    async complete<T>(request: CompletionRequest<T>): Promise<Completion<T>> {
      this.calls++;
      if (error) throw error;
      return { value: request.schema.parse(verdict), usage };
    },
  };
}

const header = (step: string, iteration = 1) => ({
  v: 1 as const,
  taskId: "task-rv",
  iteration,
  idempotencyKey: `task-rv/${iteration}/${step}`,
});

const reviewRequest = (iteration = 1): ReviewRequest => ({
  ...header("review", iteration),
  task: { goal: "add(a, b) returns the sum", language: "python", files: [], acceptanceTests: [] },
  plan: { summary: "write add", acceptanceCriteria: ["add(1, 2) == 3"], steps: ["write it"], files: ["solution.py"] },
  candidate: { files: [{ path: "solution.py", content: "def add(a, b):\n    return a + b\n" }], tests: [], notes: "" },
  budget: { remainingUsd: 2 },
});

const verdict: Review = {
  approved: true,
  score: 0.95,
  findings: [{ severity: "info", message: "fine", path: "solution.py" }],
};

describe("reviewer service over NATS", () => {
  it("gates blocked and clean candidates, reviews through the provider, and answers garbage with bad_request", async ({
    nats,
  }) => {
    const model = fakeModel(verdict);
    const config = loadConfig({ env: { NATS_URL: nats.url } });
    const running = await runService("reviewer", (deps) => reviewerService({ ...deps, provider: model }), {
      config,
      log,
    });
    const { nc } = running;
    try {
      // A blocked candidate: findings with lines, never executed.
      const blocked = await call(nc, Endpoints.reviewer.gate, {
        ...header("gate"),
        language: "python",
        files: [
          { path: "solution.py", content: "import os\n\ndef run(cmd):\n    return os.system(cmd)\n" },
          { path: "test_solution.py", content: "from solution import run\n" },
        ],
      });
      expect(blocked.blocked).toBe(true);
      expect(blocked.findings).toEqual([
        {
          severity: "blocker",
          message: "`os.system` runs a shell command",
          path: "solution.py",
          line: 4,
          rule: "os-command",
        },
      ]);

      // A clean candidate.
      const clean = await call(nc, Endpoints.reviewer.gate, {
        ...header("gate", 2),
        language: "javascript",
        files: [
          { path: "solution.js", content: "export const add = (a, b) => a + b;\n" },
          {
            path: "solution.test.js",
            content:
              'import { test } from "node:test";\nimport assert from "node:assert";\nimport { add } from "./solution.js";\ntest("add", () => assert.equal(add(1, 2), 3));\n',
          },
        ],
      });
      expect(clean).toEqual({ blocked: false, findings: [] });

      // The review returns the provider's value and usage, and says who answered.
      const reply = await call(nc, Endpoints.reviewer.review, reviewRequest());
      expect(reply).toEqual({ value: verdict, usage, provider: model.info });
      expect(model.calls).toBe(1);

      // Garbage: not JSON, and JSON that fails the schema.
      const notJson = JSON.parse(
        (await nc.request(Endpoints.reviewer.gate.subject, "{nope", { timeout: 5_000 })).string(),
      );
      expect(notJson).toMatchObject({ ok: false, error: { code: "bad_request", retryable: false } });
      const badSchema = JSON.parse(
        (
          await nc.request(
            Endpoints.reviewer.review.subject,
            JSON.stringify({ ...reviewRequest(), candidate: { files: [] } }),
            {
              timeout: 5_000,
            },
          )
        ).string(),
      );
      expect(badSchema).toMatchObject({ ok: false, error: { code: "bad_request" } });
      const escaping = JSON.parse(
        (
          await nc.request(
            Endpoints.reviewer.gate.subject,
            JSON.stringify({
              ...header("gate", 3),
              language: "python",
              files: [{ path: "../etc/passwd", content: "" }],
            }),
            { timeout: 5_000 },
          )
        ).string(),
      );
      expect(escaping).toMatchObject({ ok: false, error: { code: "bad_request" } });
      expect(model.calls).toBe(1);

      // Still serving after the garbage.
      await expect(
        call(nc, Endpoints.reviewer.gate, {
          ...header("gate", 4),
          language: "python",
          files: [{ path: "a.py", content: "x = 1\n" }],
        }),
      ).resolves.toEqual({ blocked: false, findings: [] });
      await expect(call(nc, Endpoints.reviewer.review, reviewRequest(5))).resolves.toMatchObject({ value: verdict });
    } finally {
      await running.stop();
    }
  });

  it("turns a provider error into a typed error reply, and keeps the gate serving without a provider", async ({
    nats,
  }) => {
    const config = loadConfig({ env: { NATS_URL: nats.url } });
    const failing = fakeModel(verdict, new LoopsmithError("budget_exceeded", "the task's budget is spent"));
    const first = await runService("reviewer", (deps) => reviewerService({ ...deps, provider: failing }), {
      config,
      log,
    });
    try {
      const err = await call(first.nc, Endpoints.reviewer.review, reviewRequest(), { retries: 0 }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LoopsmithError);
      expect((err as LoopsmithError).code).toBe("budget_exceeded");
      expect((err as LoopsmithError).retryable).toBe(false);
    } finally {
      await first.stop();
    }

    const noProvider = await runService(
      "reviewer",
      (deps) =>
        reviewerService({
          ...deps,
          makeProvider: () => {
            throw new LoopsmithError("config_invalid", "ANTHROPIC_API_KEY is not set");
          },
        }),
      { config, log },
    );
    try {
      const gated = await call(noProvider.nc, Endpoints.reviewer.gate, {
        ...header("gate"),
        language: "python",
        files: [{ path: "a.py", content: "import pickle\npickle.loads(blob)\n" }],
      });
      expect(gated.blocked).toBe(true);
      const err = await call(noProvider.nc, Endpoints.reviewer.review, reviewRequest(), { retries: 0 }).catch(
        (e: unknown) => e,
      );
      expect((err as LoopsmithError).code).toBe("config_invalid");
      expect((err as LoopsmithError).message).toBe("ANTHROPIC_API_KEY is not set");
    } finally {
      await noProvider.stop();
    }
  });
});
