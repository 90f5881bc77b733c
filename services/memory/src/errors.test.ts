import { describe, expect, it } from "vitest";
import { LoopsmithError } from "@loopsmith/shared/runtime";
import { toDbError, withDb } from "./errors.js";

const pgError = (code: string, message = "boom"): Error => Object.assign(new Error(message), { code });

describe("toDbError", () => {
  it("makes a retryable db_error whose sentence names what memory was doing", () => {
    const err = toDbError("store the failure", pgError("53100", "could not extend file"));
    expect(err).toBeInstanceOf(LoopsmithError);
    expect(err.code).toBe("db_error");
    expect(err.retryable).toBe(true);
    expect(err.message).toMatch(/^memory could not store the failure: the database's disk is full/);
    expect((err.cause as Error).message).toBe("could not extend file");
  });

  it("tells an unreachable database by its error code", () => {
    for (const code of ["ECONNREFUSED", "08006", "57P01"]) {
      expect(toDbError("recall", pgError(code)).message).toContain("unreachable");
    }
    expect(toDbError("recall", pgError("42P01", 'relation "x" does not exist')).message).toContain("42P01");
    expect(toDbError("recall", "weird").message).toContain("weird");
  });

  it("passes a LoopsmithError through and wraps failures of withDb", async () => {
    const nf = new LoopsmithError("not_found", "no such failure");
    expect(toDbError("x", nf)).toBe(nf);
    await expect(withDb("count", () => Promise.reject(pgError("ECONNRESET")))).rejects.toMatchObject({
      code: "db_error",
    });
    await expect(withDb("count", () => Promise.resolve(3))).resolves.toBe(3);
  });
});
