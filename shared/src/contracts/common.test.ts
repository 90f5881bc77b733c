import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { IdempotencyKey, TaskId, idempotencyKey } from "./common.js";
import { ExecutionRequest } from "./execution.js";

const taskId = fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/);
const step = fc.stringMatching(/^[a-z][a-z_]{0,20}$/);

describe("idempotencyKey", () => {
  it("builds keys the contract accepts, for every task id, iteration, step and attempt", () => {
    fc.assert(
      fc.property(taskId, fc.nat(10_000), step, fc.nat(50), (t, iteration, s, attempt) => {
        const key = idempotencyKey(t, iteration, s, attempt);
        expect(IdempotencyKey.safeParse(key).success).toBe(true);
        const request = ExecutionRequest.safeParse({
          v: 1,
          taskId: t,
          iteration,
          idempotencyKey: key,
          language: "python",
          files: [{ path: "a.py", content: "" }],
        });
        expect(request.success).toBe(true);
      }),
    );
  });

  it("gives a retried attempt its own key, and the first attempt the plain one", () => {
    expect(idempotencyKey("t1", 2, "execute")).toBe("t1/2/execute");
    expect(idempotencyKey("t1", 2, "execute", 1)).toBe("t1/2/execute.1");
    expect(idempotencyKey("t1", 2, "execute", 1)).not.toBe(idempotencyKey("t1", 2, "execute", 2));
  });

  it("refuses parts that cannot form a key, naming them", () => {
    expect(() => idempotencyKey("t 1", 1, "execute")).toThrow(/task "t 1"/);
    expect(() => idempotencyKey("t1", 1, "Execute")).toThrow(/step "Execute"/);
    expect(() => idempotencyKey("t1", 1, "execute", -1)).toThrow(/attempt -1/);
    expect(TaskId.safeParse("x".repeat(65)).success).toBe(false);
  });

  it("the contract refuses keys the builder never makes", () => {
    for (const bad of [
      "t1/1/execute_retry1x/",
      "t1/1/",
      "t1/x/execute",
      "t1/1/execute.0",
      "t1/1/execute.-1",
      "../1/execute",
    ]) {
      expect(IdempotencyKey.safeParse(bad).success, bad).toBe(false);
    }
  });
});
