/**
 * Dependency approvals in the conductor (policy `ask`), on real NATS JetStream with the real
 * approval store (the task state bucket): an allowlist approves a change without asking; a
 * task whose person answers waits at its gate, and goes on after `yes` (or fails the iteration
 * after `no`, the builder told); without anyone to answer it stops with `needs_approval`.
 * Each decision is an event of the task with who, what, when and the answer.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { describe, expect } from "vitest";
import {
  ApprovalRequest,
  DependencyDecision,
  type BuildRequest,
  type Edit,
  type ExecutionRequest,
  type TaskEvent,
  type TaskInput,
} from "@loopsmith/shared/contracts";
import { submitTask } from "@loopsmith/shared/bus";
import type { Steps } from "@loopsmith/architect";
import { openApprovalStore } from "../../services/architect/src/approvals.js";
import { it } from "../fixtures/index.js";
import { eventsOf, failed, passed, steps, task, until, usage, withConductor } from "./helpers.js";

const COMMIT = "b".repeat(40);
const BASE: Record<string, string> = {
  "pkg/__init__.py": "",
  "pkg/mod.py": "def answer():\n    return 41\n",
  "tests/test_mod.py": "from pkg.mod import answer\n\ndef test_answer():\n    assert answer() == 42\n",
  "requirements.txt": "requests==2.31.0\n",
};

function tree(): string {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-approval-"));
  for (const [path, content] of Object.entries(BASE)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

let n = 0;
function repoTask(approvals: NonNullable<TaskInput["repo"]>["approvals"]): TaskInput {
  return task({
    taskId: `approval-${process.pid}-${++n}`,
    goal: "make test_answer pass",
    acceptanceTests: [],
    repo: {
      baseCommit: COMMIT,
      snapshot: `tree-${COMMIT}.tar`,
      testCommand: "python3 -m pytest -q",
      setupCommand: "",
      mode: "oneshot",
      dependencies: "ask",
      ...(approvals ? { approvals } : {}),
    },
  });
}

const edit = (e: Partial<Edit> & { path: string }): Edit => ({ search: "", replace: "", delete: false, ...e });
/** The fix, with a new package and a re-pinned one. */
const CHANGE = [
  edit({ path: "requirements.txt", search: "requests==2.31.0\n", replace: "requests==2.32.0\ntabulate>=0.9\n" }),
  edit({ path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" }),
];
/** The fix alone, what a builder told to do without the dependencies answers. */
const FIX_ONLY = [edit({ path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" })];

/** Steps over a fresh tree: build `replies` (one per iteration, the last repeats); a run passes when mod.py returns 42. */
function repoSteps(replies: Edit[][], over: Partial<Steps> = {}) {
  const root = tree();
  const builds: BuildRequest[] = [];
  const runs: ExecutionRequest[] = [];
  const s: Steps = {
    ...steps([failed()]).steps,
    tree: async () => root,
    build: async (req) => {
      builds.push(req);
      const edits = replies[Math.min(builds.length - 1, replies.length - 1)] ?? [];
      return {
        value: { files: [], tests: [], notes: "", edits, summary: `attempt ${builds.length}` },
        usage: usage(),
        provider: { name: "test", model: "m", scripted: true },
      };
    },
    execute: async (req) => {
      runs.push(req);
      const mod = req.files.find((f) => f.path === "pkg/mod.py")?.content ?? "";
      return mod.includes("return 42") ? passed : failed("AssertionError: assert 41 == 42");
    },
    ...over,
  };
  return { steps: s, builds, runs };
}

const approvalOf = (e: TaskEvent): unknown => (e.data as { approval?: unknown } | undefined)?.approval;
const decisions = (events: TaskEvent[]) =>
  events.flatMap((e) => {
    const d = DependencyDecision.safeParse(approvalOf(e));
    return d.success ? [d.data] : [];
  });
const requests = (events: TaskEvent[]) =>
  events.flatMap((e) => {
    const r = ApprovalRequest.safeParse(approvalOf(e));
    return r.success ? [r.data] : [];
  });

describe("dependency approvals (policy ask)", () => {
  it("an allowlist naming every changed package approves without asking, and says so", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const store = await openApprovalStore(nc);
    const r = repoSteps([CHANGE], { approvals: store });
    const input = repoTask({
      interactive: false,
      waitMs: 60_000,
      allowed: [{ source: "/home/u/.config/loopsmith/allowed-dependencies", packages: ["requests", "tabulate"] }],
    });
    const { result, events } = await withConductor(nats.url, r.steps, async (c) => {
      await submitTask(c, input);
      const events = await eventsOf(c, input.taskId);
      return { result: events[events.length - 1]?.result, events };
    });
    await nc.close();
    expect(result?.stopReason).toBe("passed");
    expect(r.runs).toHaveLength(2); // the baseline, then the approved candidate
    expect(requests(events)).toEqual([]);
    const [d] = decisions(events);
    expect(d).toMatchObject({
      by: "/home/u/.config/loopsmith/allowed-dependencies",
      source: "allowlist",
      answer: "yes",
      packages: ["requests ==2.31.0 → ==2.32.0", "+tabulate >=0.9"],
    });
    expect(Number.isNaN(Date.parse(d?.at ?? ""))).toBe(false);
  }, 90_000);

  it("an allowlist missing one package does not approve: without a person the task stops with needs_approval", async ({
    nats,
  }) => {
    const r = repoSteps([CHANGE]);
    const input = repoTask({
      interactive: false,
      waitMs: 60_000,
      allowed: [{ source: "/repo/.loopsmith/allowed-dependencies", packages: ["requests"] }],
    });
    const events = await withConductor(nats.url, r.steps, async (c) => {
      await submitTask(c, input);
      return eventsOf(c, input.taskId);
    });
    expect(events[events.length - 1]?.result?.stopReason).toBe("needs_approval");
    expect(r.runs).toHaveLength(1);
    expect(decisions(events)).toEqual([]);
    // The request says what it is about, and that nobody waits for an answer.
    const [req] = requests(events);
    expect(req).toMatchObject({ waiting: false });
    expect(req?.packages.map((p) => p.name)).toEqual(["requests", "tabulate"]);
    expect(req?.diff).toContain("+requests==2.32.0");
  }, 90_000);

  it("waits for a person's answer: yes runs the candidate, and the decision is recorded with who and when", async ({
    nats,
  }) => {
    const nc = await connect({ servers: nats.url });
    const store = await openApprovalStore(nc);
    const r = repoSteps([CHANGE], { approvals: store });
    const input = repoTask({ interactive: true, waitMs: 60_000, allowed: [] });
    const events = await withConductor(nats.url, r.steps, async (c) => {
      await submitTask(c, input);
      // The person answers once the request is there (the task is waiting at its gate by then).
      let requestId = "";
      await until(async () => {
        requestId = (await store.entries(input.taskId, "client"))[0]?.requestId ?? "";
        return requestId !== "";
      }, 30_000);
      expect(r.runs).toHaveLength(1); // nothing ran while it waited
      const at = new Date().toISOString();
      const answer = { v: 1 as const, taskId: input.taskId, requestId, answer: "yes" as const, by: "alice", at };
      expect(await store.answer("client", answer)).toBe(true);
      expect(await store.answer("client", { ...answer, answer: "no" })).toBe(false); // one answer per request
      return eventsOf(c, input.taskId);
    });
    await nc.close();
    expect(events[events.length - 1]?.result?.stopReason).toBe("passed");
    expect(r.runs).toHaveLength(2);
    const [req] = requests(events);
    expect(req).toMatchObject({ waiting: true });
    expect(Date.parse(req?.until ?? "")).toBeGreaterThan(Date.now() - 60_000);
    expect(decisions(events)).toEqual([
      expect.objectContaining({ by: "alice", source: "user", answer: "yes", requestId: req?.requestId }),
    ]);
  }, 90_000);

  it("asks once: a later candidate with the same changes runs on the earlier yes", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const store = await openApprovalStore(nc);
    // The first candidate changes the dependencies but not the code (its run fails); the second
    // adds the fix on top (edits are cumulative): the same dependency changes, and the fix.
    const r = repoSteps([CHANGE.slice(0, 1), FIX_ONLY], { approvals: store });
    const input = repoTask({ interactive: true, waitMs: 60_000, allowed: [] });
    const events = await withConductor(nats.url, r.steps, async (c) => {
      await submitTask(c, input);
      let requestId = "";
      await until(async () => {
        requestId = (await store.entries(input.taskId, "client"))[0]?.requestId ?? "";
        return requestId !== "";
      }, 30_000);
      const at = new Date().toISOString();
      await store.answer("client", { v: 1, taskId: input.taskId, requestId, answer: "yes", by: "carol", at });
      return eventsOf(c, input.taskId);
    });
    await nc.close();
    expect(events[events.length - 1]?.result?.stopReason).toBe("passed");
    expect(r.runs).toHaveLength(3); // the baseline, the failing candidate, the passing one
    expect(requests(events)).toHaveLength(1);
    expect(decisions(events)).toHaveLength(1);
    expect(
      events.some((e) => e.iteration === 2 && e.message.startsWith("dependencies approved earlier (by carol)")),
    ).toBe(true);
  }, 90_000);

  it("stops with needs_approval when nobody answers in time", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const store = await openApprovalStore(nc);
    const r = repoSteps([CHANGE], { approvals: store });
    const input = repoTask({ interactive: true, waitMs: 1_000, allowed: [] });
    const events = await withConductor(nats.url, r.steps, async (c) => {
      await submitTask(c, input);
      return eventsOf(c, input.taskId);
    });
    await nc.close();
    expect(events[events.length - 1]?.result?.stopReason).toBe("needs_approval");
    expect(r.runs).toHaveLength(1);
    expect(events.some((e) => /^no answer to the approval request in 1 s/.test(e.message))).toBe(true);
    expect(decisions(events)).toEqual([]);
  }, 90_000);

  it("after no, the iteration fails and the builder is told to do without the dependencies", async ({ nats }) => {
    const nc = await connect({ servers: nats.url });
    const store = await openApprovalStore(nc);
    const r = repoSteps([CHANGE, FIX_ONLY], { approvals: store });
    const input = repoTask({ interactive: true, waitMs: 60_000, allowed: [] });
    const events = await withConductor(nats.url, r.steps, async (c) => {
      await submitTask(c, input);
      let requestId = "";
      await until(async () => {
        requestId = (await store.entries(input.taskId, "client"))[0]?.requestId ?? "";
        return requestId !== "";
      }, 30_000);
      const at = new Date().toISOString();
      await store.answer("client", { v: 1, taskId: input.taskId, requestId, answer: "no", by: "bob", at });
      return eventsOf(c, input.taskId);
    });
    await nc.close();
    expect(events[events.length - 1]?.result?.stopReason).toBe("passed");
    expect(r.builds[1]?.previous?.failure.output).toMatch(/refused by bob.*without changing the dependencies/);
    expect(r.runs.map((run) => run.files.some((f) => f.path === "requirements.txt"))).toEqual([false, false]);
    expect(decisions(events)).toEqual([expect.objectContaining({ by: "bob", answer: "no" })]);
  }, 90_000);
});
