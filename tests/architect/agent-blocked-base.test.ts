/**
 * A blocked candidate never becomes the base of the next iteration,
 * in one-shot repo mode, on real NATS JetStream: a builder that sends the same edits after
 * the policy blocked them gets them applied to the tree as it was (and blocked again for the
 * same reason), never "could not be applied" because the blocked edit is already there; it
 * is told the change is not in the tree, and the prompt's files are the unblocked tree's.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect } from "vitest";
import type { BuildRequest, Edit, ExecutionRequest, ExecutionResult } from "@loopsmith/shared/contracts";
import type { Steps } from "@loopsmith/architect";
import { it } from "../fixtures/index.js";
import { failed, passed, runTask, steps, task, usage, withConductor } from "./helpers.js";

const COMMIT = "c".repeat(40);
const BASE: Record<string, string> = {
  "pkg/__init__.py": "",
  "pkg/mod.py": "def answer():\n    return 41\n",
  "tests/test_mod.py": "from pkg.mod import answer\n\ndef test_answer():\n    assert answer() == 42\n",
};
const provider = { name: "test", model: "m", scripted: true };
const edit = (e: Partial<Edit> & { path: string }): Edit => ({ search: "", replace: "", delete: false, ...e });

function tree(): string {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-blocked-"));
  for (const [path, content] of Object.entries(BASE)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

describe("a blocked candidate is not the next base", () => {
  it("applies the same edits again after a policy block, tells the builder, and passes without the blocked file", async ({
    nats,
  }) => {
    const gaming = edit({ path: "pytest.ini", replace: "[pytest]\naddopts = -p no:python\n" });
    const fix = edit({ path: "pkg/mod.py", search: "    return 41\n", replace: "    return 42\n" });
    const replies = [[gaming, fix], [gaming, fix], [fix]];
    const builds: BuildRequest[] = [];
    const runs: ExecutionRequest[] = [];
    const s: Steps = {
      ...steps([failed()]).steps,
      tree: async () => root,
      plan: async () => ({
        value: { summary: "fix", acceptanceCriteria: [], steps: [], files: ["pkg/mod.py", "pytest.ini"] },
        usage: usage(),
        provider,
      }),
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
    };
    const root = tree();
    const input = task({
      goal: "make test_answer pass",
      acceptanceTests: [],
      repo: {
        baseCommit: COMMIT,
        snapshot: `tree-${COMMIT}.tar`,
        testCommand: "python3 -m pytest -q",
        mode: "oneshot",
      },
    });
    const { result } = await withConductor(nats.url, s, (nc) => runTask(nc, input));
    expect(result.status).toBe("passed");
    expect(result.iterations).toBe(3);
    // Iteration 2's same edits applied cleanly to the unblocked tree and were blocked again for the runner change.
    const second = builds[1]?.previous?.failure;
    expect(second?.status).toBe("blocked");
    expect(second?.output).toMatch(/pytest\.ini.*test runner/);
    expect(second?.output).toMatch(/NOT in the tree/);
    expect(builds[2]?.previous?.failure.status).toBe("blocked");
    expect(builds[2]?.previous?.failure.output).toMatch(/pytest\.ini.*test runner/);
    // The prompt showed pkg/mod.py as the base has it, not with the blocked candidate's change.
    const shown = builds[1]?.task.repo?.files.find((f) => f.path === "pkg/mod.py");
    expect(shown?.content).toBe(BASE["pkg/mod.py"]);
    expect(builds[1]?.task.repo?.files.map((f) => f.path)).not.toContain("pytest.ini");
    // Only the baseline and the passing candidate ran; the result holds no runner change.
    expect(runs).toHaveLength(2);
    expect(result.repo?.changed).toEqual(["pkg/mod.py"]);
  });
});
