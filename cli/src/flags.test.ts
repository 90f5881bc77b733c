import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Task, effectiveRoles, loadConfig } from "@loopsmith/shared";
import { buildTask, flagsOf } from "./solve.js";

describe("per-role flags", () => {
  it("--model-<role> and --provider-<role> become llm.roles and reach each role's effective model", () => {
    const flags = flagsOf({ model: "claude-sonnet-4-6", modelPlan: "claude-opus-4-1", modelBuild: "gpt-4o-mini", providerBuild: "openai-compatible" });
    expect(flags).toEqual({ llm: { model: "claude-sonnet-4-6", roles: { plan: { model: "claude-opus-4-1" }, build: { model: "gpt-4o-mini", provider: "openai-compatible" } } } });
    const env = { ANTHROPIC_API_KEY: "sk-ant-test", OPENAI_API_KEY: "sk-test", LOOPSMITH_BASE_URL_BUILD: "http://127.0.0.1:11434/v1" };
    const roles = effectiveRoles(loadConfig({ env, flags }));
    expect(roles.plan).toMatchObject({ provider: "anthropic", model: "claude-opus-4-1" });
    expect(roles.build).toMatchObject({ provider: "openai-compatible", model: "gpt-4o-mini", baseUrl: "http://127.0.0.1:11434/v1" });
    expect(roles.review).toMatchObject({ provider: "anthropic", model: "claude-sonnet-4-6" });
  });

  it("no role flags, no roles", () => {
    expect(flagsOf({})).toEqual({});
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
