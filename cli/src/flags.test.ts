import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import {
  BenchFormat,
  DependencyPolicy,
  ImproveSettings,
  Language,
  RepoSpec,
  Task,
  TaskLimits,
} from "@loopsmith/shared/contracts";
import { ProviderName, loadConfig, loadConfigWithSources } from "@loopsmith/shared/runtime";
import { ROLES, effectiveRoles } from "@loopsmith/shared/llm";
import { registerBench } from "./commands/bench.js";
import { registerImprove } from "./commands/improve.js";
import { registerSandboxCommand } from "./commands/sandbox.js";
import { improveSteering } from "./improve/run.js";
import type { ImproveFlags } from "./improve/settings.js";
import { addModelFlags } from "./model-flags.js";
import { buildTask, limitsOf, type SolveOptions } from "./solve.js";
import { flagsOf, steering } from "./steering.js";
import { prepareRepoTask } from "./solve-repo.js";

describe("per-role flags", () => {
  it("--model-<role> and --provider-<role> become llm.roles and reach each role's effective model", () => {
    const flags = flagsOf({
      model: "claude-sonnet-4-6",
      modelPlan: "claude-opus-4-1",
      modelBuild: "gpt-4o-mini",
      providerBuild: "openai-compatible",
    });
    expect(flags).toEqual({
      llm: {
        model: "claude-sonnet-4-6",
        roles: { plan: { model: "claude-opus-4-1" }, build: { model: "gpt-4o-mini", provider: "openai-compatible" } },
      },
    });
    const env = {
      ANTHROPIC_API_KEY: "sk-ant-test",
      OPENAI_API_KEY: "sk-test",
      LOOPSMITH_BASE_URL_BUILD: "http://127.0.0.1:11434/v1",
    };
    const roles = effectiveRoles(loadConfig({ env, flags }));
    expect(roles.plan).toMatchObject({ provider: "anthropic", model: "claude-opus-4-1" });
    expect(roles.build).toMatchObject({
      provider: "openai-compatible",
      model: "gpt-4o-mini",
      baseUrl: "http://127.0.0.1:11434/v1",
    });
    expect(roles.review).toMatchObject({ provider: "anthropic", model: "claude-sonnet-4-6" });
  });

  it("no role flags, no roles", () => {
    expect(flagsOf({})).toEqual({});
  });

  it("improve takes solve's model flags: the same configuration, the same sources", async () => {
    const argv = [
      "--model",
      "claude-opus-4-1",
      "--model-improve",
      "claude-haiku-4-5",
      "--provider-reflect",
      "anthropic",
    ];
    // improve as main.ts registers it; solve's flags from the same function main.ts gives solve.
    const program = new Command().exitOverride();
    registerImprove(
      program,
      async () => undefined,
      async () => {
        throw new Error("no logger in this test");
      },
    );
    await program.parseAsync(["node", "loopsmith", "improve", ...argv]);
    const improveOpts = program.commands.find((c) => c.name() === "improve")?.opts() as ImproveFlags;
    const solveOpts = addModelFlags(new Command("solve")).parse(argv, { from: "user" }).opts() as SolveOptions;

    const improve = await improveSteering(improveOpts);
    const solve = await steering(solveOpts, {});
    expect(improve.flags).toEqual({
      llm: {
        model: "claude-opus-4-1",
        roles: { improve: { model: "claude-haiku-4-5" }, reflect: { provider: "anthropic" } },
      },
    });
    expect(improve.flags).toEqual(solve.flags);
    expect(improve.config).toEqual(solve.config);
    expect(improve.childEnv).toEqual(solve.childEnv);
    const roles = effectiveRoles(improve.config);
    expect(roles.improve.model).toBe("claude-haiku-4-5");
    expect(roles.plan.model).toBe("claude-opus-4-1");
    // config show names the flags as their source, for both commands alike.
    const sources = loadConfigWithSources({ flags: improve.flags }).sources;
    expect(sources["llm.model"]).toEqual({ kind: "flag" });
    expect(sources["llm.roles.improve.model"]).toEqual({ kind: "flag" });
  });
});

describe("task flags", () => {
  it("--memory off reaches the task, on every kind of task; absent, the task's default (on) applies", () => {
    const goal = buildTask("write add(a, b)", { memory: "off" });
    expect(Task.parse(goal).memory).toBe("off");
    expect(Task.parse(buildTask("write add(a, b)", {})).memory).toBe("on");
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-flags-"));
    const file = join(dir, "task.json");
    writeFileSync(file, JSON.stringify({ goal: "write add(a, b)", language: "python", memory: "on" }));
    // The flag wins over the task file.
    expect(Task.parse(buildTask(undefined, { file, memory: "off" })).memory).toBe("off");
    expect(() => buildTask("g", { memory: "sometimes" as "on" })).toThrow(/--memory \(memory\)/);
  });
});

describe("DAG task flags", () => {
  /** A git repository with one commit. */
  function repo(): string {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-dag-flags-"));
    const git = (...args: string[]) =>
      execFileSync("git", ["-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", ...args], {
        stdio: "pipe",
      });
    git("init", "-q");
    writeFileSync(join(dir, "README.md"), "empty project\n");
    git("add", ".");
    git("commit", "-q", "-m", "start");
    return dir;
  }

  it("--decompose, --parallel and --subtask-attempts set task.decompose, task.parallel and limits.subtaskAttempts", async () => {
    const o = { repo: repo(), decompose: true, parallel: 4, subtaskAttempts: 5, maxIterations: 7 };
    const task = Task.parse((await prepareRepoTask("build a todo app", o, limitsOf(o))).task);
    expect(task).toMatchObject({ decompose: true, parallel: 4, limits: { subtaskAttempts: 5, maxIterations: 7 } });
    expect(task.parent).toBeUndefined();
  });

  it("without them: not decomposed, parallel absent (the builder replicas), 3 attempts per subtask", async () => {
    const task = Task.parse((await prepareRepoTask("fix the bug", { repo: repo() }, limitsOf({}))).task);
    expect(task.decompose).toBe(false);
    expect(task.parallel).toBeUndefined();
    expect(task.limits.subtaskAttempts).toBe(3);
  });

  it("--parallel or --subtask-attempts without --decompose, and any of them without --repo, are refused", async () => {
    await expect(prepareRepoTask("g", { repo: repo(), parallel: 2 }, {})).rejects.toThrow(
      "--parallel, --subtask-attempts and --subtask-timeout apply to --decompose only",
    );
    expect(() => buildTask("g", { decompose: true })).toThrow("--decompose applies to --repo only");
    expect(() => buildTask("g", { parallel: 2, subtaskAttempts: 2 })).toThrow(
      /^--parallel, --subtask-attempts apply to --repo only/,
    );
  });
});

describe("the CLI's choices are the contracts'", () => {
  const noLogger = async () => {
    throw new Error("no logger in this test");
  };
  /** The values commander accepts for `flag` of `command`. */
  const choicesOf = (command: Command | undefined, flag: string): readonly string[] | undefined =>
    command?.options.find((o) => o.long === flag)?.argChoices;

  it("the model flags, improve, metrics, bench and sandbox run accept exactly the schemas' values", () => {
    const program = new Command();
    registerImprove(program, async () => undefined, noLogger);
    registerBench(program, async () => undefined, noLogger);
    registerSandboxCommand(program);
    const command = (name: string) => program.commands.find((c) => c.name() === name);
    const solve = addModelFlags(new Command("solve"));
    expect(choicesOf(solve, "--provider")).toEqual(ProviderName.options);
    for (const role of ROLES) expect(choicesOf(solve, `--provider-${role}`), role).toEqual(ProviderName.options);
    expect(solve.options.filter((o) => o.long?.startsWith("--model-")).map((o) => o.long)).toEqual(
      ROLES.map((r) => `--model-${r}`),
    );
    const improve = command("improve");
    expect(choicesOf(improve, "--provider")).toEqual(ProviderName.options);
    expect(choicesOf(improve, "--bench-format")).toEqual(BenchFormat.options);
    expect(choicesOf(improve, "--alpha-spending")).toEqual(ImproveSettings.shape.alphaSpending.unwrap().options);
    expect(choicesOf(improve, "--dependencies")).toEqual(DependencyPolicy.options);
    expect(choicesOf(command("metrics"), "--bench-format")).toEqual(BenchFormat.options);
    expect(choicesOf(command("bench"), "--provider")).toEqual([...ProviderName.options, "simulated"]);
    const sandboxRun = command("sandbox")?.commands.find((c) => c.name() === "run");
    expect(choicesOf(sandboxRun, "--language")).toEqual(Language.options);
  });

  it("solve's --help names the schemas' values and ranges (the real loopsmith, from the sources)", () => {
    const cli = join(import.meta.dirname, "..", "bin", "loopsmith.js");
    const help = spawnSync(process.execPath, [cli, "solve", "--help"], {
      encoding: "utf8",
      env: { ...process.env, LOOPSMITH_FROM_SOURCE: "1" },
    });
    expect(help.status, help.stderr).toBe(0);
    const text = help.stdout.replace(/\s+/g, " ");
    /** The `(choices: …)` commander prints for `flag`, as a list. */
    const listed = (flag: string): string[] =>
      [...(new RegExp(`${flag} .*?\\(choices: ([^)]*)\\)`).exec(text)?.[1] ?? "").matchAll(/"([^"]+)"/g)].map(
        (m) => m[1] as string,
      );
    expect(listed("--language <language>")).toEqual(Language.options);
    expect(listed("--memory <mode>")).toEqual(Task.shape.memory.unwrap().options);
    expect(listed("--dependencies <policy>")).toEqual(DependencyPolicy.options);
    expect(listed("--mode <mode>")).toEqual(RepoSpec.shape.mode.unwrap().options);
    expect(listed("--provider <name>")).toEqual(ProviderName.options);
    const max = TaskLimits.shape.maxIterations.unwrap();
    expect(text).toContain(`--max-iterations <n> iterations at most (${max.minValue} to ${max.maxValue}; default 5)`);
    const parallel = Task.shape.parallel.unwrap();
    expect(text).toContain(`subtasks running at once (${parallel.minValue} to ${parallel.maxValue};`);
    const attempts = TaskLimits.shape.subtaskAttempts.unwrap();
    expect(text).toContain(`attempts per subtask (${attempts.minValue} to ${attempts.maxValue}; default 3)`);
  });
});
