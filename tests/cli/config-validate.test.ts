/**
 * `loopsmith config validate` and `config show` run as a user runs them, on a file with a typo
 * and a bad improve setting: both exit 2 (a configuration error), validate listing every
 * problem one per line with the file, the key and the nearest known key.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loopsmith } from "../fixtures/cli.js";

describe("config validate", () => {
  it("exits 2 listing every problem, config show exits 2 too; a valid file exits 0", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-config-validate-"));
    const file = join(dir, "config.json");
    writeFileSync(file, JSON.stringify({ llm: { modle: "claude-opus-4-1" }, improve: { generations: 0 } }));
    const env = { XDG_CONFIG_HOME: join(dir, "xdg"), LOOPSMITH_CONFIG: "", LOOPSMITH_CONFIG_JSON: "" };

    const validate = await loopsmith(["config", "validate", "--file", file], env, 60_000);
    expect(validate.code, validate.stderr).toBe(2);
    expect(validate.stdout.trim().split("\n")).toEqual([
      `${file}: unknown key llm.modle; did you mean llm.model?`,
      expect.stringMatching(new RegExp(`^${file}: improve\\.generations: .*>=1`)),
    ]);
    expect(validate.stderr).toContain("the configuration is invalid: 2 problems");

    const show = await loopsmith(["config", "show", "--config", file], env, 60_000);
    expect(show.code, show.stderr).toBe(2);
    expect(show.stderr).toContain("unknown key llm.modle; did you mean llm.model?");

    writeFileSync(file, JSON.stringify({ llm: { model: "claude-opus-4-1" }, improve: { generations: 2 } }));
    const valid = await loopsmith(["config", "validate", "--file", file], env, 60_000);
    expect(valid.code, valid.stderr).toBe(0);
    expect(valid.stdout).toBe(`valid: ${file}\n`);
  }, 180_000);
});
