// loopsmith sandbox: the ESLint configuration of the JavaScript/TypeScript quality metrics that
// loopsmith measures itself, whatever the repository has (improve without --bench; the measuring
// script, services/architect/src/improve/measure-node.ts, runs
// `eslint --config /opt/loopsmith/metrics/eslint.config.mjs --no-inline-config .` once and splits
// the findings by rule):
// - complexity: ESLint's own `complexity` rule (classic cyclomatic complexity) at a maximum of 0,
//   so every function reports its complexity;
// - security: eslint-plugin-security's recommended rules, without detect-object-injection (it
//   flags every `variable[key]`, array indexing included, so nearly all of its findings are
//   noise and "fixing" them means rewriting ordinary code);
// - lint, when the repository has no eslint of its own: ESLint's and typescript-eslint's
//   recommended rules (the latter on TypeScript files only).
// Inline `eslint-disable` comments have no effect (--no-inline-config): a finding cannot be
// hidden by a comment. Parsing is static: no file of the repository is run or imported.
import js from "@eslint/js";
import security from "eslint-plugin-security";
import globals from "globals";
import tseslint from "typescript-eslint";

const TS = ["**/*.ts", "**/*.mts", "**/*.cts", "**/*.tsx"];
const TESTS = ["**/*.{test,spec}.*", "**/__tests__/**", "**/test/**", "**/tests/**"];

export default [
  {
    ignores: ["**/node_modules/", "**/dist/", "**/build/", "**/coverage/", "**/out/", "**/.*/", "**/*.d.ts"],
  },
  {
    files: ["**/*.{js,mjs,cjs,jsx}"],
    languageOptions: { parserOptions: { ecmaFeatures: { jsx: true } } },
  },
  { files: ["**/*.cjs"], languageOptions: { sourceType: "commonjs" } },
  js.configs.recommended,
  ...tseslint.configs.recommended.map((c) => ({ ...c, files: TS })),
  { files: ["**/*.tsx"], languageOptions: { parserOptions: { ecmaFeatures: { jsx: true } } } },
  {
    files: ["**/*.{js,mjs,cjs,jsx,ts,mts,cts,tsx}"],
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
    plugins: { security },
    rules: {
      ...security.configs.recommended.rules,
      "security/detect-object-injection": "off",
      complexity: ["warn", { max: 0, variant: "classic" }],
    },
  },
  {
    files: TESTS,
    languageOptions: { globals: { ...globals.jest, ...globals.vitest, ...globals.mocha } },
  },
];
