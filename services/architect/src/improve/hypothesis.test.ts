/**
 * PLAN's failure: a hypothesis call that throws ends the generation as `error` (run.ts), and
 * its report holds only the error's text, so the error says which call failed; its code and
 * whether it may be retried are kept (a retryable one makes the run resume, not reject).
 */
import { describe, expect, it } from "vitest";
import { ImproveRequest } from "@loopsmith/shared/contracts";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { type LlmProvider } from "@loopsmith/shared/llm";
import { errorReport } from "./generation.js";
import { hypothesize } from "./hypothesis.js";
import { initialImproveState } from "./state.js";

const request = ImproveRequest.parse({
  v: 1,
  runId: "hyp-run",
  repo: { baseCommit: "a".repeat(40), snapshot: "snap-a" },
  language: "python",
  settings: { goal: "faster slugs", check: "python3 -m pytest -q", bench: "python3 bench/run.py" },
  submittedAt: new Date().toISOString(),
});

/** A provider whose every call throws `err`. */
function failing(err: unknown): LlmProvider {
  return {
    info: { name: "scripted", model: "script:test", scripted: true },
    complete: () => Promise.reject(err),
  };
}

const ask = (provider: LlmProvider) =>
  hypothesize(provider, {
    request,
    generation: 1,
    taskId: "hyp-run-gen-1",
    map: "",
    reports: [],
    earlier: [],
    failing: [],
    protectedGlobs: [],
    check: "python3 -m pytest -q",
  });

describe("hypothesize when the provider fails", () => {
  it("names the hypothesis call in the error, keeping its code and retryable, and the error report says it", async () => {
    const bad = new LoopsmithError("llm_bad_reply", "the model's reply was still unusable after one re-ask");
    const err = await ask(failing(bad)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LoopsmithError);
    expect(err).toMatchObject({
      code: "llm_bad_reply",
      retryable: false,
      message: "asking for the hypothesis (role improve): the model's reply was still unusable after one re-ask",
    });
    expect((err as Error).cause).toBe(bad);
    const report = errorReport(initialImproveState(request), err, new Date().toISOString());
    expect(report.decision).toEqual({
      verdict: "rejected",
      reason: "error",
      message:
        "llm_bad_reply: asking for the hypothesis (role improve): the model's reply was still unusable after one re-ask",
    });
  });

  it("keeps a retryable error retryable, and passes on what is not a LoopsmithError unchanged", async () => {
    const down = new LoopsmithError("llm_overloaded", "overloaded", { retryable: true });
    await expect(ask(failing(down))).rejects.toMatchObject({ code: "llm_overloaded", retryable: true });
    const bug = new TypeError("x is undefined");
    await expect(ask(failing(bug))).rejects.toBe(bug);
  });
});
