import pino from "pino";
import { describe, expect, it } from "vitest";
import { Config } from "../runtime/config.js";
import { Plan } from "../contracts/plan.js";
import type { ScriptFile, Simulation, TaskScript } from "../contracts/script.js";
import { createProvider, resolvePrice } from "./create.js";
import { basePriceKey } from "./prices.js";
import type { CompletionRequest } from "./types.js";

const log = pino({ level: "silent" });

describe("createProvider", () => {
  it("builds an anthropic provider without an API key that refuses every model call with provider_unconfigured, naming ANTHROPIC_API_KEY, and still answers a task's own replies", async () => {
    const p = createProvider({ config: Config.parse({ llm: { provider: "anthropic" } }), log });
    expect(p.info).toEqual({ name: "anthropic", model: "claude-sonnet-4-6", scripted: false });
    const refused = {
      code: "provider_unconfigured",
      retryable: false,
      message: expect.stringContaining("ANTHROPIC_API_KEY is not set"),
    };
    await expect(p.verify?.()).rejects.toMatchObject(refused);
    await expect(p.complete(planRequest("task-1"))).rejects.toMatchObject(refused);
    await expect(p.complete(planRequest("task-2", taskScript))).resolves.toMatchObject({
      value: plan,
      provider: { name: "scripted" },
    });
  });

  it("builds each real provider with its info", () => {
    const a = createProvider({ config: Config.parse({ llm: { provider: "anthropic", apiKey: "k" } }), log });
    expect(a.info).toEqual({ name: "anthropic", model: "claude-sonnet-4-6", scripted: false });
    const o = createProvider({
      config: Config.parse({
        llm: { provider: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1", model: "llama3" },
      }),
      log,
    });
    expect(o.info).toEqual({ name: "openai-compatible", model: "llama3", scripted: false });
  });
});

const plan: Plan = {
  summary: "the task's own plan",
  acceptanceCriteria: [],
  steps: ["write it"],
  files: ["solution.py"],
};
const taskScript: ScriptFile = { v: 1, kind: "loopsmith-script", replies: { plan: [plan] } };
const simulation: Simulation = {
  v: 1,
  kind: "loopsmith-simulation",
  source: "HumanEval/3",
  path: "solution.py",
  solution: "x = 1\n",
  wrong: [{ content: "x = 2\n", cause: "1 -> 2", description: "line 1" }],
  findRate: 0.3,
  seed: 1,
};
const planRequest = (taskId: string, script?: TaskScript): CompletionRequest<Plan> => ({
  role: "plan",
  system: "plan",
  messages: [{ role: "user", content: "## Task\nWrite x." }],
  schema: Plan,
  schemaName: "plan",
  context: { taskId, iteration: 1, ...(script ? { script } : {}) },
});

/** The scripted provider's configuration without a script file (Config's own check requires one today). */
function scriptlessConfig(extra: Record<string, unknown> = {}): Config {
  const parsed = Config.parse({ llm: { provider: "scripted", scriptPath: "/nonexistent/script.json", ...extra } });
  const { scriptPath: _drop, ...llm } = parsed.llm;
  return { ...parsed, llm };
}

describe("createProvider and the replies a task carries", () => {
  it("builds the scripted provider without a script file; a task without replies is refused naming it", async () => {
    const p = createProvider({ config: scriptlessConfig(), log });
    expect(p.info).toEqual({ name: "scripted", model: "script:none", scripted: true });
    await expect(p.complete(planRequest("task-7"))).rejects.toMatchObject({
      code: "provider_unconfigured",
      message:
        "the scripted provider has no script file (LOOPSMITH_SCRIPT) and task task-7 carries no replies (Task.script)",
    });
    const done = await p.complete(planRequest("task-8", taskScript));
    expect(done.value).toEqual(plan);
    expect(done.provider).toEqual({ name: "scripted", model: "script:task", scripted: true });
  });

  it("builds it without a script file when roles route to several models too", async () => {
    const p = createProvider({ config: scriptlessConfig({ roles: { build: { model: "other" } } }), log });
    expect(p.info).toEqual({ name: "scripted", model: "script:none", scripted: true });
    await expect(p.complete(planRequest("task-9"))).rejects.toMatchObject({ code: "provider_unconfigured" });
    await expect(p.complete(planRequest("task-9", simulation))).resolves.toMatchObject({
      provider: { name: "simulated", model: "simulated:HumanEval/3" },
    });
  });

  it("every provider honours a task's script: a model provider answers it without calling the model", async () => {
    // The base URL goes nowhere: a call that reached the model would fail.
    const p = createProvider({
      config: Config.parse({
        llm: { provider: "anthropic", apiKey: "k", baseUrl: "http://127.0.0.1:1", maxRetries: 0 },
      }),
      log,
    });
    expect(p.info).toEqual({ name: "anthropic", model: "claude-sonnet-4-6", scripted: false });
    const scripted = await p.complete(planRequest("task-1", taskScript));
    expect(scripted).toMatchObject({
      value: plan,
      provider: { name: "scripted", model: "script:task", scripted: true },
      usage: { costUsd: 0 },
    });
    const simulated = await p.complete(planRequest("task-2", simulation));
    expect(simulated.provider).toEqual({ name: "simulated", model: "simulated:HumanEval/3", scripted: true });
    await expect(p.complete(planRequest("task-3"))).rejects.toMatchObject({ code: "unavailable" });
  });
});

describe("createProvider with per-role models", () => {
  it("info names the llm default; a role's anthropic model without a key is refused naming the role", async () => {
    const routed = createProvider({
      config: Config.parse({
        llm: {
          provider: "openai-compatible",
          baseUrl: "http://127.0.0.1:1/v1",
          model: "llama3",
          roles: { plan: { model: "qwen3" } },
        },
      }),
      log,
    });
    expect(routed.info).toEqual({ name: "openai-compatible", model: "llama3", scripted: false });
    const config = Config.parse({
      llm: {
        provider: "openai-compatible",
        baseUrl: "http://127.0.0.1:1/v1",
        roles: { plan: { provider: "anthropic", model: "claude-opus-4-1" } },
      },
    });
    const p = createProvider({ config, log });
    await expect(p.complete(planRequest("task-4"))).rejects.toMatchObject({
      code: "provider_unconfigured",
      message: expect.stringContaining("llm.roles.plan"),
    });
  });
});

describe("prices", () => {
  it("maps Bedrock and dated ids to the base model", () => {
    expect(basePriceKey("us.anthropic.claude-sonnet-4-5-20250929-v1:0")).toBe("claude-sonnet-4-5");
    expect(basePriceKey("anthropic.claude-haiku-4-5-20251001-v1:0")).toBe("claude-haiku-4-5");
    expect(basePriceKey("claude-opus-4-1-20250805")).toBe("claude-opus-4-1");
    expect(basePriceKey("gpt-4o")).toBe("gpt-4o");
  });

  it("prefers configured prices, then @pydantic/genai-prices, else unknown", () => {
    const config = Config.parse({ llm: { prices: { "my-model": { inputPerMTok: 7, outputPerMTok: 9 } } } });
    expect(resolvePrice(config, "my-model", log)).toMatchObject({
      rates: { inputPerMTok: 7, outputPerMTok: 9 },
      source: { kind: "config", key: 'llm.prices["my-model"]' },
    });
    expect(resolvePrice(config, "claude-haiku-4-5-20251001", log)).toMatchObject({
      rates: { inputPerMTok: 1, outputPerMTok: 5 },
      source: { kind: "genai-prices", provider: "anthropic" },
    });
    expect(resolvePrice(config, "unknown", log)).toMatchObject({
      rates: { inputPerMTok: 0, outputPerMTok: 0 },
      source: { kind: "unknown" },
    });
  });
});

describe("createProvider loads no SDK until a model is called", () => {
  it("importing shared's llm and runtime entry points and building model providers imports none of the SDKs", async () => {
    const { spawnSync } = await import("node:child_process");
    // A resolve hook that fails any import of an SDK package: the child exits non-zero if one is loaded.
    const hook = `export async function resolve(s, c, next) { if (/^(@anthropic-ai\\/|openai($|\\/))/.test(s)) throw new Error("SDK imported: " + s); return next(s, c); }`;
    const code = [
      "const { register } = await import('node:module');",
      `register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hook)}));`,
      "const { createProvider } = await import('@loopsmith/shared/llm');",
      "const { Config, createLogger } = await import('@loopsmith/shared/runtime');",
      "const log = createLogger({ service: 't', level: 'silent' });",
      "createProvider({ config: Config.parse({ llm: { provider: 'openai-compatible', baseUrl: 'http://127.0.0.1:1/v1', model: 'm' } }), log });",
      "createProvider({ config: Config.parse({ llm: { provider: 'anthropic', apiKey: 'k' } }), log });",
      "createProvider({ config: Config.parse({ llm: { provider: 'bedrock' } }), log });",
      "console.log('no SDK');",
    ].join("\n");
    const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], { encoding: "utf8" });
    expect(r.stderr).not.toMatch(/SDK imported/);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("no SDK");
  }, 60_000);
});
