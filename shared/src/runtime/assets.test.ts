import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { assetPath, installRoot } from "./assets.js";

describe("installRoot and assetPath", () => {
  it("find the repository root (the package.json named loopsmith, not a workspace's) and the shipped files under it", () => {
    const root = installRoot();
    expect((JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { name: string }).name).toBe("loopsmith");
    expect(existsSync(join(root, "shared", "package.json"))).toBe(true);
    expect(existsSync(assetPath("shared", "prompts", "plan.v1.md"))).toBe(true);
    expect(existsSync(assetPath("services", "memory", "migrations"))).toBe(true);
    expect(existsSync(assetPath("deploy", "seccomp", "sandbox.json"))).toBe(true);
  });
});
