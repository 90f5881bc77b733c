import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import type { TaskEvent, TaskInput } from "@loopsmith/shared/contracts";
import {
  allowListPaths,
  approvalRequestOf,
  approvalText,
  askYesNo,
  canAsk,
  decisionLines,
  decisionsMarkdown,
  readAllowLists,
  withApprovals,
} from "./approvals.js";

const COMMIT = "c".repeat(40);
const repoTask = (dependencies: "reject" | "ask" | "allow"): TaskInput => ({
  v: 1,
  taskId: "t1",
  goal: "g",
  language: "python",
  repo: { baseCommit: COMMIT, snapshot: `tree-${COMMIT}.tar`, dependencies },
  submittedAt: new Date().toISOString(),
});
const event = (data: unknown): TaskEvent =>
  ({
    v: 1,
    taskId: "t1",
    seq: 3,
    at: new Date().toISOString(),
    iteration: 1,
    kind: "step",
    message: "m",
    data,
  }) as TaskEvent;

describe("allowlists", () => {
  it("are the repository's .loopsmith/allowed-dependencies and the user's, under XDG_CONFIG_HOME", () => {
    const repo = mkdtempSync(join(tmpdir(), "allow-repo-"));
    const config = mkdtempSync(join(tmpdir(), "allow-config-"));
    const env = { XDG_CONFIG_HOME: config, HOME: "/nonexistent" };
    expect(allowListPaths(repo, env)).toEqual([
      join(repo, ".loopsmith", "allowed-dependencies"),
      join(config, "loopsmith", "allowed-dependencies"),
    ]);
    expect(allowListPaths(repo, { HOME: "/home/u" })[1]).toBe("/home/u/.config/loopsmith/allowed-dependencies");
    // Missing files are no lists.
    expect(readAllowLists(repo, env)).toEqual([]);
    mkdirSync(join(config, "loopsmith"));
    writeFileSync(join(config, "loopsmith", "allowed-dependencies"), "# mine\nRequests\n");
    expect(readAllowLists(repo, env)).toEqual([
      { source: join(config, "loopsmith", "allowed-dependencies"), packages: ["requests"] },
    ]);
    // A list that exists but cannot be read is an error naming it.
    mkdirSync(join(repo, ".loopsmith", "allowed-dependencies"), { recursive: true });
    expect(() => readAllowLists(repo, env)).toThrow(/cannot read the allowlist .*\.loopsmith\/allowed-dependencies/);
  });

  it("travel with a task whose policy is ask, with whether a person answers; other tasks are left alone", () => {
    const repo = mkdtempSync(join(tmpdir(), "allow-repo-"));
    mkdirSync(join(repo, ".loopsmith"));
    writeFileSync(join(repo, ".loopsmith", "allowed-dependencies"), "tabulate\n");
    const asked = withApprovals(repoTask("ask"), repo, {}, true);
    expect(asked.repo?.approvals).toEqual({
      interactive: true,
      allowed: [{ source: join(repo, ".loopsmith", "allowed-dependencies"), packages: ["tabulate"] }],
    });
    expect(withApprovals(repoTask("ask"), repo, {}, false).repo?.approvals?.interactive).toBe(false);
    expect(withApprovals(repoTask("reject"), repo, {}, true).repo?.approvals).toBeUndefined();
    // A task file (a replay) keeps its lists, and waits for nobody when nobody is at a terminal.
    const recorded = { ...asked, repo: { ...asked.repo!, approvals: { ...asked.repo!.approvals!, waitMs: 60_000 } } };
    expect(withApprovals(recorded, undefined, {}, false).repo?.approvals).toEqual({
      ...recorded.repo.approvals,
      interactive: false,
    });
  });
});

describe("asking", () => {
  it("asks only with a terminal on both ends and no --json", () => {
    expect(canAsk({}, { isTTY: true }, { isTTY: true })).toBe(true);
    expect(canAsk({ json: true }, { isTTY: true }, { isTTY: true })).toBe(false);
    expect(canAsk({}, { isTTY: false }, { isTTY: true })).toBe(false);
    expect(canAsk({}, { isTTY: true }, {})).toBe(false);
  });

  it("reads a waiting request from an event, and shows its diff and packages", () => {
    const request = {
      state: "requested",
      requestId: "deps-0123456789abcdef",
      packages: [{ manifest: "requirements.txt", name: "tabulate", after: "==0.9.0" }],
      diff: "--- a/requirements.txt\n+++ b/requirements.txt\n+tabulate==0.9.0\n",
      waiting: true,
      until: new Date(Date.now() + 60_000).toISOString(),
    };
    const req = approvalRequestOf(event({ approval: request }));
    expect(req?.requestId).toBe("deps-0123456789abcdef");
    expect(approvalRequestOf(event({ approval: { ...request, waiting: false } }))).toBeUndefined();
    expect(approvalRequestOf(event({ policy: "ask" }))).toBeUndefined();
    const text = approvalText(req ?? (request as never));
    expect(text).toContain("+tabulate==0.9.0");
    expect(text).toContain("  +tabulate ==0.9.0  (requirements.txt)");
  });

  it("takes y or yes as yes, anything else typed as no, and gives up at the deadline or the end of input", async () => {
    const ask = async (typed: string | undefined, deadline = Date.now() + 5_000, end = false) => {
      const input = new PassThrough();
      const output = new PassThrough();
      output.resume();
      const answer = askYesNo("ok? [y/N] ", deadline, input, output);
      if (typed !== undefined) input.write(`${typed}\n`);
      if (end) input.end();
      return answer;
    };
    expect(await ask("y")).toBe("yes");
    expect(await ask(" YES ")).toBe("yes");
    expect(await ask("")).toBe("no");
    expect(await ask("sure")).toBe("no");
    expect(await ask(undefined, Date.now() + 50)).toBeUndefined();
    expect(await ask(undefined, Date.now() + 5_000, true)).toBeUndefined();
  });
});

describe("show", () => {
  it("lists every decision with when, the answer, who and what", () => {
    const at = "2026-12-02T14:05:31.204Z";
    const decided = (over: object) => ({
      approval: {
        state: "decided",
        requestId: "deps-1",
        by: "alice",
        source: "user",
        packages: ["+tabulate ==0.9.0"],
        at,
        answer: "yes",
        ...over,
      },
    });
    const lines = decisionLines([
      event({ policy: "ask" }),
      event(decided({})),
      event(decided({ by: "/r/.loopsmith/allowed-dependencies", source: "allowlist" })),
      event(decided({ by: "bob", answer: "no", packages: ["requests ==2.31.0 → ==2.32.0"] })),
    ]);
    expect(lines).toEqual([
      "  dependency decisions:",
      `    ${at}  approved by alice: +tabulate ==0.9.0`,
      `    ${at}  approved by the allowlist /r/.loopsmith/allowed-dependencies: +tabulate ==0.9.0`,
      `    ${at}  refused by bob: requests ==2.31.0 → ==2.32.0`,
    ]);
    expect(decisionLines([event({})])).toEqual([]);
    // report.md: a section, through the report's escaping.
    expect(decisionsMarkdown([event(decided({ by: "a_b" }))], (t) => t.replace(/_/g, "\\_"))).toEqual([
      "## Dependency decisions",
      "",
      `- ${at}: approved by a\\_b: +tabulate ==0.9.0`,
      "",
    ]);
    expect(decisionsMarkdown([], (t) => t)).toEqual([]);
  });
});
