/**
 * Repo mode in the conductor, on real NATS JetStream: the base tree is a directory made here
 * (what `materializeSnapshot` would give), the model and the sandbox are functions, so each
 * rule can be driven exactly — an edit that misses, a path escape, the dependency policy, the
 * runner-configuration rule, a test command the sandbox does not have.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect } from "vitest";
import {
  type BuildRequest,
  type Edit,
  type ExecutionRequest,
  type ExecutionResult,
  type TaskInput,
} from "@loopsmith/shared/contracts";
import { it } from "../fixtures/index.js";
import type { Steps } from "@loopsmith/architect";
import { failed, passed, runTask, steps, task, usage, withConductor } from "./helpers.js";

const COMMIT = "a".repeat(40);
const BASE: Record<string, string> = {
  "pkg/__init__.py": "",
  "pkg/mod.py": "def answer():\n    return 41\n",
  "tests/test_mod.py": "from pkg.mod import answer\n\ndef test_answer():\n    assert answer() == 42\n",
  "requirements.txt": "requests==2.31.0\n",
};

function tree(files: Record<string, string> = BASE): string {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-tree-"));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

function repoTask(over: Partial<TaskInput["repo"]> = {}): TaskInput {
  return task({
    goal: "make test_answer pass",
    acceptanceTests: [],
    repo: {
      baseCommit: COMMIT,
      snapshot: `tree-${COMMIT}.tar`,
      testCommand: "python3 -m pytest -q",
      setupCommand: "",
      // These tests are about one-shot edits (the builder stand-in answers build requests).
      mode: "oneshot",
      ...over,
    },
  });
}

const provider = { name: "test", model: "m", scripted: true };
const edit = (e: Partial<Edit> & { path: string }): Edit => ({ search: "", replace: "", delete: false, ...e });

/** Steps over `root`: builds from `replies` (one per iteration, last repeats); the sandbox passes when mod.py returns 42. */
function repoSteps(root: string, replies: Edit[][], over: Partial<Steps> = {}) {
  const builds: BuildRequest[] = [];
  const runs: ExecutionRequest[] = [];
  const base = steps([failed()]);
  const s: Steps = {
    ...base.steps,
    tree: async () => root,
    build: async (req) => {
      builds.push(req);
      const edits = replies[Math.min(builds.length - 1, replies.length - 1)] ?? [];
      return {
        value: { files: [], tests: [], notes: "", edits, summary: `attempt ${builds.length}` },
        usage: usage(),
        provider,
      };
    },
    execute: async (req): Promise<ExecutionResult> => {
      runs.push(req);
      const mod = req.files.find((f) => f.path === "pkg/mod.py")?.content ?? BASE["pkg/mod.py"] ?? "";
      return mod.includes("return 42") ? passed : failed("AssertionError: assert 41 == 42");
    },
    ...over,
  };
  return { steps: s, calls: base.calls, builds, runs };
}

describe("repo mode in the conductor", () => {
  it("feeds an edit that misses back with the nearest lines, then applies the right one; the patch applies with git", async ({
    nats,
  }) => {
    const root = tree();
    const r = repoSteps(root, [
      [edit({ path: "pkg/mod.py", search: "    return 40\n", replace: "    return 42\n" })],
      [edit({ path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" })],
    ]);
    const { result, events } = await withConductor(nats.url, r.steps, (nc) => runTask(nc, repoTask()));
    expect(result.status).toBe("passed");
    expect(result.iterations).toBe(2);
    // The baseline ran the repository's command over the base tree, with no files of its own.
    expect(r.runs[0]).toMatchObject({
      files: [],
      shell: "python3 -m pytest -q",
      base: { commit: COMMIT, deleted: [] },
    });
    expect(events.some((e) => e.phase === "prepare" && e.message.includes("1 failing"))).toBe(true);
    // The second build saw the typed failure with the file's nearest lines; no reflection on an edit miss.
    const second = r.builds[1];
    expect(second?.previous?.failure.status).toBe("edit_failed");
    expect(second?.previous?.failure.output).toContain("return 41");
    expect(r.calls.reflect).toBeUndefined();
    // Only the changed file travels; the prompt carried the map and the file in full.
    expect(r.runs[1]?.files.map((f) => f.path)).toEqual(["pkg/mod.py"]);
    expect(r.builds[0]?.task.repo?.map).toContain("pkg/mod.py");
    expect(r.builds[0]?.task.repo?.failingAtBase).toEqual(["test_add"]);
    // The result's patch is what git applies to the base tree.
    expect(result.repo?.changed).toEqual(["pkg/mod.py"]);
    execFileSync("git", ["init", "-q"], { cwd: root });
    writeFileSync(join(root, "change.patch"), result.repo?.patch ?? "");
    execFileSync("git", ["apply", "change.patch"], { cwd: root });
    expect(readFileSync(join(root, "pkg/mod.py"), "utf8")).toBe("def answer():\n    return 42\n");
    // Every model reply is in the events, for the run record and replay.
    const replies = events
      .filter((e) => (e.data as { llm?: unknown } | undefined)?.llm)
      .map((e) => (e.data as { llm: { role: string; callsBefore: number } }).llm);
    expect(replies.map((l) => [l.role, l.callsBefore])).toEqual([
      ["plan", 0],
      ["build", 0],
      ["build", 1],
    ]);
  });

  it("rejects paths that leave the repository: '..', absolute, through a symlink, into .git", async ({ nats }) => {
    const root = tree();
    symlinkSync(tmpdir(), join(root, "out"));
    const attempts = [
      [edit({ path: "../escape.py", replace: "x = 1\n" })],
      [edit({ path: "out/escape.py", replace: "x = 1\n" })],
      [edit({ path: ".git/config", replace: "x" })],
    ];
    const r = repoSteps(root, attempts);
    const { result } = await withConductor(nats.url, r.steps, (nc) => runTask(nc, repoTask()));
    expect(result.status).toBe("failed");
    expect(r.builds.length).toBeGreaterThanOrEqual(3);
    for (const b of r.builds.slice(1, 3)) expect(b.previous?.failure.output).toMatch(/path_escape|outside|escape/i);
    // Nothing ran but the baseline.
    expect(r.runs).toHaveLength(1);
  }, 60_000);

  it("applies the dependency policy: reject blocks and tells the builder, ask stops for approval, allow runs", async ({
    nats,
  }) => {
    const change = [
      edit({ path: "requirements.txt", search: "requests==2.31.0\n", replace: "requests==2.32.0\n" }),
      edit({ path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" }),
    ];
    const outcomes: Record<string, { stop: string; runs: number; told?: string }> = {};
    for (const policy of ["reject", "ask", "allow"] as const) {
      const r = repoSteps(tree(), [change]);
      const { result } = await withConductor(nats.url, r.steps, (nc) =>
        runTask(nc, repoTask({ dependencies: policy })),
      );
      outcomes[policy] = {
        stop: result.stopReason,
        runs: r.runs.length,
        ...(r.builds[1] ? { told: r.builds[1].previous?.failure.output ?? "" } : {}),
      };
      if (policy === "ask") expect(result.repo?.changed).toContain("requirements.txt");
    }
    expect(outcomes.reject?.runs).toBe(1);
    expect(outcomes.reject?.told).toMatch(/dependencies.*requirements\.txt.*reject/);
    // The change is shown, as a diff of the manifest.
    expect(outcomes.reject?.told).toContain("+requests==2.32.0");
    expect(outcomes.ask).toMatchObject({ stop: "needs_approval", runs: 1 });
    expect(outcomes.allow).toMatchObject({ stop: "passed", runs: 2 });
  }, 90_000);

  it("blocks a change to the test runner's configuration whatever the policy", async ({ nats }) => {
    const r = repoSteps(tree(), [
      [
        edit({ path: "conftest.py", replace: "import pytest\n" }),
        edit({ path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" }),
      ],
    ]);
    const { result } = await withConductor(nats.url, r.steps, (nc) => runTask(nc, repoTask({ dependencies: "allow" })));
    expect(result.stopReason).not.toBe("passed");
    expect(r.runs).toHaveLength(1);
    expect(r.builds[1]?.previous?.failure.output).toMatch(/conftest\.py.*test runner/);
  }, 60_000);

  it("stops before any model call when the test command is not in the sandbox", async ({ nats }) => {
    const r = repoSteps(tree(), [[]], {
      execute: async () => ({
        status: "command_not_found",
        exitCode: 127,
        durationMs: 3,
        tests: [],
        stdout: "",
        stderr: "sh: 1: tox: not found",
        truncated: false,
        reason: "tox: not found",
      }),
    });
    const { result } = await withConductor(nats.url, r.steps, (nc) => runTask(nc, repoTask({ testCommand: "tox" })));
    expect(result.status).toBe("error");
    expect(result.error?.code).toBe("command_not_found");
    expect(r.calls.plan).toBeUndefined();
    expect(r.builds).toHaveLength(0);
  });

  it("sets the run limit from the baseline's time (3x, at least the task's limit) and says it; a given test timeout wins", async ({
    nats,
  }) => {
    // A suite that takes 25.2 s on the base commit: later runs get 76 s, not the 30 s default.
    const slow = (base: ExecutionResult) => ({ ...base, durationMs: 25_200 });
    const right = [edit({ path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" })];
    const derived = repoSteps(tree(), [right], {
      execute: async (req): Promise<ExecutionResult> => {
        derived.runs.push(req);
        const mod = req.files.find((f) => f.path === "pkg/mod.py")?.content ?? "";
        return slow(mod.includes("return 42") ? passed : failed("AssertionError: assert 41 == 42"));
      },
    });
    const { result, events } = await withConductor(nats.url, derived.steps, (nc) => runTask(nc, repoTask()));
    expect(result.status).toBe("passed");
    expect(derived.runs.map((r) => r.timeoutMs)).toEqual([300_000, 76_000]);
    const limit = events.find((e) => e.phase === "prepare" && e.data?.runTimeoutMs !== undefined);
    expect(limit?.data).toMatchObject({ runTimeoutMs: 76_000, baselineMs: 25_200, floorMs: 30_000, source: "derived" });
    expect(limit?.message).toMatch(/76 s \(3x the baseline's 25\.2 s, at least 30 s\)/);

    const given = repoSteps(tree(), [right]);
    const second = await withConductor(nats.url, given.steps, (nc) => runTask(nc, repoTask({ testTimeoutMs: 12_000 })));
    expect(second.result.status).toBe("passed");
    expect(given.runs.map((r) => r.timeoutMs)).toEqual([12_000, 12_000]);
    expect(second.events.some((e) => e.data?.source === "given" && e.message.includes("12 s"))).toBe(true);
  }, 60_000);
});
