import { configDefaults, defineConfig } from "vitest/config";

// Two projects: unit tests beside the code, integration tests under tests/ against real
// NATS, PostgreSQL + pgvector and Docker (started with testcontainers; never skipped).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: [
            "shared/src/**/*.test.ts",
            "services/*/src/**/*.test.ts",
            "evals/src/**/*.test.ts",
            "cli/src/**/*.test.ts",
          ],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: "integration",
          include: ["tests/**/*.test.ts"],
          // tests/live calls a real model (`npm run test:live`); never part of `npm test`.
          // tests/fixtures holds other projects' tests, run by those projects' own runners.
          exclude: [...configDefaults.exclude, "tests/live/**", "tests/fixtures/**"],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          // One file at a time: the machine has 2 cores and every file starts containers.
          fileParallelism: false,
          env: { TESTCONTAINERS_RYUK_DISABLED: "true" },
        },
      },
    ],
  },
});
