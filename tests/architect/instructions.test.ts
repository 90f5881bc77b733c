/**
 * Project instructions (AGENTS.md, CONVENTIONS.md) through the conductor, on real NATS JetStream:
 * the real planner, builder, reviewer and agent turn taker answer on the scripted provider,
 * and the transcript every provider writes (`llm.transcriptPath`: one JSON line per call,
 * with the system prompt and the messages as sent) is what the assertions read. The base
 * tree is a directory made here and the sandbox a function, as in repo.test.ts and
 * agent.test.ts. One task per behaviour: AGENTS.md in the plan, build and review prompts;
 * CONVENTIONS.md when there is no AGENTS.md; a long AGENTS.md cut, in the agent's prompt.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect } from "vitest";
import { Config } from "@loopsmith/shared/runtime";
import {
  MAX_INSTRUCTIONS_BYTES,
  type ExecutionResult,
  type TaskEvent,
  type TaskInput,
} from "@loopsmith/shared/contracts";
import { createProvider, type TranscriptLine } from "@loopsmith/shared/llm";
import { createPlanner, type Steps } from "@loopsmith/architect";
import { createBuilder, createTurnTaker } from "@loopsmith/builder";
import { createReviewer } from "@loopsmith/reviewer";
import { it } from "../fixtures/index.js";
import { failed, log, passed, runTask, steps, task, withConductor } from "./helpers.js";

const COMMIT = "c".repeat(40);
const BASE: Record<string, string> = {
  "pkg/__init__.py": "",
  "pkg/mod.py": "def answer():\n    return 41\n",
  "tests/test_mod.py": "from pkg.mod import answer\n\ndef test_answer():\n    assert answer() == 42\n",
};
const AGENTS = "# Agent notes\n\n- Name constants in UPPER_CASE; the answer lives in pkg/mod.py.\n";
const CONVENTIONS = "# Conventions\n\n- Keep functions under twenty lines.\n";
const HEADING = "## Project instructions from";

const FIX = [{ path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" }];
const REPLIES = {
  plan: [
    {
      summary: "answer() returns 41; it must return 42.",
      acceptanceCriteria: ["tests/test_mod.py::test_answer passes"],
      steps: ["Change the return value in pkg/mod.py."],
      files: ["pkg/mod.py", "tests/test_mod.py"],
    },
  ],
  build: [{ summary: "Return 42", edits: FIX, notes: "" }],
  review: [{ approved: true, score: 0.9, findings: [] }],
  agent: [
    { content: "Fix the value.", toolCalls: [{ name: "edit", args: { edits: FIX } }] },
    { toolCalls: [{ name: "submit", args: { summary: "Return 42" } }] },
  ],
};

function tree(extra: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-instructions-"));
  for (const [path, content] of Object.entries({ ...BASE, ...extra })) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

/**
 * Steps over `root` with the real LLM roles on one scripted provider that writes its
 * transcript; the sandbox passes when pkg/mod.py returns 42 (the baseline fails). Sessions
 * (agent mode) are stand-ins whose calls all succeed.
 */
function realRoles(root: string) {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-instructions-llm-"));
  const scriptPath = join(dir, "script.json");
  const transcriptPath = join(dir, "transcript.jsonl");
  writeFileSync(scriptPath, JSON.stringify({ v: 1, kind: "loopsmith-script", replies: REPLIES }));
  const config = Config.parse({ llm: { provider: "scripted", scriptPath, transcriptPath } });
  const provider = createProvider({ config, log });
  const planner = createPlanner({ provider, log });
  const builder = createBuilder({ provider, log });
  const reviewer = createReviewer({ provider, log });
  const turns = createTurnTaker({ provider, log });
  const s: Steps = {
    ...steps([failed()]).steps,
    tree: async () => root,
    plan: (req) => planner.plan(req),
    reflect: (req) => planner.reflect(req),
    build: (req) => builder.build(req),
    review: (req) => reviewer.review(req),
    turn: (req) => turns.turn(req),
    execute: async (req): Promise<ExecutionResult> =>
      req.files.some((f) => f.path === "pkg/mod.py" && f.content.includes("return 42"))
        ? passed
        : failed("AssertionError: assert 41 == 42"),
    openSession: async (req) => ({ sessionId: req.sessionId, executorId: "exec1", files: 3, durationMs: 1 }),
    sessionCall: async () => ({ output: "ok", ok: true, totalBytes: 2, durationMs: 1 }),
    closeSession: async () => ({ closed: true }),
  };
  /** The transcript's calls of `role`, each as its system prompt and messages joined. */
  const prompts = (role: string): string[] =>
    readFileSync(transcriptPath, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as TranscriptLine)
      .filter((l) => l.role === role)
      .map((l) => [l.system, ...l.messages.map((m) => m.content)].join("\n"));
  return { steps: s, prompts };
}

function repoTask(mode: "oneshot" | "agent", over: Partial<TaskInput> = {}): TaskInput {
  return task({
    goal: "make test_answer pass",
    acceptanceTests: [],
    repo: {
      baseCommit: COMMIT,
      snapshot: `tree-${COMMIT}.tar`,
      testCommand: "python3 -m pytest -q",
      setupCommand: "",
      mode,
    },
    memory: "off",
    ...over,
  });
}

/** `data.instructions` of the PREPARE event that names the project instructions. */
const instructionsEvent = (events: TaskEvent[]) =>
  events.find((e) => e.phase === "prepare" && e.data?.instructions !== undefined);

describe("project instructions in repo-mode prompts", () => {
  it("puts AGENTS.md (not CONVENTIONS.md) in the plan, build and review prompts, and records its use", async ({
    nats,
  }) => {
    const root = tree({ "AGENTS.md": AGENTS, "CONVENTIONS.md": CONVENTIONS });
    const r = realRoles(root);
    const { result, events } = await withConductor(nats.url, r.steps, (nc) =>
      runTask(nc, repoTask("oneshot", { review: true })),
    );
    expect(result.status).toBe("passed");
    for (const role of ["plan", "build", "review"]) {
      const calls = r.prompts(role);
      expect(calls.length, role).toBe(1);
      expect(calls[0], role).toContain(`${HEADING} AGENTS.md (the repository's own conventions`);
      expect(calls[0], role).toContain(AGENTS.trim());
      expect(calls[0], role).not.toContain("Keep functions under twenty lines");
      expect(calls[0], role).not.toContain("is cut here");
    }
    const e = instructionsEvent(events);
    expect(e?.data?.instructions).toEqual({
      path: "AGENTS.md",
      bytes: Buffer.byteLength(AGENTS),
      truncated: false,
      shownBytes: Buffer.byteLength(AGENTS),
    });
    expect(e?.message).toBe(
      `project instructions: AGENTS.md (${Buffer.byteLength(AGENTS)} bytes) go into every prompt of the task`,
    );
  });

  it("falls back to CONVENTIONS.md when the repository has no AGENTS.md", async ({ nats }) => {
    const r = realRoles(tree({ "CONVENTIONS.md": CONVENTIONS }));
    const { result, events } = await withConductor(nats.url, r.steps, (nc) => runTask(nc, repoTask("oneshot")));
    expect(result.status).toBe("passed");
    for (const role of ["plan", "build"]) {
      expect(r.prompts(role)[0], role).toContain(`${HEADING} CONVENTIONS.md`);
      expect(r.prompts(role)[0], role).toContain(CONVENTIONS.trim());
    }
    expect(instructionsEvent(events)?.data?.instructions).toMatchObject({ path: "CONVENTIONS.md", truncated: false });
  });

  it("cuts a long AGENTS.md to the bound, says so in the agent's prompt, and records the cut", async ({ nats }) => {
    const line = `- rule: ${"x".repeat(90)}\n`; // 100 bytes
    const long = `${AGENTS}${line.repeat(400)}- THE LAST RULE\n`;
    const r = realRoles(tree({ "AGENTS.md": long }));
    const { result, events } = await withConductor(nats.url, r.steps, (nc) => runTask(nc, repoTask("agent")));
    expect(result.status).toBe("passed");
    const turns = r.prompts("agent");
    expect(turns.length).toBe(2);
    for (const prompt of turns) {
      expect(prompt).toContain(`${HEADING} AGENTS.md`);
      expect(prompt).toContain("Name constants in UPPER_CASE");
      expect(prompt).not.toContain("THE LAST RULE");
      expect(prompt).toMatch(
        new RegExp(`\\[AGENTS\\.md is cut here: only its first \\d+ of ${Buffer.byteLength(long)} bytes are shown`),
      );
    }
    const use = instructionsEvent(events)?.data?.instructions as { shownBytes: number; truncated: boolean };
    expect(use.truncated).toBe(true);
    expect(use.shownBytes).toBeLessThanOrEqual(MAX_INSTRUCTIONS_BYTES);
    expect(use.shownBytes).toBeGreaterThan(MAX_INSTRUCTIONS_BYTES - 100);
  });
});
