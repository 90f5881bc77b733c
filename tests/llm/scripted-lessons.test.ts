/**
 * The scripted provider and the lesson call (schema `lessons`): a script whose reflect entries
 * end before the lesson call has no lesson reply, and the call is refused at once
 * (`provider_unconfigured`: no call, no re-ask, no transcript line) instead of replaying the
 * last reflection; a scripted lesson reply, good or garbage, goes the way a real model's does.
 */
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { LESSON_SCHEMA_NAME, LessonReply, createProvider, type CompletionRequest } from "@loopsmith/shared/llm";
import { log, rejection, testConfig } from "./helpers.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "loopsmith-llm-lessons-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const REFLECTION = { rootCause: "The name is misspelt.", hypothesis: "A typo.", fixPlan: "Spell it as defined." };
const LESSON = { lessons: [{ signature: "NameError: name <id> is not defined", rule: "Spell a name as defined." }] };

async function scripted(reflect: unknown[]) {
  const file = join(dir, `script-${Math.random().toString(36).slice(2)}.json`);
  const transcriptPath = `${file}.jsonl`;
  await writeFile(file, JSON.stringify({ v: 1, kind: "loopsmith-script", replies: { reflect } }));
  const provider = createProvider({
    config: testConfig({ provider: "scripted", scriptPath: file, transcriptPath }),
    log,
  });
  return { provider, transcriptPath };
}

/** The lesson call of task `t-1` after `callsBefore` reflect calls. */
function lessonRequest(callsBefore: number): CompletionRequest<LessonReply> {
  return {
    role: "reflect",
    system: "lessons",
    messages: [{ role: "user", content: "the failures" }],
    schema: LessonReply,
    schemaName: LESSON_SCHEMA_NAME,
    context: { taskId: "t-1", iteration: 2, callsBefore },
  };
}

describe("scripted provider and the lesson call", () => {
  it("has no lesson reply when the reflect entries end: refused before any call, with no re-ask", async () => {
    const { provider, transcriptPath } = await scripted([REFLECTION]);
    const err = await rejection(provider.complete(lessonRequest(1)));
    expect(err.code).toBe("provider_unconfigured");
    expect(err.message).toContain("has no lesson reply for task t-1");
    expect(existsSync(transcriptPath)).toBe(false);
    // Without the task's count, this process's count says the same.
    const fresh = await scripted([]);
    expect((await rejection(fresh.provider.complete(lessonRequest(0)))).code).toBe("provider_unconfigured");
  });

  it("answers a scripted lesson reply; scripted garbage is re-asked once, then llm_bad_reply, as a model's", async () => {
    const good = await scripted([REFLECTION, LESSON]);
    const reply = await good.provider.complete(lessonRequest(1));
    expect(reply.value).toEqual(LESSON);
    expect(reply.usage.calls).toBe(1);

    const garbage = await scripted([REFLECTION, "this is not a lesson {"]);
    const err = await rejection(garbage.provider.complete(lessonRequest(1)));
    expect(err.code).toBe("llm_bad_reply");
    expect((err.details as { usage: { calls: number } }).usage.calls).toBe(2);
    const lines = (await readFile(garbage.transcriptPath, "utf8")).trim().split("\n");
    expect(lines).toHaveLength(2);
  });
});
