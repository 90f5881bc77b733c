import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { TaskEvent } from "@loopsmith/shared/contracts";
import { appendTranscript, readTranscripts } from "./transcripts.js";

const dir = mkdtempSync(join(tmpdir(), "loopsmith-transcripts-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const step = (taskId: string, n: number, tool: string): TaskEvent => ({
  v: 1,
  taskId,
  seq: n,
  at: "t",
  iteration: 1,
  kind: "step",
  phase: "explore",
  message: tool,
  data: { agentStep: { step: n, iteration: 1, tool, args: { path: "a.py" }, observation: "1: x", durationMs: 3 } },
});

describe("transcripts.jsonl", () => {
  it("keeps each task's steps across a resume, skips a cut line and tasks without steps", () => {
    const path = join(dir, "transcripts.jsonl");
    expect(readTranscripts(path).size).toBe(0);
    expect(appendTranscript(path, "t1", [step("t1", 1, "read"), step("t1", 2, "submit")])).toBe(2);
    expect(appendTranscript(path, "t2", [])).toBe(0);
    appendFileSync(path, '{"taskId":"t3","steps":[{"st\n');
    expect(appendTranscript(path, "t4", [step("t4", 1, "list")])).toBe(1);
    const read = readTranscripts(path);
    expect([...read.keys()]).toEqual(["t1", "t4"]);
    expect(read.get("t1")?.map((s) => `${s.step} ${s.tool}`)).toEqual(["1 read", "2 submit"]);
  });
});
