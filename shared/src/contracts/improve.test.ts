import { describe, expect, it } from "vitest";
import { GenerationError, GenerationReport, GenerationReview } from "./improve.js";

/** A report as loopsmith wrote it before reviews and errors were recorded (the JSON of a `reports/gen-N.json`). */
const OLD_REPORT = JSON.parse(`{
  "v": 1,
  "runId": "improve-1a2b3c4d",
  "generation": 2,
  "parent": "0123456789abcdef0123456789abcdef01234567",
  "hypothesis": { "title": "Normalize accents", "rationale": "", "expected": "", "files": ["slug.py"] },
  "taskId": "improve-1a2b3c4d-gen-2",
  "decision": { "verdict": "rejected", "reason": "timeout", "message": "the generation passed its time limit of 1800 s while its task was running" },
  "usage": { "calls": 3, "inputTokens": 1200, "outputTokens": 300, "cacheReadTokens": 0, "cacheWriteTokens": 0, "costUsd": 0.0042, "latencyMs": 900 },
  "phasesMs": { "plan": 1200, "implement": 1800000 },
  "startedAt": "2025-01-01T00:00:00.000Z",
  "finishedAt": "2025-01-01T00:30:01.200Z"
}`) as Record<string, unknown>;

const REVIEWS = [
  {
    iteration: 1,
    approved: false,
    score: 0.3,
    findings: [
      { severity: "blocker", rule: "security.eval", path: "slug.py", line: 12, message: "eval of user input" },
      { severity: "info", message: "no test covers the new branch" },
    ],
  },
  { iteration: 2, approved: true, score: 0.9, findings: [] },
];
const ERRORS = [
  { phase: "implement", code: "unavailable", message: "lost the events of task x", retried: true },
  { phase: "bench", message: "no check command" },
];

describe("GenerationReport", () => {
  it("parses a report written before reviews and errors were recorded, without adding them", () => {
    const parsed = GenerationReport.parse(OLD_REPORT);
    expect(parsed.reviews).toBeUndefined();
    expect(parsed.errors).toBeUndefined();
    expect(parsed.phasesMs).toEqual({ plan: 1200, implement: 1_800_000 });
    expect(JSON.parse(JSON.stringify(parsed))).toEqual(OLD_REPORT);
  });

  it("keeps the reviews' findings as the reviewer gave them and the errors with their phase", () => {
    const parsed = GenerationReport.parse({ ...OLD_REPORT, reviews: REVIEWS, errors: ERRORS });
    expect(parsed.reviews).toEqual(REVIEWS);
    expect(parsed.errors).toEqual(ERRORS);
    expect(GenerationReport.parse(JSON.parse(JSON.stringify(parsed)))).toEqual(parsed);
  });

  it("refuses a review or an error that is not one, saying where", () => {
    const badSeverity = GenerationReport.safeParse({
      ...OLD_REPORT,
      reviews: [{ ...REVIEWS[0], findings: [{ severity: "fatal", message: "x" }] }],
    });
    expect(badSeverity.success).toBe(false);
    expect(badSeverity.error?.issues[0]?.path).toEqual(["reviews", 0, "findings", 0, "severity"]);

    const badPhase = GenerationReport.safeParse({ ...OLD_REPORT, errors: [{ phase: "deploy", message: "x" }] });
    expect(badPhase.success).toBe(false);
    expect(badPhase.error?.issues[0]?.path).toEqual(["errors", 0, "phase"]);

    expect(GenerationReview.safeParse({ iteration: 1, approved: true, score: 1.5, findings: [] }).success).toBe(false);
    expect(GenerationError.safeParse({ phase: "plan", message: "x".repeat(2_001) }).success).toBe(false);
    expect(GenerationError.safeParse({ phase: "plan", message: "x".repeat(2_000) }).success).toBe(true);
  });
});
