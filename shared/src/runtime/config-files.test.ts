/**
 * Configuration found by convention: each layer wins over the next (flags > environment >
 * `--config` > the repository's file > the user's file > defaults), the source of each value,
 * and a bad file named with the field or the line and column.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfigWithSources } from "./config.js";
import { describeSource, findConfigFiles } from "./config-layers.js";

/** A git repository (a `.git` directory is all discovery looks for) and a config home, both empty. */
function place(): { repo: string; sub: string; configHome: string } {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-config-"));
  const repo = join(root, "repo");
  const sub = join(repo, "src", "deep");
  mkdirSync(join(repo, ".git"), { recursive: true });
  mkdirSync(sub, { recursive: true });
  const configHome = join(root, "xdg");
  mkdirSync(join(configHome, "loopsmith"), { recursive: true });
  return { repo, sub, configHome };
}

const write = (file: string, json: unknown): string => {
  mkdirSync(join(file, ".."), { recursive: true });
  writeFileSync(file, typeof json === "string" ? json : JSON.stringify(json, null, 2));
  return file;
};

describe("configuration files found by convention", () => {
  it("each layer wins over the next, and each value names its source", () => {
    const { repo, sub, configHome } = place();
    const user = write(join(configHome, "loopsmith", "config.json"), {
      llm: { model: "user-model", maxRetries: 5, timeoutMs: 1000 },
      executor: { concurrency: 3, cpus: 2 },
      conductor: { concurrency: 7 },
    });
    const repoFile = write(join(repo, ".loopsmith", "config.json"), {
      llm: { model: "repo-model", maxRetries: 4 },
      executor: { concurrency: 5 },
    });
    const explicit = write(join(repo, "..", "explicit.json"), { llm: { model: "explicit-model" } });
    const env = { XDG_CONFIG_HOME: configHome, LOOPSMITH_EXECUTOR_CONCURRENCY: "6", LOOPSMITH_MODEL: "env-model" };
    const load = (over: { file?: string; flags?: Record<string, unknown>; env?: NodeJS.ProcessEnv } = {}) =>
      loadConfigWithSources({ ...over, cwd: sub, env: over.env ?? env });

    // Everything: flags > env > --config > repo > user > default.
    const all = load({ file: explicit, flags: { llm: { model: "flag-model" } } });
    expect(all.config.llm.model).toBe("flag-model");
    expect(all.config.executor.concurrency).toBe(6);
    expect(all.config.llm.maxRetries).toBe(4);
    expect(all.config.llm.timeoutMs).toBe(1000);
    expect(all.config.executor.warmPoolSize).toBe(2);
    expect(all.files).toEqual([
      { layer: "user", path: user },
      { layer: "repo", path: repoFile },
      { layer: "explicit", path: explicit },
    ]);
    const says = (path: string, loaded = all) => describeSource(loaded.sources[path] ?? { kind: "default" });
    expect(says("llm.model")).toBe("flag");
    expect(says("executor.concurrency")).toBe("env LOOPSMITH_EXECUTOR_CONCURRENCY");
    expect(says("llm.maxRetries")).toBe(`repo file ${repoFile}`);
    expect(says("llm.timeoutMs")).toBe(`user file ${user}`);
    expect(says("executor.warmPoolSize")).toBe("default");
    // Every leaf of the configuration has a source.
    expect(Object.keys(all.sources)).toContain("memory.efSearch");

    // Peel the layers off one by one: each time the next one down shows through.
    expect(says("llm.model", load({ file: explicit }))).toBe("env LOOPSMITH_MODEL");
    const noEnv = { XDG_CONFIG_HOME: configHome };
    expect(load({ file: explicit, env: noEnv }).config.llm.model).toBe("explicit-model");
    expect(says("llm.model", load({ file: explicit, env: noEnv }))).toBe(`config file ${explicit}`);
    expect(load({ env: noEnv }).config.llm.model).toBe("repo-model");
    expect(load({ env: noEnv }).config.executor.concurrency).toBe(5);
    // LOOPSMITH_CONFIG is the same layer as --config.
    expect(load({ env: { ...noEnv, LOOPSMITH_CONFIG: explicit } }).config.llm.model).toBe("explicit-model");
    // Outside the repository only the user's file is read.
    const outside = loadConfigWithSources({ cwd: configHome, env: noEnv });
    expect(outside.config.llm.model).toBe("user-model");
    expect(outside.config.conductor.concurrency).toBe(7);
    // An empty config home: the defaults.
    const bare = loadConfigWithSources({ cwd: configHome, env: { XDG_CONFIG_HOME: join(configHome, "none") } });
    expect(bare.config.llm.model).toBe("claude-sonnet-4-6");
    expect(bare.files).toEqual([]);
    // Discovery off: neither file.
    expect(loadConfigWithSources({ cwd: sub, env: noEnv, discover: false }).config.llm.model).toBe("claude-sonnet-4-6");
  });

  it("reads loopsmith.json at the root with the same schema, and refuses both files at once", () => {
    const { repo, configHome } = place();
    const legacy = write(join(repo, "loopsmith.json"), {
      improve: { bench: "npm test" },
      llm: { model: "json-model" },
    });
    const env = { XDG_CONFIG_HOME: configHome };
    const loaded = loadConfigWithSources({ cwd: repo, env });
    expect(loaded.config.llm.model).toBe("json-model");
    expect(loaded.config.improve).toEqual({ bench: "npm test" });
    expect(findConfigFiles({ cwd: repo, env })).toEqual({ repo: legacy });
    write(join(repo, ".loopsmith", "config.json"), {});
    expect(() => loadConfigWithSources({ cwd: repo, env })).toThrow(/two configuration files.*keep one/);
  });

  it("the provider's own key names its variable as the source", () => {
    const { repo, configHome } = place();
    const loaded = loadConfigWithSources({
      cwd: repo,
      env: { XDG_CONFIG_HOME: configHome, ANTHROPIC_API_KEY: "sk-ant-x" },
    });
    expect(describeSource(loaded.sources["llm.apiKey"] ?? { kind: "default" })).toBe("env ANTHROPIC_API_KEY");
  });

  it("a bad file is an error naming the file and the field, or the line and column", () => {
    const { repo, configHome } = place();
    const env = { XDG_CONFIG_HOME: configHome };
    const file = write(join(repo, ".loopsmith", "config.json"), { llm: { maxRetries: 99 } });
    expect(() => loadConfigWithSources({ cwd: repo, env })).toThrow(
      new RegExp(`invalid configuration in ${file}: llm\\.maxRetries: .*repo file`),
    );
    // The same bad value from the environment names the variable instead.
    write(file, {});
    expect(() => loadConfigWithSources({ cwd: repo, env: { ...env, LOOPSMITH_LLM_MAX_RETRIES: "99" } })).toThrow(
      /llm\.maxRetries: .*env LOOPSMITH_LLM_MAX_RETRIES/,
    );
    write(file, '{\n  "llm": {\n    "model": "x",\n  }\n}\n');
    expect(() => loadConfigWithSources({ cwd: repo, env })).toThrow(
      new RegExp(`${file} is not valid JSON \\(line 4, column 3\\)`),
    );
    write(file, "[1]");
    expect(() => loadConfigWithSources({ cwd: repo, env })).toThrow(/must hold a JSON object/);
    const user = write(join(configHome, "loopsmith", "config.json"), { executor: { concurrency: "two" } });
    write(file, {});
    expect(() => loadConfigWithSources({ cwd: repo, env })).toThrow(new RegExp(`in ${user}: executor\\.concurrency`));
  });
});
