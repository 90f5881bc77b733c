/**
 * Shell completion made from a commander program: bash's script completes for real (sourced
 * in bash, asked as bash asks it), zsh's and fish's carry the same commands, options and
 * descriptions; `--version` prints package.json's version.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Argument, Command, Option } from "commander";
import { describe, expect, it } from "vitest";
import { completionScript, completionTree } from "./completion.js";

const REPO = join(import.meta.dirname, "..", "..");

/** A small program shaped like loopsmith's: nested commands, options, a choice argument, a hidden option. */
function program(): Command {
  const p = new Command().name("tool").version("1.2.3").option("--env-from <file>", "read variables: it's 'quoted'");
  p.command("solve")
    .description("solve a task\nsecond line")
    .option("-f, --file <file>", "task file")
    .option("--json", "JSON");
  const config = p.command("config").description("configuration");
  config.command("show").description("print it").option("--config <file>", "a file");
  p.command("completion").addArgument(new Argument("<shell>", "the shell").choices(["bash", "zsh", "fish"]));
  p.command("secret").option("--x", "x").addOption(new Option("--hidden-flag").hideHelp());
  return p;
}

/** What bash's completion offers for `line` (the last word is the one being completed). */
function bashComplete(script: string, line: string): string[] {
  const words = line.split(" ");
  const probe = `${script}
COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")})
COMP_CWORD=${words.length - 1}
_tool
printf '%s\\n' "\${COMPREPLY[@]}"`;
  const run = spawnSync("bash", ["-c", probe], { encoding: "utf8" });
  expect(run.status, run.stderr).toBe(0);
  return run.stdout.split("\n").filter(Boolean);
}

describe("shell completion from the commander program", () => {
  it("walks every visible command with its options, hidden ones left out", () => {
    const tree = completionTree(program());
    expect(tree.map((n) => n.path)).toEqual(["", "/solve", "/config", "/config/show", "/completion", "/secret"]);
    const solve = tree.find((n) => n.path === "/solve");
    expect(solve?.options.map((o) => o.flag)).toEqual(["--file", "-f", "--json", "--help", "-h"]);
    expect(tree.find((n) => n.path === "/secret")?.options.map((o) => o.flag)).not.toContain("--hidden-flag");
    expect(tree[0]?.subcommands.find((s) => s.name === "solve")?.description).toBe("solve a task");
  });

  it("bash: subcommands, nested subcommands, options of the command being typed, an argument's choices", () => {
    const script = completionScript(program(), "bash");
    expect(bashComplete(script, "tool so")).toEqual(["solve"]);
    expect(bashComplete(script, "tool ")).toEqual(
      expect.arrayContaining(["solve", "config", "completion", "--env-from"]),
    );
    expect(bashComplete(script, "tool config ")).toEqual(["show", "--help", "-h"]);
    expect(bashComplete(script, "tool config show --c")).toEqual(["--config"]);
    expect(bashComplete(script, "tool solve --f")).toEqual(["--file"]);
    expect(bashComplete(script, "tool solve --file task.json --j")).toEqual(["--json"]);
    expect(bashComplete(script, "tool completion z")).toEqual(["zsh"]);
    // An option of another command is not offered.
    expect(bashComplete(script, "tool config --fi")).toEqual([]);
  });

  it("zsh and fish: the same commands and options, with their descriptions quoted for the shell", () => {
    const zsh = completionScript(program(), "zsh");
    expect(zsh.split("\n")[0]).toBe("#compdef tool");
    expect(zsh).toContain(`'/config')\n      subs=('show:print it')`);
    expect(zsh).toContain(`'--env-from:read variables: it'\\''s '\\''quoted'\\'''`);
    const fish = completionScript(program(), "fish");
    expect(fish).toContain(`complete -c tool -n 'test (_tool_node) = \\'/config\\'' -f -a 'show' -d 'print it'`);
    expect(fish).toContain(`complete -c tool -n 'test (_tool_node) = \\'/solve\\'' -l 'file' -d 'task file'`);
    expect(fish).toContain(`complete -c tool -n 'test (_tool_node) = \\'/solve\\'' -s 'f' -d 'task file'`);
    expect(fish).toContain(`-d 'read variables: it\\'s \\'quoted\\''`);
    for (const [shell, text] of [
      ["zsh", zsh],
      ["fish", fish],
    ] as const) {
      // Syntax-checked by the shell itself where it is installed (bash always is).
      const which = spawnSync("bash", ["-c", `command -v ${shell}`], { encoding: "utf8" });
      // deploy/prepare.sh installs both shells: a missing one is a failure, not a skip.
      expect(which.status, `${shell} is not installed (deploy/prepare.sh installs it)`).toBe(0);
      const file = join(mkdtempSync(join(tmpdir(), "loopsmith-completion-")), `tool.${shell}`);
      writeFileSync(file, text);
      const check = spawnSync(shell, ["-n", file], { encoding: "utf8" });
      expect(check.status, check.stderr).toBe(0);
      if (shell === "fish") {
        // fish completes for real from the script: `complete -C` asks as a Tab does.
        const asked = spawnSync(
          "fish",
          ["-c", `source ${file}; complete -C "tool config "; complete -C "tool solve --fi"`],
          {
            encoding: "utf8",
          },
        );
        expect(asked.stdout.split("\n").filter(Boolean)).toEqual(["show\tprint it", "--file\ttask file"]);
      }
    }
    const bash = spawnSync("bash", ["-n"], { input: completionScript(program(), "bash"), encoding: "utf8" });
    expect(bash.status, bash.stderr).toBe(0);
  });

  it("the real loopsmith: completion bash completes its commands, --version prints package.json's version", () => {
    const cli = join(REPO, "cli", "bin", "loopsmith.js");
    const version = spawnSync(process.execPath, [cli, "--version"], { encoding: "utf8", cwd: REPO });
    const manifest = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
    expect(version.stdout.trim()).toBe(manifest.version);
    const made = spawnSync(process.execPath, [cli, "completion", "bash"], { encoding: "utf8", cwd: REPO });
    expect(made.status, made.stderr).toBe(0);
    const script = made.stdout.replace(/_loopsmith/g, "_tool").replace(/ loopsmith$/m, " tool");
    expect(bashComplete(script, "loopsmith con")).toEqual(["config"]);
    expect(bashComplete(script, "loopsmith config sh")).toEqual(["show"]);
    expect(bashComplete(script, "loopsmith solve --fi")).toEqual(["--file"]);
    const bad = spawnSync(process.execPath, [cli, "completion", "ksh"], { encoding: "utf8", cwd: REPO });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/bash, zsh, fish/);
  });
});
