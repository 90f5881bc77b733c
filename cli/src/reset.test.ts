import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { exitCodeForError } from "./exit-codes.js";
import { confirmReset, removedText, resetCommand, resetTargets, targetsText } from "./reset.js";

const both = { memory: true, history: true };
const where = "/home/u/.local/share/loopsmith/memory";

/** A confirmation that records the questions asked and answers `answer`. */
function asking(terminal: boolean, answer = "") {
  const questions: string[] = [];
  return {
    questions,
    how: { terminal, ask: async (q: string) => (questions.push(q), answer) },
  };
}

describe("reset's flags", () => {
  it("--memory, --history, both, or neither (which means both)", () => {
    expect(resetTargets({})).toEqual(both);
    expect(resetTargets({ memory: true })).toEqual({ memory: true, history: false });
    expect(resetTargets({ history: true })).toEqual({ memory: false, history: true });
    expect(resetTargets({ memory: true, history: true })).toEqual(both);
    expect(targetsText({ memory: true, history: false })).toBe(
      "the memory (stored failures with their fixes, successes, the recall log)",
    );
    expect(targetsText(both)).toMatch(
      /^the memory \(.*\) and the task history \(task records and their recorded runs\)$/,
    );
  });
});

describe("reset's confirmation", () => {
  it("--yes goes on without asking, terminal or not", async () => {
    for (const terminal of [true, false]) {
      const a = asking(terminal, "n");
      expect(await confirmReset(both, where, true, a.how)).toBe(true);
      expect(a.questions).toEqual([]);
    }
  });

  it("without a terminal and without --yes refuses with a usage error (exit 2) that says to pass --yes", async () => {
    const a = asking(false, "y");
    const err = await confirmReset({ memory: false, history: true }, where, false, a.how).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "bad_request" });
    expect(exitCodeForError((err as { code: "bad_request" }).code)).toBe(2);
    expect((err as Error).message).toBe(
      `reset deletes the task history (task records and their recorded runs) in ${where} and asks first, but there is no terminal to ask on; pass --yes to delete without asking`,
    );
    expect(a.questions).toEqual([]);
  });

  it("on a terminal asks what it deletes and where, and goes on only on yes", async () => {
    for (const [answer, go] of [
      ["y", true],
      ["YES", true],
      [" yes\n", true],
      ["", false],
      ["n", false],
      ["no", false],
      ["yess", false],
      ["sure", false],
    ] as const) {
      const a = asking(true, answer);
      expect(await confirmReset({ memory: true, history: false }, where, undefined, a.how), answer).toBe(go);
      expect(a.questions).toEqual([
        `Delete the memory (stored failures with their fixes, successes, the recall log) in ${where}? This cannot be undone. [y/N] `,
      ]);
    }
  });
});

describe("reset's summary", () => {
  it("says what was removed from where, for what was asked only", () => {
    const removed = { failures: 12, successes: 1, recalls: 30, tasks: 5, runs: 5 };
    expect(removedText(both, where, removed)).toBe(
      `removed from ${where}: memory: 12 failures, 1 success, 30 recall records; history: 5 tasks, 5 recorded runs`,
    );
    expect(removedText({ memory: false, history: true }, "postgres db:5432/x", { ...removed, tasks: 1, runs: 1 })).toBe(
      "removed from postgres db:5432/x: history: 1 task, 1 recorded run",
    );
  });
});

describe("resetCommand before the store is opened", () => {
  const log = pino({ level: "silent" });
  afterEach(() => vi.restoreAllMocks());

  it("with no embedded memory in the data directory removes nothing and asks nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-reset-"));
    vi.stubEnv("LOOPSMITH_DATA_DIR", dir);
    vi.stubEnv("DATABASE_URL", "");
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const a = asking(false);
    try {
      expect(await resetCommand({}, log, a.how)).toBe(0);
    } finally {
      vi.unstubAllEnvs();
    }
    expect(out.mock.calls.map((c) => String(c[0]))).toEqual([
      `nothing to remove: there is no memory at ${join(dir, "memory")}\n`,
    ]);
    expect(a.questions).toEqual([]);
  });

  it("declined on a terminal: exit 1, nothing opened", async () => {
    vi.stubEnv("DATABASE_URL", "postgres://u:secret@127.0.0.1:9/none");
    const err = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const a = asking(true, "n");
    try {
      // Port 9 answers nothing: had it tried to open the database, this would fail instead.
      expect(await resetCommand({ memory: true }, log, a.how)).toBe(1);
    } finally {
      vi.unstubAllEnvs();
    }
    expect(a.questions[0]).toContain("in postgres 127.0.0.1:9/none?");
    expect(a.questions[0]).not.toContain("secret");
    expect(err.mock.calls.map((c) => String(c[0]))).toEqual(["loopsmith: nothing removed\n"]);
  });
});
