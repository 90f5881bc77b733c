// Import rules checked by `npm run lint` (issue 33, "What must hold"): no import cycle, no
// arrow from a lower package to a higher one, and no service importing another service.
//
// Layers, highest first (docs/ARCHITECTURE.md, "Who imports whom"):
//   bench ─▶ cli ─▶ evals ─▶ services/<name> ─▶ shared
// tests/ may import anything. deploy/ may import shared and the build stamp the CLI reads
// back (cli/bin/build-stamp.js: the app build writes the stamp that file defines). The CLI
// and bench may import service packages as libraries (ARCHITECTURE §1); a service may not.
// evals/ (datasets, the oracle, SWE-bench grading) may import shared/ and services as
// libraries (the executor's code grades), never the CLI: the CLI runs evals against a stack.
//
// Workspace packages are imported by name (`@loopsmith/shared/contracts`, `@loopsmith/executor`, …).
// npm links them under node_modules/@loopsmith/; the resolver follows the link to the real
// path (symlinks are not preserved) and reads the package's `exports`, so a rule sees
// `shared/src/contracts/index.ts`, not `node_modules/…`.
/** @type {import("dependency-cruiser").IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: "no-cycle",
      comment: "An import cycle (type-only imports count: they tie the modules' shapes together all the same).",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "shared-imports-nothing-above",
      comment: "shared/ is the lowest layer: it imports no service, evals, the CLI, bench, deploy or tests.",
      severity: "error",
      from: { path: "^shared/" },
      to: { path: "^(services|evals|cli|bench|deploy|tests)/" },
    },
    {
      name: "service-imports-no-other-service",
      comment: "Services meet only through shared/ contracts on the bus (ARCHITECTURE §1).",
      severity: "error",
      from: { path: "^services/([^/]+)/" },
      to: { path: "^services/", pathNot: "^services/$1/" },
    },
    {
      name: "service-imports-nothing-above",
      comment: "A service imports shared/ and its own files, never evals, the CLI, bench, deploy or tests.",
      severity: "error",
      from: { path: "^services/" },
      to: { path: "^(evals|cli|bench|deploy|tests)/" },
    },
    {
      name: "evals-imports-nothing-above",
      comment: "evals/ may import services as libraries and shared/, not the CLI, bench, deploy or tests.",
      severity: "error",
      from: { path: "^evals/" },
      to: { path: "^(cli|bench|deploy|tests)/" },
    },
    {
      name: "cli-imports-nothing-above",
      comment: "The CLI may import evals, services as libraries and shared/, not bench, deploy or tests.",
      severity: "error",
      from: { path: "^cli/" },
      to: { path: "^(bench|deploy|tests)/" },
    },
    {
      name: "deploy-imports-shared-only",
      comment: "deploy/ scripts may import shared/ and the CLI's build stamp (see the header).",
      severity: "error",
      from: { path: "^deploy/" },
      to: { path: "^(services|evals|cli|bench)/", pathNot: "^cli/bin/build-stamp\\.js$" },
    },
    {
      name: "not-to-unresolvable",
      comment: "An import that resolves to nothing (a typo, or a package no package.json declares).",
      severity: "error",
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    // tests/fixtures/destr is another project (its imports are its own dependencies); the
    // sandbox image's metrics tools import packages installed only in the image.
    exclude: {
      path: "^(node_modules|dist|coverage|tests/fixtures/destr|deploy/rootfs/sandbox-node/metrics)/|\\.d\\.ts$",
    },
    // Count `import type` too: a type-only import from a higher layer is still an upward arrow.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      mainFields: ["module", "main", "types", "typings"],
      extensions: [".ts", ".js", ".mjs", ".cjs", ".json", ".d.ts"],
    },
    // Dynamic `import("…")` calls are followed like static ones.
    moduleSystems: ["es6", "cjs"],
    cache: false,
  },
};
