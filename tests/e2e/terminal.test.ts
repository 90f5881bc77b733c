/**
 * Sandboxed code cannot drive the terminal of whoever reads `loopsmith sandbox run`: escape
 * sequences it prints (set the title, clear the screen) are shown, not obeyed; `--json`
 * keeps them exactly (escaped by JSON).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loopsmith } from "../fixtures/cli.js";

const dir = mkdtempSync(join(tmpdir(), "loopsmith-terminal-"));
writeFileSync(
  join(dir, "test_hostile.py"),
  [
    "def test_hostile():",
    '    print("\\x1b]0;owned\\x07\\x1b[2J\\x9b31m")',
    '    assert False, "\\x1b]2;owned-too\\x07"',
    "",
  ].join("\n"),
);
const env = { NATS_URL: "", DATABASE_URL: "" };
// eslint-disable-next-line no-control-regex
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe("sandbox output on a terminal", () => {
  it("is shown with its escapes neutralised; --json keeps it lossless", async () => {
    const human = await loopsmith(["sandbox", "run", "--language", "python", "--dir", dir], env, 120_000);
    expect(human.code, human.stderr).toBe(1);
    expect(human.stdout).toContain("\\x1b]0;owned\\x07\\x1b[2J\\x9b31m");
    expect(human.stdout).not.toMatch(RAW_CONTROL);
    expect(human.stderr).not.toMatch(RAW_CONTROL);

    const json = await loopsmith(["sandbox", "run", "--language", "python", "--dir", dir, "--json"], env, 120_000);
    expect(json.code, json.stderr).toBe(1);
    expect(json.stdout).not.toMatch(RAW_CONTROL);
    const result = JSON.parse(json.stdout) as { status: string; stdout: string };
    expect(result.status).toBe("failed");
    expect(result.stdout).toContain("\u001b]0;owned\u0007\u001b[2J\u009b31m");
  });
});
