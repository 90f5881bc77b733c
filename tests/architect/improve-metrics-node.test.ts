/**
 * The JavaScript/TypeScript measuring script in the real sandbox (the executor on the Docker
 * engine, the sandbox-node image): loopsmith's own ESLint, installed in the image under
 * /opt/loopsmith/metrics, gives complexity (ESLint's complexity rule, mean per function of the
 * non-test files), security (eslint-plugin-security's findings in the non-test files) and, for a
 * repository with no eslint of its own, lint (the recommended rules). The tree's figures are
 * known by hand: each function's cyclomatic complexity, each finding. Inline `eslint-disable`
 * comments have no effect, and test files count for lint only. Also: `localhost` resolves in a
 * sandbox run (vite, and so vitest, looks it up as it starts; the run's /etc/hosts is empty).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { QualityBenchmarks, type FileChange } from "@loopsmith/shared/contracts";
import { createExecutor } from "@loopsmith/executor";
import { measureCommand, readMeasurement } from "../../services/architect/src/improve/metrics.js";
import { docker, log, request, testConfig } from "../executor/helpers.js";

const TOOLS_LOCK = join(
  import.meta.dirname,
  "..",
  "..",
  "deploy",
  "rootfs",
  "sandbox-node",
  "metrics",
  "package-lock.json",
);

/** The version the metrics tools' lock file pins for a package. */
function pinned(name: string): string {
  const lock = JSON.parse(readFileSync(TOOLS_LOCK, "utf8")) as { packages: Record<string, { version: string }> };
  return lock.packages[`node_modules/${name}`]?.version ?? "";
}

const FILES: FileChange[] = [
  { path: "package.json", content: JSON.stringify({ name: "calc", type: "module" }) },
  {
    path: "src/calc.ts",
    content: [
      // complexity 1 + if + && + for + if + ?? = 6; eval of a variable, the comment notwithstanding
      "export function pick(x: number, y?: string): number {",
      "  // eslint-disable-next-line security/detect-eval-with-expression",
      "  if (x > 1 && y) return eval(y);",
      "  for (let i = 0; i < x; i++) {",
      "    if (i % 2) x--;",
      "  }",
      "  return x ?? 0;",
      "}",
      // complexity 2 (optional chaining); an explicit any
      "export const get = (a: any) => a?.b;",
      // an unused variable
      "const unused = 3;",
      // complexity 1
      "export class Box {",
      "  size() {",
      "    return 1;",
      "  }",
      "}",
      "",
    ].join("\n"),
  },
  {
    path: "src/read.cjs",
    // complexity 1; a file read with a name it is given; an undefined name
    content:
      'const fs = require("node:fs");\nmodule.exports = function read(p) {\n  return fs.readFileSync(p) + missing;\n};\n',
  },
  // does not parse: a lint finding, no function
  { path: "src/broken.ts", content: "export const = ;\n" },
  {
    path: "test/calc.test.ts",
    // a test file (the test runners' globals known): its eval and its function count for
    // neither complexity nor security, its unused variable for lint
    content:
      'export function t(s: string) {\n  if (s) return eval(s);\n  return 0;\n}\nconst spare = 1;\nit("works", () => expect(t("1")).toBe(1));\n',
  },
];

describe("the JavaScript/TypeScript metrics of loopsmith's ESLint, in the sandbox", () => {
  it("measures complexity, security and the default lint of a known tree, and localhost resolves", async () => {
    const ex = createExecutor({ docker, config: testConfig({ warmPoolSize: 0 }), log, kinds: ["node"] });
    await ex.start();
    try {
      const b = QualityBenchmarks.parse({ enabled: ["lint", "complexity", "security"] });
      const { file, shell, timeoutMs } = measureCommand("typescript", b);
      const result = await ex.run(
        request("typescript", [...FILES, file], { command: ["sh", "-c", shell], timeoutMs, memoryMb: 1024 }),
      );
      const m = readMeasurement(result, b.enabled);
      expect(m.complexity, result.stderr).toEqual({
        status: "ok",
        tool: `eslint ${pinned("eslint")}`,
        value: (6 + 2 + 1 + 1) / 4,
      });
      expect(m.security).toEqual({
        status: "ok",
        tool: `eslint-plugin-security ${pinned("eslint-plugin-security")}`,
        value: 2,
        cases: {
          "src/calc.ts:security/detect-eval-with-expression:eval with argument of type Identifier#1": false,
          'src/read.cjs:security/detect-non-literal-fs-filename:Found readFileSync from package "node:fs" with non literal argument at index 0#1': false,
        },
      });
      expect(m.lint).toEqual({
        status: "ok",
        tool: `eslint recommended ${pinned("eslint")}`,
        value: 5,
        cases: {
          "src/broken.ts:parse:Parsing error: Variable declaration expected.#1": false,
          "src/calc.ts:@typescript-eslint/no-explicit-any:Unexpected any. Specify a different type.#1": false,
          "src/calc.ts:@typescript-eslint/no-unused-vars:'unused' is assigned a value but never used.#1": false,
          "src/read.cjs:no-undef:'missing' is not defined.#1": false,
          "test/calc.test.ts:@typescript-eslint/no-unused-vars:'spare' is assigned a value but never used.#1": false,
        },
      });

      const lookup = await ex.run(
        request("javascript", [], {
          command: [
            "node",
            "-e",
            "require('node:dns').lookup('localhost', (e, a) => { console.log(e ? e.code : a); process.exit(e ? 1 : 0); })",
          ],
        }),
      );
      expect(lookup.stdout.trim(), lookup.stderr).toMatch(/^(127\.0\.0\.1|::1)$/);
    } finally {
      await ex.stop();
    }
  });
});
