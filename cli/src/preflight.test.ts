import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Config, loadConfig } from "@loopsmith/shared/runtime";
import { MAX_ITERATIONS, PARALLEL, SUBTASK_ATTEMPTS } from "@loopsmith/shared/contracts/values";
import { exitCodeForError } from "./exit-codes.js";
import {
  checkBudgetPrices,
  checkNatsListening,
  checkSolveInput,
  configuredNats,
  natsServers,
  parseDuration,
  shownNatsUrl,
  wholeNumber,
} from "./preflight.js";

const dir = mkdtempSync(join(tmpdir(), "loopsmith-preflight-"));
const dataset = join(dir, "he.jsonl");
writeFileSync(
  dataset,
  ["HumanEval/0", "HumanEval/1", "HumanEval/2"].map((id) => JSON.stringify({ task_id: id })).join("\n"),
);

function usage(fn: () => void): string {
  try {
    fn();
  } catch (err) {
    expect((err as { code?: string }).code).toBe("bad_request");
    return (err as Error).message;
  }
  throw new Error("expected a usage error");
}

describe("preflight mirrors shared", () => {
  it("the configured NATS URL follows loadConfig's layers", async () => {
    const file = join(dir, "cfg.json");
    writeFileSync(file, JSON.stringify({ natsUrl: "nats://from-file:4222" }));
    const cases: NodeJS.ProcessEnv[] = [
      {},
      { LOOPSMITH_CONFIG: file },
      { LOOPSMITH_CONFIG: file, NATS_URL: "nats://from-env:4222" },
      { NATS_URL: "nats://from-env:4222", LOOPSMITH_CONFIG_JSON: JSON.stringify({ natsUrl: "nats://from-json:4222" }) },
      { LOOPSMITH_CONFIG: file, NATS_URL: "" },
    ];
    for (const env of cases) expect((await configuredNats({}, env))?.url).toBe(loadConfig({ env }).natsUrl);
    expect(await configuredNats({ config: file }, {})).toEqual({
      url: "nats://from-file:4222",
      source: `natsUrl in ${file}`,
    });
  });

  it("reads the discovered files too: the user's, then the repository's (of --repo when given)", async () => {
    const home = join(dir, "xdg");
    const repo = join(dir, "repo-with-config");
    const other = join(dir, "other-repo");
    mkdirSync(join(home, "loopsmith"), { recursive: true });
    mkdirSync(join(repo, ".git"), { recursive: true });
    mkdirSync(join(other, ".git"), { recursive: true });
    writeFileSync(join(home, "loopsmith", "config.json"), JSON.stringify({ natsUrl: "nats://from-user:4222" }));
    const env = { XDG_CONFIG_HOME: home };
    expect(await configuredNats({}, env, other)).toEqual({
      url: "nats://from-user:4222",
      source: `natsUrl in ${join(home, "loopsmith", "config.json")}`,
    });
    writeFileSync(join(repo, "loopsmith.json"), JSON.stringify({ natsUrl: "nats://from-repo:4222" }));
    expect((await configuredNats({}, env, join(repo)))?.url).toBe("nats://from-repo:4222");
    expect((await configuredNats({ repo }, env, other))?.url).toBe("nats://from-repo:4222");
    expect((await configuredNats({}, env, other))?.url).toBe("nats://from-user:4222");
    for (const cwd of [repo, other])
      expect((await configuredNats({}, env, cwd))?.url).toBe(loadConfig({ env, cwd }).natsUrl);
  });
});

describe("solve's flags and files", () => {
  it("--max-iterations outside 1..50 names the range", () => {
    const parse = wholeNumber(MAX_ITERATIONS.min, MAX_ITERATIONS.max);
    expect(() => parse("0")).toThrow("expected a whole number from 1 to 50");
    expect(() => parse("2.5")).toThrow("from 1 to 50");
    expect(parse("7")).toBe(7);
  });

  it("an unknown --humaneval id names the flag and the ids the dataset has", () => {
    const message = usage(() => checkSolveInput(undefined, { humaneval: "HumanEval/999", dataset }));
    expect(message).toContain("--humaneval HumanEval/999");
    expect(message).toContain("HumanEval/0, HumanEval/1, HumanEval/2");
    expect(() => checkSolveInput(undefined, { humaneval: "2", dataset })).not.toThrow();
  });

  it("a missing --dataset, --file, --script or --config file names the flag", () => {
    expect(usage(() => checkSolveInput(undefined, { humaneval: "1", dataset: join(dir, "nope.jsonl") }))).toMatch(
      /^--dataset .*nope\.jsonl: no such file; give the HumanEval JSONL file/,
    );
    expect(usage(() => checkSolveInput(undefined, { humaneval: "1" }))).toContain("--humaneval needs --dataset");
    expect(usage(() => checkSolveInput(undefined, { file: join(dir, "nope.json") }))).toMatch(/^--file /);
    expect(usage(() => checkSolveInput("goal", { script: join(dir, "nope.json") }))).toMatch(/^--script /);
    expect(usage(() => checkSolveInput("goal", { config: join(dir, "nope.json") }))).toMatch(/^--config /);
  });

  it("--parallel and --subtask-attempts take whole numbers in their ranges, named in the message", () => {
    const parallel = wholeNumber(PARALLEL.min, PARALLEL.max);
    expect(parallel("16")).toBe(16);
    for (const bad of ["0", "17", "2.5", "four", "-1"])
      expect(() => parallel(bad), bad).toThrow("expected a whole number from 1 to 16");
    const attempts = wholeNumber(SUBTASK_ATTEMPTS.min, SUBTASK_ATTEMPTS.max);
    expect(attempts("1")).toBe(1);
    expect(() => attempts("11")).toThrow("expected a whole number from 1 to 10");
  });

  it("--decompose, --parallel and --subtask-attempts need --repo; the last two need --decompose; a usage error (exit 2)", () => {
    const repo = dir;
    const message = usage(() => checkSolveInput("goal", { decompose: true }));
    expect(message).toBe(
      '--decompose applies to --repo only: a DAG task changes a repository (one with nothing but a README will do): loopsmith solve --repo <dir> --decompose "<goal>"',
    );
    expect(usage(() => checkSolveInput("goal", { decompose: true, parallel: 4, subtaskAttempts: 2 }))).toMatch(
      /^--decompose, --parallel, --subtask-attempts apply to --repo only/,
    );
    expect(usage(() => checkSolveInput(undefined, { file: dataset, parallel: 2 }))).toMatch(
      /^--parallel applies to --repo only/,
    );
    expect(usage(() => checkSolveInput("goal", { repo, parallel: 2 }))).toBe(
      "--parallel applies to --decompose only (a DAG task)",
    );
    expect(usage(() => checkSolveInput("goal", { repo, parallel: 2, subtaskAttempts: 3 }))).toBe(
      "--parallel and --subtask-attempts apply to --decompose only (a DAG task)",
    );
    expect(() => checkSolveInput("goal", { repo, decompose: true, parallel: 2, subtaskAttempts: 3 })).not.toThrow();
    expect(usage(() => checkSolveInput("goal", { repo, subtaskTimeout: 60_000 }))).toBe(
      "--subtask-timeout applies to --decompose only (a DAG task)",
    );
    expect(usage(() => checkSolveInput("goal", { subtaskTimeout: 60_000 }))).toMatch(
      /^--subtask-timeout applies to --repo only/,
    );
    expect(() => checkSolveInput("goal", { repo, decompose: true, subtaskTimeout: 60_000 })).not.toThrow();
    expect(exitCodeForError("bad_request")).toBe(2);
  });

  it("--timeout and --subtask-timeout read durations with a unit, from 1 s to 7 days, in ms", () => {
    expect(parseDuration("90s")).toBe(90_000);
    expect(parseDuration("30m")).toBe(1_800_000);
    expect(parseDuration("2h")).toBe(7_200_000);
    expect(parseDuration("1h30m")).toBe(5_400_000);
    expect(parseDuration(" 1.5H ")).toBe(5_400_000);
    expect(parseDuration("1s")).toBe(1_000);
    expect(parseDuration("7d")).toBe(604_800_000);
    for (const bad of ["30", "", "m", "10x", "1h 30m", "-5m", "5 minutes", "1h2h"])
      expect(() => parseDuration(bad), bad).toThrow(/^expected a duration such as 90s, 30m, 2h or 1h30m/);
    expect(() => parseDuration("30m1h")).toThrow("give each unit once, largest first");
    for (const bad of ["0s", "0.5s", "8d", "169h"])
      expect(() => parseDuration(bad), bad).toThrow("expected a duration from 1s to 7d");
  });

  it("exactly one task source; --language only with a goal", () => {
    expect(usage(() => checkSolveInput(undefined, {}))).toContain("give a goal, --file");
    expect(usage(() => checkSolveInput("goal", { file: dataset }))).toContain("a goal and --file");
    expect(usage(() => checkSolveInput(undefined, { file: dataset, language: "python" }))).toContain(
      "--language applies to a goal only",
    );
    expect(() => checkSolveInput("goal", { language: "python" })).not.toThrow();
  });
});

describe("a configured NATS with nothing listening", () => {
  it("servers are shown without credentials", () => {
    expect(natsServers("nats://u:p@a:1,tls://b,c:5")).toEqual([
      { host: "a", port: 1, shown: "nats://a:1" },
      { host: "b", port: 4222, shown: "tls://b:4222" },
      { host: "c", port: 5, shown: "nats://c:5" },
    ]);
    expect(shownNatsUrl("nats://tok3n@127.0.0.1:4222")).toBe("nats://127.0.0.1:4222");
  });

  it("fails fast naming the URL, its source and how to get a NATS; passes when a port accepts", async () => {
    const server: Server = createServer((s) => s.destroy());
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const open = (server.address() as { port: number }).port;
    await new Promise<void>((r) => server.close(() => r()));
    const started = Date.now();
    const err = (await checkNatsListening({ url: `nats://secret@127.0.0.1:${open}`, source: "NATS_URL" }).catch(
      (e: unknown) => e,
    )) as Error & { code: string };
    expect(Date.now() - started).toBeLessThan(1_600);
    expect(err.code).toBe("unavailable");
    expect(err.message).toContain(`nats://127.0.0.1:${open} (from NATS_URL)`);
    expect(err.message).toContain("docker compose up");
    expect(err.message).toContain("unset NATS_URL");
    expect(err.message).not.toContain("secret");

    const listening: Server = createServer((s) => s.destroy());
    await new Promise<void>((r) => listening.listen(0, "127.0.0.1", r));
    const port = (listening.address() as { port: number }).port;
    await expect(
      checkNatsListening({ url: `nats://127.0.0.1:1,nats://127.0.0.1:${port}`, source: "NATS_URL" }),
    ).resolves.toBeUndefined();
    await new Promise<void>((r) => listening.close(() => r()));
  });
});

describe("checkBudgetPrices: a USD budget needs a price for every model", () => {
  const local = (prices: Record<string, { inputPerMTok: number; outputPerMTok: number }> = {}) =>
    Config.parse({
      llm: {
        provider: "anthropic",
        roles: {
          build: {
            provider: "openai-compatible",
            model: "qwen2.5-coder:14b",
            baseUrl: "http://127.0.0.1:11434/v1",
            prices,
          },
        },
      },
    });

  it("--budget-usd with an unpriced model: config_invalid (exit 2) naming the model, the role and the key", async () => {
    const warnings: string[] = [];
    const err = await checkBudgetPrices(local(), { maxCostUsd: 1 }, (m) => warnings.push(m)).then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string },
    );
    expect(err?.code).toBe("config_invalid");
    expect(exitCodeForError(err?.code ?? "")).toBe(2);
    expect(err?.message).toMatch(/qwen2\.5-coder:14b \(openai-compatible; role build; llm\.roles\.build\)/);
    expect(err?.message).toContain('set llm.roles.build.prices["qwen2.5-coder:14b"]');
    expect(err?.message).toContain("so the task's USD budget (--budget-usd) cannot bind");
    expect(warnings).toEqual([]);
  });

  it("without a USD budget it warns that the calls count as $0; a price of 0 set on purpose passes silently", async () => {
    const warnings: string[] = [];
    await checkBudgetPrices(local(), {}, (m) => warnings.push(m));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/qwen2\.5-coder:14b \(role build\): its calls count as \$0/);
    const free = local({ "qwen2.5-coder:14b": { inputPerMTok: 0, outputPerMTok: 0 } });
    await expect(checkBudgetPrices(free, { maxCostUsd: 1 }, (m) => warnings.push(m))).resolves.toBeUndefined();
    expect(warnings).toHaveLength(1);
  });

  it("an improvement run's budget covers the improve role, which a task's does not", async () => {
    const improveOnLocal = Config.parse({
      llm: {
        provider: "anthropic",
        roles: {
          improve: { provider: "openai-compatible", model: "qwen2.5-coder:14b", baseUrl: "http://127.0.0.1:9/v1" },
        },
      },
    });
    const warnings: string[] = [];
    await expect(
      checkBudgetPrices(improveOnLocal, { maxCostUsd: 1 }, (m) => warnings.push(m)),
    ).resolves.toBeUndefined();
    const err = await checkBudgetPrices(improveOnLocal, { maxCostUsd: 1 }, (m) => warnings.push(m), "generation").then(
      () => undefined,
      (e: unknown) => e as { code?: string; message: string },
    );
    expect(err?.code).toBe("config_invalid");
    expect(err?.message).toContain("role improve");
    expect(err?.message).toContain("so the improvement run's USD budget (--budget-usd) cannot bind");
    expect(warnings).toEqual([]);
  });
});
