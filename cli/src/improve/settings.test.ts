import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LoopsmithError, loadConfig } from "@loopsmith/shared/runtime";
import { QUALITY_METRICS } from "@loopsmith/shared/contracts";
import {
  QUALITY_GOAL,
  holdoutPatterns,
  improveBase,
  improveSettings,
  improveSetup,
  repoImproveSection,
} from "./settings.js";

/** A configuration whose file holds `improve`, read from a temporary file. */
function configWith(improve: Record<string, unknown>) {
  const dir = mkdtempSync(join(tmpdir(), "loopsmith-improve-settings-"));
  const file = join(dir, "config.json");
  writeFileSync(file, JSON.stringify({ improve }));
  return loadConfig({ file, env: {} });
}

describe("improve settings", () => {
  it("takes flags over the config file over the repository's loopsmith.json", () => {
    const config = configWith({ bench: "from-config", repeats: 2, alpha: 0.01 });
    const settings = improveSettings({ repeats: 5 }, config, { bench: "from-repo", goal: "repo goal", repeats: 9 });
    expect(settings.bench).toBe("from-config");
    expect(settings.repeats).toBe(5);
    expect(settings.alpha).toBe(0.01);
    expect(settings.goal).toBe("repo goal");
  });

  it("judges the repository's quality metrics when no benchmark is set anywhere", () => {
    const settings = improveSettings({}, loadConfig({ env: {} }), undefined);
    expect(settings.bench).toBeUndefined();
    expect(settings.goal).toBe(QUALITY_GOAL);
    expect(settings.benchmarks.enabled).toEqual([...QUALITY_METRICS]);
    expect(settings.benchmarks).toMatchObject({ timeouts: {}, weights: {}, tolerances: {} });
  });

  it("reads improve.benchmarks from the repository's loopsmith.json, and rejects an unknown metric", () => {
    const settings = improveSettings({}, loadConfig({ env: {} }), {
      benchmarks: { enabled: ["lint", "tests"], timeouts: { tests: 60 }, weights: { lint: 3 } },
    });
    expect(settings.benchmarks).toEqual({
      enabled: ["lint", "tests"],
      timeouts: { tests: 60 },
      weights: { lint: 3 },
      tolerances: {},
    });
    const run = () => improveSettings({}, loadConfig({ env: {} }), { benchmarks: { enabled: ["speed"] } });
    expect(run).toThrow(LoopsmithError);
    expect(run).toThrow(/benchmarks\.enabled/);
  });

  it("names an invalid setting", () => {
    expect(() => improveSettings({ bench: "b", alpha: 2 }, loadConfig({ env: {} }), undefined)).toThrow(/alpha/);
  });

  it("runs one generation on a dry run", () => {
    expect(
      improveSettings({ bench: "b", generations: 4, dryRun: true }, loadConfig({ env: {} }), undefined).generations,
    ).toBe(1);
  });

  it("starts from --base, else the config file's base, else HEAD", () => {
    const config = configWith({ bench: "b", base: "abc123" });
    expect(improveBase({ base: "v1.0" }, config)).toBe("v1.0");
    expect(improveBase({}, config)).toBe("abc123");
    expect(improveBase({}, configWith({ bench: "b", base: "" }))).toBeUndefined();
    expect(improveBase({}, loadConfig({ env: {} }))).toBeUndefined();
  });

  it("takes the setup command from the flag, the config file, then the repository", () => {
    const config = configWith({ bench: "b" });
    expect(improveSetup({ setupCmd: "" }, config, { setupCommand: "npm ci" })).toBe("");
    expect(improveSetup({}, config, { setupCommand: "npm ci" })).toBe("npm ci");
    expect(improveSetup({}, configWith({ setupCommand: "make deps" }), { setupCommand: "npm ci" })).toBe("make deps");
    expect(improveSetup({}, config, undefined)).toBeUndefined();
  });

  it("reads the repository's improve section and says which file is broken", () => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-improve-repo-"));
    expect(repoImproveSection(dir)).toBeUndefined();
    writeFileSync(join(dir, "loopsmith.json"), JSON.stringify({ improve: { bench: "x" } }));
    expect(repoImproveSection(dir)).toEqual({ bench: "x" });
    writeFileSync(join(dir, "loopsmith.json"), "{ not json");
    expect(() => repoImproveSection(dir)).toThrow(/loopsmith\.json/);
    // A typo or a bad value in the section is an error, not a setting dropped.
    writeFileSync(join(dir, "loopsmith.json"), JSON.stringify({ improve: { bnech: "x" } }));
    expect(() => repoImproveSection(dir)).toThrow(/unknown key improve\.bnech; did you mean improve\.bench\?/);
    writeFileSync(join(dir, "loopsmith.json"), JSON.stringify({ improve: { generations: 0 } }));
    expect(() => repoImproveSection(dir)).toThrow(/improve\.generations: /);
  });
});

describe("--holdout", () => {
  it("reads a file as case ids and passes anything else on as a glob", () => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-holdout-"));
    writeFileSync(join(dir, "held.txt"), "# never shown\ncase-7\n\n  case-9  \n");
    expect(holdoutPatterns(["held.txt", "hard/*"], dir)).toEqual(["case-7", "case-9", "hard/*"]);
    writeFileSync(join(dir, "empty.txt"), "# nothing\n");
    expect(() => holdoutPatterns(["empty.txt"], dir)).toThrow(LoopsmithError);
  });

  it("reaches the settings with the other run-level flags", () => {
    const s = improveSettings(
      {
        bench: "b",
        holdout: ["x*"],
        confirmationFraction: 0.2,
        calibrationRuns: 5,
        alphaSpending: "basel",
        splitSeed: 9,
      },
      configWith({}),
      undefined,
    );
    expect(s).toMatchObject({
      holdout: ["x*"],
      confirmationFraction: 0.2,
      calibrationRuns: 5,
      alphaSpending: "basel",
      splitSeed: 9,
    });
    const d = improveSettings({ bench: "b" }, configWith({}), undefined);
    expect(d).toMatchObject({ holdout: [], confirmationFraction: 0.3, calibrationRuns: 3, alphaSpending: "harmonic" });
  });
});
