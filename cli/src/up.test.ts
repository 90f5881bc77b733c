import { describe, expect, it } from "vitest";
import { progressText } from "./up.js";

describe("progressText", () => {
  const want = ["memory", "executor", "builder", "reviewer", "architect"] as const;
  it("names the phase and the services still awaited", () => {
    expect(progressText({ phase: "nats", answered: [], want: [...want] })).toBe("starting NATS");
    expect(progressText({ phase: "services", answered: ["builder", "reviewer"], want: [...want] })).toBe(
      "services answering 2/5 (waiting for memory, executor, architect)",
    );
    expect(progressText({ phase: "services", answered: [...want], want: [...want] })).toBe("services answering 5/5");
    expect(progressText({ phase: "ready", answered: [...want], want: [...want] })).toBe("ready");
  });
});
