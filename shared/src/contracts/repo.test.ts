import { describe, expect, it } from "vitest";
import { repoModeOf, runLimitFromBaseline } from "./repo.js";

const repo: { baseCommit: string; snapshot: string; mode?: "agent" | "oneshot" } = {
  baseCommit: "a".repeat(40),
  snapshot: "tree.tar",
};
const script = (replies: object, tasks?: Record<string, object>) => ({
  v: 1,
  kind: "loopsmith-script",
  replies,
  ...(tasks ? { tasks } : {}),
});

describe("repoModeOf", () => {
  it("is agent by default and the task's own mode when it names one", () => {
    expect(repoModeOf({ repo })).toBe("agent");
    expect(repoModeOf({ repo: { ...repo, mode: "oneshot" } })).toBe("oneshot");
    expect(repoModeOf({ repo: { ...repo, mode: "agent" }, script: script({ build: [] }) })).toBe("agent");
  });

  it("replays a script written for one-shot builds in one-shot mode, and one with agent turns in agent mode", () => {
    expect(repoModeOf({ repo, script: script({ plan: [{}], build: [{}] }) })).toBe("oneshot");
    expect(repoModeOf({ repo, script: script({ plan: [{}] }, { "gen-1": { build: [{}] } }) })).toBe("oneshot");
    expect(repoModeOf({ repo, script: script({ build: [{}], agent: [{}] }) })).toBe("agent");
    expect(repoModeOf({ repo, script: script({ reflect: [{}] }) })).toBe("agent");
    // A simulation answers one-shot builds only.
    expect(repoModeOf({ repo, script: { kind: "loopsmith-simulation" } })).toBe("oneshot");
  });
});

describe("runLimitFromBaseline", () => {
  it("is three times the baseline's wall time, rounded up to a second", () => {
    expect(runLimitFromBaseline({ durationMs: 25_200, timedOut: false }, 300_000, 30_000)).toBe(76_000);
  });

  it("never goes under the floor (a quick suite keeps today's 30 s)", () => {
    expect(runLimitFromBaseline({ durationMs: 5_500, timedOut: false }, 300_000, 30_000)).toBe(30_000);
    expect(runLimitFromBaseline({ durationMs: 5_500, timedOut: false }, 300_000, 45_000)).toBe(45_000);
  });

  it("never goes over the largest run the contract allows (600 s)", () => {
    expect(runLimitFromBaseline({ durationMs: 400_000, timedOut: false }, 600_000, 30_000)).toBe(600_000);
  });

  it("takes the baseline's own limit when the baseline timed out or did not run", () => {
    expect(runLimitFromBaseline({ durationMs: 300_000, timedOut: true }, 300_000, 30_000)).toBe(300_000);
    expect(runLimitFromBaseline({ durationMs: 0, timedOut: false }, 300_000, 30_000)).toBe(300_000);
  });
});
