/**
 * Strict configuration: an unknown key in a file, in `LOOPSMITH_CONFIG_JSON` or in the
 * `improve` section is an error naming its dotted path and the nearest known key; a bad
 * `improve` value fails at load, not when a run starts; `checkConfig` lists every problem.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkConfig, checkImproveSection, loadConfig, loadConfigWithSources } from "./config.js";
import { nearestKey, strictObject } from "./unknown-keys.js";
import { z } from "zod";

/** A git repository with `json` as its `loopsmith.json`, and an empty config home. */
function repoWith(json: unknown): { repo: string; file: string; env: NodeJS.ProcessEnv } {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-strict-"));
  const repo = join(root, "repo");
  mkdirSync(join(repo, ".git"), { recursive: true });
  const file = join(repo, "loopsmith.json");
  writeFileSync(file, typeof json === "string" ? json : JSON.stringify(json));
  return { repo, file, env: { XDG_CONFIG_HOME: join(root, "xdg") } };
}

describe("unknown keys in the configuration", () => {
  it("a typo is an error naming the key, the nearest known one and the file", () => {
    const { repo, file, env } = repoWith({ llm: { modle: "claude-opus-4-1" } });
    expect(() => loadConfigWithSources({ cwd: repo, env })).toThrow(
      `invalid configuration in ${file}: unknown key llm.modle; did you mean llm.model? (set by repo file ${file})`,
    );
  });

  it("an unknown section is an error too, with or without a near key", () => {
    const { repo, env } = repoWith({ executer: { concurrency: 2 } });
    expect(() => loadConfigWithSources({ cwd: repo, env })).toThrow(/unknown key executer; did you mean executor\?/);
    expect(() => loadConfig({ env: {}, discover: false, flags: { telemetry: {} } })).toThrow(
      /unknown key telemetry \(known: natsUrl, nats, databaseUrl, .*improve\)/,
    );
  });

  it("deep keys, role keys and the environment's JSON: each named by its dotted path", () => {
    const carried = JSON.stringify({ llm: { roles: { plann: { model: "m" }, build: { modle: "m" } } } });
    const thrown = (() => {
      try {
        loadConfig({ env: { LOOPSMITH_CONFIG_JSON: carried }, discover: false });
      } catch (err) {
        return (err as Error).message;
      }
      return "";
    })();
    expect(thrown).toContain("unknown key llm.roles.plann; did you mean llm.roles.plan? (set by flag)");
    expect(thrown).toContain("unknown key llm.roles.build.modle; did you mean llm.roles.build.model?");
    expect(() => loadConfig({ env: {}, discover: false, flags: { nats: { tls: { caFiel: "/ca.pem" } } } })).toThrow(
      /unknown key nats\.tls\.caFiel; did you mean nats\.tls\.caFile\?/,
    );
  });
});

describe("the improve section", () => {
  it("a bad value fails at load: generations 0, an unknown metric, an unknown setting", () => {
    const zero = repoWith({ improve: { generations: 0 } });
    expect(() => loadConfigWithSources({ cwd: zero.repo, env: zero.env })).toThrow(
      new RegExp(`in ${zero.file}: improve\\.generations: .*>=1.*repo file`),
    );
    const metric = repoWith({ improve: { benchmarks: { enabled: ["speed"], weights: { coverge: 2 } } } });
    const problems = checkConfig({ cwd: metric.repo, env: metric.env });
    expect(problems.ok).toBe(false);
    expect(problems.ok ? [] : problems.problems.map((p) => p.line)).toEqual([
      expect.stringMatching(new RegExp(`^${metric.file}: improve\\.benchmarks\\.enabled\\.0: Invalid option`)),
      `${metric.file}: unknown key improve.benchmarks.weights.coverge; did you mean improve.benchmarks.weights.coverage?`,
    ]);
    const typo = repoWith({ improve: { genrations: 2 } });
    expect(() => loadConfigWithSources({ cwd: typo.repo, env: typo.env })).toThrow(
      /unknown key improve\.genrations; did you mean improve\.generations\?/,
    );
  });

  it("keeps the section as written: no defaults added, base and setupCommand allowed", () => {
    const cfg = loadConfig({ env: {}, discover: false, flags: { improve: { generations: 2, base: "main" } } });
    expect(cfg.improve).toEqual({ generations: 2, base: "main" });
    const section = { bench: "npm run bench", setupCommand: "" };
    expect(checkImproveSection(section, "/r/loopsmith.json")).toBe(section);
    expect(() => checkImproveSection({ alpah: 0.1 }, "/r/loopsmith.json")).toThrow(
      "invalid configuration in /r/loopsmith.json: unknown key improve.alpah; did you mean improve.alpha? (set by repo file /r/loopsmith.json)",
    );
  });
});

describe("checkConfig", () => {
  it("lists every problem, one line each (file, key path, problem), and goes on past a file that is not JSON", () => {
    const { repo, file, env } = repoWith({ llm: { modle: "x", maxRetries: 99 }, improve: { generations: 0 } });
    const user = join(env.XDG_CONFIG_HOME as string, "loopsmith", "config.json");
    mkdirSync(join(user, ".."), { recursive: true });
    writeFileSync(user, '{"llm": {');
    const checked = checkConfig({ cwd: repo, env });
    expect(checked.ok).toBe(false);
    const lines = checked.ok ? [] : checked.problems.map((p) => p.line);
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(new RegExp(`^the configuration file ${user} is not valid JSON`));
    expect(lines).toContain(`${file}: unknown key llm.modle; did you mean llm.model?`);
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^${file}: llm\\.maxRetries: `)));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^${file}: improve\\.generations: `)));
    const fine = repoWith({ llm: { model: "claude-opus-4-1" } });
    const ok = checkConfig({ cwd: fine.repo, env: fine.env });
    expect(ok.ok && ok.loaded.files).toEqual([{ layer: "repo", path: fine.file }]);
  });
});

describe("nearestKey and strictObject", () => {
  it("suggests a near or contained key, and nothing for a stranger", () => {
    expect(nearestKey("modle", ["model", "provider"])).toBe("model");
    expect(nearestKey("acceptanceTests", ["goal", "files", "tests"])).toBe("tests");
    expect(nearestKey("BaseURL", ["baseUrl", "model"])).toBe("baseUrl");
    expect(nearestKey("telemetry", ["llm", "nats", "memory"])).toBeUndefined();
  });

  it("one line per unknown key, under its full path", () => {
    const schema = z.object({ outer: strictObject({ path: z.string(), content: z.string() }) });
    const r = schema.safeParse({ outer: { path: "a", content: "b", contents: "c", pth: "d" } });
    expect(r.error?.issues[0]?.message.split("\n")).toEqual([
      "unknown key outer.contents; did you mean outer.content?",
      "unknown key outer.pth; did you mean outer.path?",
    ]);
  });
});
