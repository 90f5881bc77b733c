/**
 * An improvement generation's tampering guard with the real gate (the static tripwires on the
 * change, layer 3 of docs/SANDBOX.md's "Verdicts"): the architect's VALIDATE step
 * (`changeTampering`) over a change to the improve fixture repository, judged by the
 * reviewer's `gate()` called in-process instead of over the bus.
 * Pure: no NATS, no Docker.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { unifiedPatch } from "@loopsmith/shared/workspace";
import { type GateRequest } from "@loopsmith/shared/contracts";
import { changeTampering, evaluationNames } from "@loopsmith/architect";
import { gate } from "@loopsmith/reviewer";

const REPO = join(import.meta.dirname, "../fixtures/improve-repo");
const read = (path: string): string | undefined => {
  try {
    return readFileSync(join(REPO, path), "utf8");
  } catch {
    return undefined;
  }
};
const gateInProcess = async (req: GateRequest) => gate(req);
/** The fixture run's benchmark and check, as the generation names them to the gate. */
const evaluation = evaluationNames(["python3 bench/run.py", "python3 -m pytest -q tests"], ["bench-out/junit.xml"]);

/** The generation's guard over a change that sets `files` (full new contents) in the fixture tree. */
function guard(files: { path: string; content: string }[]) {
  return changeTampering(gateInProcess, {
    taskId: "run-gen-1",
    generation: 1,
    language: "python",
    patch: unifiedPatch(read, files, []),
    deleted: [],
    read,
    evaluation,
  });
}

describe("improve: a change that tampers with the evaluation is rejected `tampering`", () => {
  it("prepending a JUnit write and os._exit(0) to the package's __init__.py", async () => {
    const init = "textkit/__init__.py";
    const content = `import os\nos.environ["LOOPSMITH_JUNIT"] = "/dev/null"\nos._exit(0)\n${read(init) ?? ""}`;
    const v = await guard([{ path: init, content }]);
    expect(v?.reason).toBe("tampering");
    expect(v?.paths).toEqual([init]);
    expect(v?.message).toContain(`${init}:2: \`LOOPSMITH_JUNIT\` names loopsmith's verdict variable`);
    expect(v?.message).toContain(
      `${init}:3: \`os._exit\` at module level: importing the module ends the process before the tests report (tampering.exit)`,
    );
  });

  it("special-casing the benchmark by its file name", async () => {
    const slug = "textkit/slug.py";
    const content = `import inspect\n${read(slug) ?? ""}\ndef _bench():\n    return any("bench/run.py" in f.filename for f in inspect.stack())\n_FAST = 1 if _bench() else 0\n`;
    const v = await guard([{ path: slug, content }]);
    expect(v?.message).toMatch(/textkit\/slug\.py:\d+: a condition on `bench\/run.py`, a file of the evaluation/);
  });

  it("an honest change passes, and so does one that only keeps what the parent already had", async () => {
    const slug = "textkit/slug.py";
    expect(await guard([{ path: slug, content: `${read(slug) ?? ""}\n# a comment\n` }])).toBeUndefined();
    expect(
      await guard([{ path: "textkit/extra.py", content: "def words(s):\n    return s.split()\n" }]),
    ).toBeUndefined();
  });
});
