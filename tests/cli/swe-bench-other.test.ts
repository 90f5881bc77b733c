/**
 * SWE-bench-format instances from another project (tests/fixtures/swe-bench-other: two real
 * toolz fixes), given as a user would bring instances loopsmith has never seen: a dataset,
 * a bare clone in --repos and an environment override file (toolz is not in the built-in
 * spec). The gold patches resolve 2/2, empty patches 0/2, in the real sandbox.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { readResults } from "../../cli/src/bench/results.js";
import { loadInstances } from "@loopsmith/evals";
import { sweBenchCommand } from "../../cli/src/bench/swe-bench/run.js";

const FIX = join(import.meta.dirname, "../fixtures/swe-bench-other");
const DATASET = join(FIX, "instances.jsonl");
const work = mkdtempSync(join(tmpdir(), "swe-bench-other-"));
const repos = join(work, "repos");
// The bare-clone form of --repos: <owner>__<name>.git.
execFileSync("git", [
  "clone",
  "-q",
  "--bare",
  join(FIX, "repos/pytoolz__toolz.bundle"),
  join(repos, "pytoolz__toolz.git"),
]);
const log = pino({ level: "silent" });
const instances = loadInstances(DATASET);

afterAll(() => rmSync(work, { recursive: true, force: true }));

async function bench(name: string, o: { gold?: boolean; empty?: boolean }) {
  const out = join(work, name);
  await sweBenchCommand({ dataset: DATASET, repos, env: join(FIX, "env.json"), out, ...o }, log);
  return new Map(readResults(join(out, "results.jsonl")).map((r) => [r.caseId, r]));
}

describe("swe-bench grading of another project's instances (toolz, env override, bare clone)", () => {
  it("needs the environment file: toolz has no built-in test command", async () => {
    await expect(
      sweBenchCommand({ dataset: DATASET, repos, gold: true, out: join(work, "no-env") }, log),
    ).rejects.toThrow(/no test_cmd for pytoolz\/toolz/);
  });

  it("--gold resolves 2/2 and --empty 0/2", async () => {
    const gold = await bench("gold", { gold: true });
    const empty = await bench("empty", { empty: true });
    for (const inst of instances) {
      const g = gold.get(inst.instance_id);
      expect(g?.swe?.status, `${inst.instance_id}: ${g?.error}`).toBe("resolved");
      expect(g?.swe?.passToPass.total).toBe(inst.PASS_TO_PASS.length);
      const e = empty.get(inst.instance_id);
      expect(e?.swe?.status, `${inst.instance_id}: ${e?.error}`).toBe("unresolved");
      expect(e?.swe?.failToPass.passed).toBe(0);
    }
    expect(
      readFileSync(join(work, "gold", "predictions.jsonl"), "utf8")
        .trim()
        .split("\n"),
    ).toHaveLength(2);
  });
});
