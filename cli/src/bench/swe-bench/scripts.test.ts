/**
 * The scripted agent transcripts shipped for SWE-bench instances (examples/swe-bench/scripts
 * and tests/fixtures/swe-bench-other/scripts): each one parses as a
 * `loopsmith-script` the way the agent run reads it (`scriptOf`), calls only the agent tools
 * with arguments their schemas accept, ends with `submit`, and its edits apply to the
 * instance's repository at `base_commit`, touch no test file and give the same files as the
 * upstream fix's `patch`. Offline: git over a bare clone of each fixture's bundle.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ToolArgs, ToolName, type ScriptFile } from "@loopsmith/shared/contracts";
import { applyEdits, isTestFile } from "@loopsmith/shared/workspace";
import { afterAll, describe, expect, it } from "vitest";
import { scriptOf } from "./agent.js";
import { filesOfPatch, loadInstances, repoSource } from "@loopsmith/evals";

const ROOT = join(import.meta.dirname, "../../../..");
const SETS = [
  { name: "examples/swe-bench", dir: join(ROOT, "examples/swe-bench") },
  { name: "tests/fixtures/swe-bench-other", dir: join(ROOT, "tests/fixtures/swe-bench-other") },
];
const work = mkdtempSync(join(tmpdir(), "swe-scripts-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A bare clone of `repo`'s bundle (or bare clone) in `reposDir`, made once per set. */
function bareClone(reposDir: string, repo: string, name: string): string {
  const dest = join(work, name);
  execFileSync("git", ["clone", "-q", "--bare", repoSource(reposDir, repo), dest], { stdio: "ignore" });
  return dest;
}

/** `git -C <dir> ...`'s stdout; `env` adds to the environment. */
function git(dir: string, args: string[], env: Record<string, string> = {}, input?: string): string {
  return execFileSync("git", ["-C", dir, ...args], {
    encoding: "utf8",
    env: { ...process.env, ...env },
    maxBuffer: 64 * 1024 * 1024,
    ...(input !== undefined ? { input } : {}),
  });
}

/** A file's text at `commit`, undefined when the commit has no such file. */
function fileAt(dir: string, commit: string, path: string): string | undefined {
  try {
    return git(dir, ["show", `${commit}:${path}`]);
  } catch {
    return undefined;
  }
}

/** Each file `patch` touches, as it is after `git apply` of `patch` on `commit` (a temporary index; no work tree). */
function applied(dir: string, commit: string, patch: string, name: string): Map<string, string | undefined> {
  const env = { GIT_INDEX_FILE: join(work, `${name}.index`) };
  git(dir, ["read-tree", commit], env);
  git(dir, ["apply", "--cached", "-"], env, patch);
  return new Map(
    filesOfPatch(patch).map((p) => {
      try {
        return [p, git(dir, ["show", `:${p}`], env)];
      } catch {
        return [p, undefined];
      }
    }),
  );
}

describe.each(SETS)("scripted transcripts of $name", ({ name, dir }) => {
  const dataset = join(dir, "instances.jsonl");
  const instances = loadInstances(dataset);
  const files = readdirSync(join(dir, "scripts")).filter((f) => f.endsWith(".json"));
  // One bare clone per repository of the set, made before the cases run.
  const repos = new Map<string, string>();
  for (const r of new Set(instances.map((i) => i.repo)))
    repos.set(`${name}:${r}`, bareClone(join(dir, "repos"), r, `${name.replace(/\W/g, "_")}-${r.replace("/", "__")}`));

  it("has one transcript per instance and none for an unknown instance", () => {
    expect(files.map((f) => f.replace(/\.json$/, "")).sort()).toEqual(instances.map((i) => i.instance_id).sort());
  });

  it.each(instances.map((i) => [i.instance_id, i] as const))(
    "%s: agent tools only, ends with submit, and its edits make the upstream fix's source change",
    (id, inst) => {
      const script: ScriptFile | undefined = scriptOf({ dataset }, id);
      const turns = script?.replies.agent ?? [];
      expect(turns.length).toBeGreaterThan(0);
      const calls = turns.flatMap((t) => t.toolCalls);
      for (const c of calls) {
        expect(ToolName.options, `${id}: tool ${c.name}`).toContain(c.name);
        const parsed = ToolArgs[c.name as ToolName].safeParse(c.args);
        expect(parsed.success, `${id}: ${c.name} ${JSON.stringify(c.args)}`).toBe(true);
      }
      expect(calls.at(-1)?.name).toBe("submit");
      expect(turns.at(-1)?.toolCalls.map((c) => c.name)).toEqual(["submit"]);
      // The agent explores before it changes anything (what the transcript is there to show).
      const tools = calls.map((c) => c.name);
      for (const t of ["search", "read", "run", "edit"]) expect(tools, id).toContain(t);
      expect(tools.indexOf("run")).toBeLessThan(tools.indexOf("edit"));

      const edits = calls.filter((c) => c.name === "edit").flatMap((c) => ToolArgs.edit.parse(c.args).edits);
      const testFiles = new Set(filesOfPatch(inst.test_patch));
      for (const e of edits) {
        expect(isTestFile(e.path, "python"), `${id} edits test file ${e.path}`).toBe(false);
        expect(testFiles.has(e.path), `${id} edits ${e.path}, which test_patch touches`).toBe(false);
      }
      const repo = repos.get(`${name}:${inst.repo}`) ?? "";
      const result = applyEdits(edits, (p) => fileAt(repo, inst.base_commit, p));
      expect(result.ok, `${id}: ${JSON.stringify(result.ok ? [] : result.failures)}`).toBe(true);
      if (!result.ok) return;
      expect(result.deleted).toEqual([]);
      const gold = applied(repo, inst.base_commit, inst.patch, id);
      expect(result.changed.map((f) => f.path).sort()).toEqual([...gold.keys()].sort());
      for (const f of result.changed) expect(f.content, `${id}: ${f.path}`).toBe(gold.get(f.path));
    },
  );
});
