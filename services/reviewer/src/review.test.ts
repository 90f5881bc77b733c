import { describe, expect, it } from "vitest";
import pino from "pino";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { loadPrompt, type Completion, type CompletionRequest, type LlmProvider } from "@loopsmith/shared/llm";
import { Review, ReviewRequest, type Usage } from "@loopsmith/shared/contracts";
import { createReviewer, renderReviewMessage } from "./review.js";

const log = pino({ level: "silent" });

const usage: Usage = {
  calls: 1,
  inputTokens: 1200,
  outputTokens: 80,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  costUsd: 0.0048,
  latencyMs: 900,
};

/** A stand-in for the model: returns the given replies (or throws the given errors) in order and records requests. */
class FakeModel implements LlmProvider {
  readonly info = { name: "fake", model: "fake-1", scripted: true };
  readonly requests: CompletionRequest<unknown>[] = [];
  constructor(private readonly replies: (Review | LoopsmithError)[]) {}
  async complete<T>(request: CompletionRequest<T>): Promise<Completion<T>> {
    this.requests.push(request as CompletionRequest<unknown>);
    await new Promise((r) => setTimeout(r, 5));
    const next = this.replies.shift();
    if (!next) throw new Error("the fake model has no reply left");
    if (next instanceof LoopsmithError) throw next;
    return { value: request.schema.parse(next), usage };
  }
}

const request = (key = "task-1/2/review") =>
  ReviewRequest.parse({
    v: 1,
    taskId: "task-1",
    iteration: 2,
    idempotencyKey: key,
    task: {
      goal: "Write add(a, b) that returns the sum of two integers.",
      language: "python",
      files: [],
      acceptanceTests: [
        { path: "test_add.py", content: "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n" },
      ],
    },
    plan: {
      summary: "Implement add in solution.py.",
      acceptanceCriteria: ["add(1, 2) == 3", "works for negative numbers"],
      steps: ["write add", "run the tests"],
      files: ["solution.py"],
    },
    candidate: {
      files: [{ path: "solution.py", content: "def add(a, b):\n    return a - b\n" }],
      tests: [{ path: "test_extra.py", content: "def test_neg():\n    assert add(-1, -1) == -2\n" }],
      notes: "subtracts on purpose?",
    },
    budget: { remainingUsd: 1.5, remainingTokens: 50_000 },
  });

const verdict: Review = {
  approved: false,
  score: 0.1,
  findings: [{ severity: "error", message: "add subtracts instead of adding", path: "solution.py", line: 2 }],
};

describe("review", () => {
  it("asks the review role with the prompt, schema, budget and context, and returns value, usage and provider", async () => {
    const model = new FakeModel([verdict]);
    const reviewer = createReviewer({ provider: model, log });
    const reply = await reviewer.review(request());
    expect(reply).toEqual({ value: verdict, usage, provider: model.info });

    expect(model.requests).toHaveLength(1);
    const sent = model.requests[0]!;
    expect(sent.role).toBe("review");
    expect(sent.schemaName).toBe("review");
    expect(sent.schema).toBe(Review);
    expect(sent.system).toBe(loadPrompt("review").system);
    expect(sent.context).toEqual({ taskId: "task-1", iteration: 2 });
    expect(sent.budget).toEqual({ remainingUsd: 1.5, remainingTokens: 50_000 });
    expect(sent.messages).toHaveLength(1);
    expect(sent.messages[0]?.role).toBe("user");
    const text = sent.messages[0]?.content ?? "";
    for (const part of [
      "Write add(a, b) that returns the sum",
      "assert add(1, 2) == 3",
      "Implement add in solution.py.",
      "- works for negative numbers",
      "2. run the tests",
      "--- solution.py",
      "return a - b",
      "--- test_extra.py",
      "subtracts on purpose?",
    ]) {
      expect(text).toContain(part);
    }
  });

  it("answers a repeated idempotency key without a second model call, also while the first is in flight", async () => {
    const model = new FakeModel([verdict, { ...verdict, approved: true, score: 0.9 }]);
    const reviewer = createReviewer({ provider: model, log });
    const [a, b] = await Promise.all([reviewer.review(request()), reviewer.review(request())]);
    const c = await reviewer.review(request());
    expect(model.requests).toHaveLength(1);
    expect(a).toEqual(b);
    expect(c).toEqual(a);
    const other = await reviewer.review(request("task-1/3/review"));
    expect(other.value.approved).toBe(true);
    expect(model.requests).toHaveLength(2);
  });

  it("propagates the provider's typed error and lets a retry call the model again", async () => {
    const model = new FakeModel([new LoopsmithError("llm_rate_limited", "slow down"), verdict]);
    const reviewer = createReviewer({ provider: model, log });
    const err = await reviewer.review(request()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LoopsmithError);
    expect((err as LoopsmithError).code).toBe("llm_rate_limited");
    await expect(reviewer.review(request())).resolves.toMatchObject({ value: verdict });
    expect(model.requests).toHaveLength(2);
  });

  it("forgets the oldest replies beyond the cache size", async () => {
    const model = new FakeModel([verdict, verdict, verdict]);
    const reviewer = createReviewer({ provider: model, log, cacheSize: 1 });
    await reviewer.review(request("task-1/1/review"));
    await reviewer.review(request("task-1/2/review"));
    await reviewer.review(request("task-1/1/review"));
    expect(model.requests).toHaveLength(3);
  });

  it("shows the gate's tampering concerns with file and line, and the prompt names evaluation tampering as a reason to reject", () => {
    const req = {
      ...request(),
      concerns: [
        {
          severity: "warning" as const,
          message: "`sys.argv` tested in a function",
          path: "solution.py",
          line: 4,
          rule: "tampering.branch_on_runner",
        },
      ],
    };
    const text = renderReviewMessage(req);
    expect(text).toContain("## Gate concerns");
    expect(text).toContain("- solution.py:4 (tampering.branch_on_runner): `sys.argv` tested in a function");
    expect(renderReviewMessage(request())).not.toContain("Gate concerns");
    const prompt = loadPrompt("review");
    expect(prompt.version).toBe(2);
    for (const part of [
      "Reject evaluation tampering",
      "result file",
      "ending the process early",
      "patching the test framework",
      "special-casing the tests or the benchmark",
    ]) {
      expect(prompt.system).toContain(part);
    }
  });

  it("leaves out empty sections", () => {
    const req = request();
    req.candidate.tests = [];
    req.candidate.notes = "";
    const text = renderReviewMessage(req);
    expect(text).not.toContain("Generated tests");
    expect(text).not.toContain("Builder's notes");
    expect(text).toContain("## Candidate files");
  });
});
