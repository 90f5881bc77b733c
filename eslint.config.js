// Lint: typescript-eslint with type information; floating promises are errors.
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

// The product's source, where the size limits are errors: a file of at most 400 code lines,
// a function of at most 80 (blank lines and comments not counted).
const SOURCE = ["shared/src/**/*.ts", "services/*/src/**/*.ts", "evals/src/**/*.ts", "cli/src/**/*.ts"];

// The files over a limit when it became an error (there, a warning). These lists only
// shrink: a file leaves when it is split, and none is added (split the new file or function
// instead). `npx eslint .` fails on an unlisted file over a limit; the size check among
// CONTRIBUTING.md's checks lists every file over one, to drop the entries now under.
const OVER_FILE_LIMIT = [
  "cli/src/bench/report.ts",
  "services/architect/src/dag/phases.ts",
  "services/architect/src/phases.ts",
  "services/memory/src/lessons.ts",
  "services/reviewer/src/gate/jstamper.ts",
  "services/reviewer/src/gate/pytamper.ts",
];
const OVER_FUNCTION_LIMIT = [
  "cli/src/run-view.ts",
  "services/architect/src/dag/phases.ts",
  "services/architect/src/phases.ts",
  "services/architect/src/planner.ts",
  "services/architect/src/repo/phases.ts",
  "services/memory/src/stats.ts",
];

export default tseslint.config(
  // tests/fixtures/destr is another project's code, linted by its own configuration.
  { ignores: ["node_modules/**", "dist/**", "coverage/**", "**/*.d.ts", "tests/fixtures/destr/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
      globals: globals.node,
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      // Size limits. Counted without blank lines and comments. Errors in the
      // product's source (the block below); warnings elsewhere (tests, bench, deploy): a
      // prompt to look there. Measured on 2026-11-27 (after fc491a5) over the TypeScript
      // sources outside tests: files have a median of 92 code lines, p99 309, functions a
      // median of 8, p95 43, p99 84.
      "max-lines": ["warn", { max: 400, skipBlankLines: true, skipComments: true }],
      "max-lines-per-function": ["warn", { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    files: SOURCE,
    ignores: ["**/*.test.ts"],
    rules: {
      "max-lines": ["error", { max: 400, skipBlankLines: true, skipComments: true }],
      "max-lines-per-function": ["error", { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  // The allowlists above: warnings there, until the file is split.
  { files: OVER_FILE_LIMIT, rules: { "max-lines": ["warn", { max: 400, skipBlankLines: true, skipComments: true }] } },
  {
    files: OVER_FUNCTION_LIMIT,
    rules: { "max-lines-per-function": ["warn", { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  {
    // A test file's long "functions" are its describe blocks: lists of cases, read one at a
    // time. The file limit still applies.
    files: ["**/*.test.ts", "tests/**/*.ts"],
    rules: { "max-lines-per-function": "off" },
  },
  { files: ["**/*.js", "**/*.mjs"], languageOptions: { globals: globals.node } },
  { files: ["**/*.cjs"], languageOptions: { sourceType: "commonjs", globals: globals.node } },
);
