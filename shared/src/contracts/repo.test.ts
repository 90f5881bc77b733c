import { describe, expect, it } from "vitest";
import { repoModeOf } from "./repo.js";

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
