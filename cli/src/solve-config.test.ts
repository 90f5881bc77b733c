import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "@loopsmith/shared/runtime";
import { configFiles } from "./solve.js";

describe("solve's configuration files", () => {
  it("--repo names the repository whose file counts, not the working directory's", () => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-solve-config-"));
    const other = join(dir, "other");
    mkdirSync(join(other, ".git"), { recursive: true });
    mkdirSync(join(other, "src"));
    writeFileSync(join(other, "loopsmith.json"), JSON.stringify({ llm: { model: "from-other-repo" } }));
    const env = { XDG_CONFIG_HOME: join(dir, "no-user-config") };
    expect(configFiles({ repo: join(other, "src") })).toEqual({ repoRoot: other });
    expect(configFiles({})).toEqual({});
    // Run from a directory outside any repository: only --repo finds the file.
    expect(loadConfig({ env, cwd: dir, ...configFiles({ repo: other }) }).llm.model).toBe("from-other-repo");
    expect(loadConfig({ env, cwd: dir, ...configFiles({}) }).llm.model).not.toBe("from-other-repo");
  });
});
