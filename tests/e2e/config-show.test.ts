/**
 * `loopsmith config show` run the way a user does, from inside their repository: it reads the
 * repository's file and the user's file without being told, and names the source of each value.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO } from "../fixtures/cli.js";

describe("config show from inside a repository", () => {
  it("reads the repository's and the user's files and names where each value came from", () => {
    const root = mkdtempSync(join(tmpdir(), "loopsmith-config-show-"));
    const repo = join(root, "repo");
    mkdirSync(join(repo, ".git"), { recursive: true });
    mkdirSync(join(repo, "lib"));
    const repoFile = join(repo, "loopsmith.json");
    writeFileSync(repoFile, JSON.stringify({ llm: { model: "repo-model", maxRetries: 3 } }));
    const xdg = join(root, "xdg");
    mkdirSync(join(xdg, "loopsmith"), { recursive: true });
    const userFile = join(xdg, "loopsmith", "config.json");
    writeFileSync(userFile, JSON.stringify({ llm: { maxRetries: 1, timeoutMs: 5000 } }));
    const run = spawnSync(process.execPath, [join(REPO, "cli", "bin", "loopsmith.js"), "config", "show"], {
      cwd: join(repo, "lib"),
      env: {
        ...process.env,
        XDG_CONFIG_HOME: xdg,
        LOOPSMITH_CONFIG: "",
        LOOPSMITH_MODEL: "",
        LOOPSMITH_MAX_OUTPUT_TOKENS: "100",
      },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const shown = JSON.parse(run.stdout) as {
      llm: { model: string; maxRetries: number; timeoutMs: number; maxOutputTokens: number };
      files: unknown;
      sources: Record<string, string>;
    };
    expect(shown.llm).toMatchObject({ model: "repo-model", maxRetries: 3, timeoutMs: 5000, maxOutputTokens: 100 });
    expect(shown.files).toEqual([
      { layer: "user", path: userFile },
      { layer: "repo", path: repoFile },
    ]);
    expect(shown.sources).toMatchObject({
      "llm.model": `repo file ${repoFile}`,
      "llm.maxRetries": `repo file ${repoFile}`,
      "llm.timeoutMs": `user file ${userFile}`,
      "llm.maxOutputTokens": "env LOOPSMITH_MAX_OUTPUT_TOKENS",
      "executor.concurrency": "default",
    });
  });
});
