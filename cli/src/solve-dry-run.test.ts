/**
 * `solve --dry-run` run as a user runs it: the prompt budget of an inline task and of a
 * repo-mode task (the files the goal names, read from the base commit), with nothing started
 * (an empty data directory afterwards, a configured NATS with nothing listening never asked).
 */
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { namedFiles } from "./solve-dry-run.js";

const REPO = join(import.meta.dirname, "..", "..");

function cli(args: string[], dataDir: string) {
  return spawnSync(process.execPath, [join(REPO, "cli", "bin", "loopsmith.js"), ...args], {
    cwd: REPO,
    encoding: "utf8",
    timeout: 60_000,
    env: {
      ...process.env,
      LOOPSMITH_DATA_DIR: dataDir,
      // Nothing listens there: a dry run must not need it.
      NATS_URL: "nats://127.0.0.1:1",
      LOOPSMITH_CONFIG: "",
      LOOPSMITH_MODEL: "claude-sonnet-4-6",
      LOOPSMITH_PROVIDER: "",
    },
  });
}

describe("solve --dry-run", () => {
  it("names the files a goal names, whole paths or file names", () => {
    const files = ["inventory/pricing.py", "inventory/models.py", "tests/test_pricing.py", "a.py"];
    expect(namedFiles("fix the total in pricing.py", files)).toEqual(["inventory/pricing.py"]);
    expect(namedFiles("see tests/test_pricing.py and models.py.", files)).toEqual([
      "inventory/models.py",
      "tests/test_pricing.py",
    ]);
    // A name inside a longer word is not a mention.
    expect(namedFiles("the xpricing.py module and models.pyc", files)).toEqual([]);
  });

  it("inline and repo mode: the build prompt's parts and total, nothing started, no NATS asked", () => {
    const dataDir = mkdtempSync(join(tmpdir(), "loopsmith-dry-run-"));
    const inline = cli(
      ["solve", "--file", join(REPO, "examples", "roman", "task.json"), "--dry-run", "--json"],
      dataDir,
    );
    expect(inline.status, inline.stderr).toBe(0);
    const planned = JSON.parse(inline.stdout.trim().split("\n").at(-1) as string) as {
      kind: string;
      mode: string;
      buildPrompt: Array<{ part: string; tokens: number }>;
      buildPromptTokens: number;
      buildInputUsd: number;
      models: { build: string };
    };
    expect(planned).toMatchObject({
      kind: "dry_run",
      mode: "inline",
      models: { build: "anthropic/claude-sonnet-4-6" },
    });
    expect(planned.buildPrompt.map((p) => p.part)).toEqual(["goal", "test test_roman.py"]);
    expect(planned.buildPromptTokens).toBe(planned.buildPrompt.reduce((n, p) => n + p.tokens, 0));
    // claude-sonnet-4-6 input at its listed price.
    expect(planned.buildInputUsd).toBeGreaterThan(0);

    const repo = mkdtempSync(join(tmpdir(), "loopsmith-dry-run-repo-"));
    cpSync(join(REPO, "examples", "repo-bugfix", "repo"), repo, { recursive: true });
    const git = (...a: string[]) =>
      spawnSync("git", ["-c", "user.email=t@t", "-c", "user.name=t", ...a], { cwd: repo, encoding: "utf8" });
    git("init", "-q");
    git("add", "-A");
    git("commit", "-qm", "base");
    const text = cli(
      ["solve", "fix the total in pricing.py for an empty cart", "--repo", repo, "--dry-run", "--map-tokens", "1024"],
      dataDir,
    );
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toMatch(
      /^DRY RUN: task \S+ \(repo mode\) is not submitted; nothing is started and no model is called\.$/m,
    );
    expect(text.stdout).toMatch(/^files the goal names: inventory\/pricing\.py$/m);
    expect(text.stdout).toMatch(/^ +1024 {2}repository map \(budget; \d+ files at [0-9a-f]{12}\)$/m);
    expect(text.stdout).toMatch(/^ +\d+ {2}file inventory\/pricing\.py$/m);
    // Nothing was started: the data directory is as empty as it was made.
    expect(readdirSync(dataDir)).toEqual([]);
  });
});
