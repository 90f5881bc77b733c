/**
 * `.env.example` against what reads the environment: every variable the configuration loader
 * maps (`ENV_KEYS`) and every provider credential it falls back to is there, and every
 * variable it names is real: one of those, or one the root's Markdown files or docs/ document. Each has a
 * comment line above it.
 */
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ENV_KEYS } from "@loopsmith/shared/runtime";
import { REPO } from "./fixtures/cli.js";

const lines = readFileSync(join(REPO, ".env.example"), "utf8").split("\n");
/** The variables the file names, each as a commented-out assignment (`# NAME=value`), in order. */
const named = lines.flatMap((l) => /^# ([A-Z][A-Z0-9_]*)=/.exec(l)?.[1] ?? []);
const docs = [...readdirSync(REPO), ...readdirSync(join(REPO, "docs")).map((f) => `docs/${f}`)]
  .filter((f) => f.endsWith(".md"))
  .map((f) => readFileSync(join(REPO, f), "utf8"))
  .join("\n");
/** The provider credentials `withProviderCredentials` reads when no LOOPSMITH_ key is set. */
const CREDENTIALS = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"];

describe(".env.example", () => {
  it("names every variable the configuration loader reads, each once", () => {
    const loader = [...ENV_KEYS.map(([name]) => name), ...CREDENTIALS];
    expect(loader.filter((n) => !named.includes(n))).toEqual([]);
    expect(named.filter((n, i) => named.indexOf(n) !== i)).toEqual([]);
  });

  it("names only real variables: the loader's, or ones the docs document (patterns such as <ROLE> count)", () => {
    const loader = new Set([...ENV_KEYS.map(([name]) => name), ...CREDENTIALS]);
    const patterns = [...docs.matchAll(/`([A-Z][A-Z0-9_]*<[A-Z]+>[A-Z0-9_]*)`/g)].map(
      (m) => new RegExp(`^${(m[1] as string).replace(/<[A-Z]+>/g, "[A-Z0-9]+")}$`),
    );
    const unknown = named.filter(
      (n) => !loader.has(n) && !new RegExp(`\\b${n}\\b`).test(docs) && !patterns.some((p) => p.test(n)),
    );
    expect(unknown).toEqual([]);
    expect(named.length).toBeGreaterThan(100);
  });

  it("says what each variable does in a comment above it", () => {
    const bare = lines.flatMap((l, i) => {
      const name = /^# ([A-Z][A-Z0-9_]*)=/.exec(l)?.[1];
      if (!name) return [];
      // The nearest line above that is not another assignment must be a comment.
      let j = i - 1;
      while (j >= 0 && /^# [A-Z][A-Z0-9_]*=/.test(lines[j] as string)) j--;
      return j >= 0 && /^# \S/.test(lines[j] as string) ? [] : [name];
    });
    expect(bare).toEqual([]);
  });
});
