import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { unifiedPatch } from "@loopsmith/shared/workspace";
import { protectedGlobs, validateChange, type ChangeUnderReview } from "./guards.js";
import { judgingCode, summarizeJudgingCode, type SourceTree } from "./judging-code.js";

/** A tree in memory: path → text. */
function memTree(files: Record<string, string>): SourceTree {
  return { files: Object.keys(files).sort(), read: (p) => files[p] };
}

/** A small loopsmith: workspaces, a shared package with a barrel and a subpath export, a decision, an unrelated service. */
const BASE: Record<string, string> = {
  "package.json": JSON.stringify({ name: "loopsmith", workspaces: ["shared", "services/*"] }),
  "tsconfig.json": "{}",
  "shared/package.json": JSON.stringify({
    name: "@loopsmith/shared",
    exports: { ".": "./src/index.ts", "./contracts": { types: "./src/contracts/index.ts" } },
  }),
  "shared/src/index.ts": 'export * from "./contracts/index.js";\nexport { log } from "./log.js";\n',
  "shared/src/log.ts": "export const log = () => {};\n",
  "shared/src/contracts/index.ts": 'export { Report } from "./report.js";\n',
  "shared/src/contracts/report.ts": "export const Report = {};\n",
  "shared/src/contracts/report.test.ts": 'import { Report } from "./report.js";\n',
  "services/architect/package.json": JSON.stringify({
    name: "@loopsmith/architect",
    exports: { ".": "./src/index.ts" },
  }),
  "services/architect/src/improve/decision.ts": [
    'import type { Report } from "@loopsmith/shared/contracts";',
    "export function alphaOf(j: number, alpha: number): number {",
    "  return alpha / (j * j);",
    "}",
    "",
  ].join("\n"),
  "services/executor/package.json": JSON.stringify({ name: "@loopsmith/executor", exports: { ".": "./src/index.ts" } }),
  "services/executor/src/index.ts": 'const sandbox = await import("./sandbox/index.js");\n',
  "services/executor/src/sandbox/index.ts": 'import { log } from "@loopsmith/shared";\nexport const run = log;\n',
  "services/reviewer/src/index.ts": 'const gate = require("./gate.cjs");\n',
  "services/reviewer/src/gate.cts": "module.exports = {};\n",
  "services/memory/package.json": JSON.stringify({ name: "@loopsmith/memory" }),
  "services/memory/src/signature.ts": 'import { log } from "@loopsmith/shared";\nexport const signature = log;\n',
};

/** One file edited from its text in `base` to `after`, as loopsmith's change. */
function edit(base: Record<string, string>, path: string, after: string): ChangeUnderReview {
  return { patch: unifiedPatch((p) => base[p], [{ path, content: after }], []), changed: [path], deleted: [] };
}

describe("judgingCode", () => {
  it("follows relative, workspace, subpath, dynamic and require imports from the roots, and the configuration above them", () => {
    const code = judgingCode(memTree(BASE));
    expect(code.get("services/architect/src/improve/decision.ts")).toBe(
      "is judging code (services/architect/src/improve/**)",
    );
    expect(code.get("shared/src/contracts/index.ts")).toBe("is imported by services/architect/src/improve/decision.ts");
    expect(code.get("shared/src/contracts/report.ts")).toBe(
      "is imported by services/architect/src/improve/decision.ts (via shared/src/contracts/index.ts)",
    );
    expect(code.get("shared/src/log.ts")).toBe(
      "is imported by services/executor/src/sandbox/index.ts (via shared/src/index.ts)",
    );
    expect(code.get("services/executor/src/sandbox/index.ts")).toBe("is judging code (services/executor/src/**)");
    expect(code.has("services/reviewer/src/gate.cts")).toBe(true);
    for (const config of ["package.json", "tsconfig.json", "shared/package.json", "services/executor/package.json"])
      expect(code.get(config)).toMatch(/^configures judging code below it \(/);
    // Not imported by the judging code: the memory service, its package.json, a test beside shared code.
    for (const open of [
      "services/memory/src/signature.ts",
      "services/memory/package.json",
      "shared/src/contracts/report.test.ts",
    ])
      expect(code.has(open)).toBe(false);
  });

  it("keeps a judging function protected when it moves to a new file the decision imports", () => {
    const moved = {
      ...BASE,
      "services/architect/src/improve/decision.ts": [
        'import { alphaOf } from "../stats/alpha.js";',
        'import { spend } from "@loopsmith/shared";',
        "export const decide = (j: number) => alphaOf(j, spend);",
        "",
      ].join("\n"),
      "services/architect/src/stats/alpha.ts":
        "export function alphaOf(j: number, alpha: number): number {\n  return alpha / (j * j);\n}\n",
      "shared/src/index.ts": `${BASE["shared/src/index.ts"] ?? ""}export { spend } from "./spending/index.js";\n`,
      "shared/src/spending/index.ts": "export const spend = 0.05;\n",
    };
    const code = judgingCode(memTree(moved));
    expect(code.get("services/architect/src/stats/alpha.ts")).toBe(
      "is imported by services/architect/src/improve/decision.ts",
    );
    expect(code.get("shared/src/spending/index.ts")).toBe(
      "is imported by services/architect/src/improve/decision.ts (via shared/src/index.ts)",
    );
    // The old path globs knew neither file; the derived set rejects an edit of either.
    const loosen = edit(moved, "services/architect/src/stats/alpha.ts", "export const alphaOf = () => 1;\n");
    const globs = protectedGlobs({ self: true, extra: [], commands: [], exists: () => undefined });
    expect(validateChange(loosen, { globs, dependencies: "reject" })).toBeUndefined();
    const v = validateChange(loosen, { globs, code, dependencies: "reject" });
    expect(v?.reason).toBe("protected");
    expect(v?.message).toBe(
      "the change touches protected paths: services/architect/src/stats/alpha.ts is imported by services/architect/src/improve/decision.ts",
    );
    expect(v?.paths).toEqual(["services/architect/src/stats/alpha.ts"]);
  });

  it("fails closed when a root matches nothing in the tree", () => {
    const { ["services/reviewer/src/index.ts"]: _, ["services/reviewer/src/gate.cts"]: __, ...rest } = BASE;
    expect(() => judgingCode(memTree(rest))).toThrow(LoopsmithError);
    expect(() => judgingCode(memTree(rest))).toThrow(/services\/reviewer\/src\/\*\*/);
  });

  it("summarizes whole folders for the prompt", () => {
    const code = judgingCode(memTree(BASE));
    const lines = summarizeJudgingCode(code, Object.keys(BASE));
    expect(lines).toContain("shared/src/contracts/* (not its tests)");
    expect(lines).toContain("services/reviewer/src/*");
    expect(lines).not.toContain("services/memory/src/signature.ts");
  });
});

describe("judgingCode over this checkout", () => {
  const root = fileURLToPath(new URL("../../../../", import.meta.url));
  const files = execFileSync("git", ["ls-files"], { cwd: root, encoding: "utf8" }).split("\n").filter(Boolean);
  const read = (p: string): string | undefined => {
    try {
      return readFileSync(join(root, p), "utf8");
    } catch {
      return undefined;
    }
  };
  const code = judgingCode({ files, read });
  const globs = protectedGlobs({ self: true, extra: [], commands: [], exists: () => undefined });

  it("protects the alpha-spending rule, the runner configuration and the LLM reviewer", () => {
    expect(code.get("shared/src/contracts/alpha.ts")).toMatch(/^is imported by services\/architect\/src\/improve\//);
    expect(code.has("shared/src/workspace/runner-config.ts")).toBe(true);
    expect(code.has("services/reviewer/src/review.ts")).toBe(true);
    expect(code.has("services/executor/src/integrity.ts")).toBe(true);
  });

  it("rejects a generation that edits shared/src/contracts/alpha.ts as protected, naming its importer", () => {
    const path = "shared/src/contracts/alpha.ts";
    const text = read(path) ?? "";
    const v = validateChange(edit({ [path]: text }, path, `${text}\nexport const LOOSER = 1;\n`), {
      globs,
      code,
      dependencies: "reject",
    });
    expect(v?.reason).toBe("protected");
    expect(v?.message).toMatch(
      /^the change touches protected paths: shared\/src\/contracts\/alpha\.ts is imported by services\/architect\/src\/improve\/bench-output\.ts \(via shared\/src\/contracts\/index\.ts\)/,
    );
  });

  it("leaves the file the self-improve example's generation 1 edits open", () => {
    const script = JSON.parse(read("examples/self-improve/script.json") ?? "{}") as {
      tasks: Record<string, { build: { edits: { path: string }[] }[] }>;
    };
    const paths = [...new Set(script.tasks["gen-1"]?.build.flatMap((b) => b.edits.map((e) => e.path)) ?? [])];
    expect(paths).toContain("services/memory/src/signature.ts");
    for (const p of paths) {
      const text = read(p) ?? "";
      expect(
        validateChange(edit({ [p]: text }, p, `${text}// x\n`), { globs, code, dependencies: "reject" }),
      ).toBeUndefined();
    }
  });
});
