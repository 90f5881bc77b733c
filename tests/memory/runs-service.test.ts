/**
 * Recorded runs through the memory service over real NATS and JetStream: `record_task` with
 * the task and result reads the task's events from the events stream (which then holds
 * every event but the result) and records the run; `run` serves it back in parts, a run
 * larger than one NATS message included; recording again is idempotent; a task without a
 * run is `not_found` across the bus. Then `show`, `export` and `replay` against that
 * service, with the task runner of `replay` (the `solve` path) stubbed.
 */
import { afterAll, describe, expect, vi } from "vitest";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { Endpoints, call, ensureStreams, publishEvent } from "@loopsmith/shared/bus";
import { LoopsmithError, loadConfig, runService } from "@loopsmith/shared/runtime";
import { RunRecord, ScriptFile, Task, type TaskEvent, type TaskResult } from "@loopsmith/shared/contracts";
import { memoryService } from "@loopsmith/memory";
import { replayCommand } from "../../cli/src/replay.js";
import { exportCommand, fetchRun, showCommand } from "../../cli/src/runs.js";
import { it } from "../fixtures/index.js";
import { finishedTask } from "./runs-suite.js";
import { log } from "./suite.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe("recorded runs over NATS", () => {
  it("records a run from the events stream, serves it back in parts, idempotently, and not_found for none", async ({
    nats,
  }) => {
    const dir = await mkdtemp(join(tmpdir(), "loopsmith-runs-"));
    dirs.push(dir);
    const config = loadConfig({ env: { NATS_URL: nats.url, LOOPSMITH_DATA_DIR: dir } });
    const running = await runService("memory", (deps) => memoryService(deps), { config, log });
    const { nc } = running;
    const m = Endpoints.memory;
    try {
      await ensureStreams(nc);
      // A task's events as the conductor publishes them, the result not yet.
      const { events, record, result } = finishedTask("svc-run");
      for (const e of events) await publishEvent(nc, e);
      await call(nc, m.recordTask, record);
      const run = await fetchRun(nc, "svc-run");
      expect(run.events.slice(0, events.length)).toEqual(events);
      expect(run.events.at(-1)).toMatchObject({ seq: events.length, kind: "result", result });
      expect(run).toMatchObject({ task: record.task, result, eventsTruncated: false, eventsTotal: events.length + 1 });

      // The same record again (a retried call): the same run.
      await call(nc, m.recordTask, record);
      expect({ ...(await fetchRun(nc, "svc-run")), recordedAt: "" }).toEqual({ ...run, recordedAt: "" });
      // Once the result is in the stream, a record again keeps exactly one result event.
      await publishEvent(nc, {
        v: 1,
        taskId: "svc-run",
        seq: events.length,
        at: new Date().toISOString(),
        iteration: 2,
        kind: "result",
        phase: "done",
        message: result.message,
        result,
      });
      await call(nc, m.recordTask, record);
      expect((await fetchRun(nc, "svc-run")).events.filter((e) => e.kind === "result")).toHaveLength(1);

      // A task that published nothing: the run holds the result alone.
      const quiet = finishedTask("svc-quiet");
      await call(nc, m.recordTask, quiet.record);
      expect((await fetchRun(nc, "svc-quiet")).events.map((e) => e.kind)).toEqual(["result"]);

      // A run larger than one NATS message (1 MiB): its events are each under the limit.
      const big = finishedTask("svc-big");
      const bulky: TaskEvent[] = Array.from({ length: 24 }, (_, i) => ({
        v: 1,
        taskId: "svc-big",
        seq: i,
        at: new Date().toISOString(),
        iteration: 1,
        kind: "step",
        phase: "build",
        message: `step ${i}`,
        data: {
          llm: {
            role: "build",
            callsBefore: i,
            calls: 1,
            value: {
              files: [{ path: "big.py", content: `# ${i} é 😀 "\n${"x = 1\n".repeat(12_000)}` }],
              tests: [],
              notes: "",
            },
          },
        },
      }));
      for (const e of bulky) await publishEvent(nc, e);
      await call(nc, m.recordTask, big.record);
      const part = await call(nc, m.run, { v: 1, taskId: "svc-big" });
      expect(part.total).toBeGreaterThan(1024 * 1024);
      expect(part.text.length).toBeLessThan(part.total);
      const bigRun = await fetchRun(nc, "svc-big");
      expect(bigRun.events.slice(0, bulky.length)).toEqual(bulky);
      expect(bigRun.events).toHaveLength(bulky.length + 1);

      // No run: a typed not_found crosses the bus, and the service keeps serving.
      const missing = await fetchRun(nc, "nobody").then(
        () => null,
        (e: unknown) => e as LoopsmithError,
      );
      expect(missing).toBeInstanceOf(LoopsmithError);
      expect(missing?.code).toBe("not_found");
      expect((await call(nc, m.stats, { v: 1 })).tasks).toBe(3);
    } finally {
      expect(await running.stop()).toBeNull();
    }
  });
});

/** Runs `fn` with stdout captured and `NATS_URL`/`LOOPSMITH_DATA_DIR` set, as a user's shell would. */
async function captured(
  env: Record<string, string>,
  fn: () => Promise<number>,
): Promise<{ code: number; out: string }> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  let out = "";
  const spy = vi
    .spyOn(process.stdout, "write")
    .mockImplementation((chunk: string | Uint8Array) => ((out += chunk.toString()), true));
  try {
    return { code: await fn(), out };
  } finally {
    spy.mockRestore();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe("show, export and replay over a running memory", () => {
  it("prints, exports and replays a recorded run, and says whether the replay ended the same way", async ({ nats }) => {
    const dir = await mkdtemp(join(tmpdir(), "loopsmith-runs-cli-"));
    dirs.push(dir);
    const env = { NATS_URL: nats.url, LOOPSMITH_DATA_DIR: dir };
    const running = await runService("memory", (deps) => memoryService(deps), { config: loadConfig({ env }), log });
    try {
      await ensureStreams(running.nc);
      const { events, record, result } = finishedTask("cli-run", true);
      for (const e of events) await publishEvent(running.nc, e);
      await call(running.nc, Endpoints.memory.recordTask, record);

      const shown = await captured(env, () => showCommand("cli-run", {}, log));
      expect(shown.code).toBe(0);
      expect(shown.out).toMatch(/^task cli-run · PASSED \(stop reason passed\) · 2 iterations/);
      expect(shown.out).toContain("signature: AssertionError: assert <n> == <n>");
      expect(shown.out).toContain("SCRIPTED");
      const json = await captured(env, () => showCommand("cli-run", { json: true }, log));
      expect(RunRecord.parse(JSON.parse(json.out)).events).toHaveLength(events.length + 1);

      const out = join(dir, "export");
      const exported = await captured(env, () => exportCommand("cli-run", { out, json: true }, log));
      expect(JSON.parse(exported.out)).toEqual({
        kind: "export",
        taskId: "cli-run",
        files: [join(out, "result.json"), join(out, "report.md"), join(out, "change.patch")],
      });
      expect((await readdir(out)).sort()).toEqual(["change.patch", "report.md", "result.json"]);
      expect(await readFile(join(out, "report.md"), "utf8")).toContain(
        "- Signature: `AssertionError: assert <n> == <n>`",
      );

      // replay: the task file and script reach the runner; the same result is SAME (exit 0).
      const seen: { task?: Task; script?: ScriptFile; label?: string } = {};
      const runTask = (answer: (r: TaskResult) => TaskResult) => async (taskFile: string, scriptFile: string) => {
        seen.task = Task.parse(JSON.parse(await readFile(taskFile, "utf8")));
        seen.script = ScriptFile.parse(JSON.parse(await readFile(scriptFile, "utf8")));
        seen.label = `scripted:script:${basename(scriptFile)}`;
        return answer({ ...result, taskId: seen.task.taskId, scripted: true, providers: [seen.label] });
      };
      const same = await captured(env, () =>
        replayCommand(
          "cli-run",
          {},
          log,
          runTask((r) => r),
        ),
      );
      expect(same.code).toBe(0);
      expect(same.out).toMatch(/^REPLAY of task cli-run as task cli-run-replay-[0-9a-f]{6}/);
      expect(same.out).toContain("SAME: the replay");
      expect(seen.task).toMatchObject({ goal: record.task?.goal, repo: { baseCommit: "a".repeat(40) } });
      expect(seen.script?.replies.build).toHaveLength(2);

      const different = await captured(env, () =>
        replayCommand(
          "cli-run",
          { json: true },
          log,
          runTask((r) => ({ ...r, iterations: 3, providers: [...r.providers, "anthropic:claude"] })),
        ),
      );
      expect(different.code).toBe(1);
      const last = JSON.parse(different.out.trim().split("\n").at(-1) ?? "{}");
      expect(last).toMatchObject({ kind: "replay", taskId: "cli-run", same: false });
      expect(last.differences).toEqual([
        "iterations: 2 in the recorded run, 3 in the replay",
        expect.stringMatching(/answered by anthropic:claude, not only by its script/),
      ]);

      // A run without recorded replies cannot be replayed; an unknown task is not_found (exit 2).
      const bare = finishedTask("cli-bare");
      await call(running.nc, Endpoints.memory.recordTask, bare.record);
      await expect(
        captured(env, () =>
          replayCommand(
            "cli-bare",
            {},
            log,
            runTask((r) => r),
          ),
        ),
      ).rejects.toMatchObject({ code: "bad_request" });
      await expect(captured(env, () => showCommand("cli-nobody", {}, log))).rejects.toMatchObject({
        code: "not_found",
      });
    } finally {
      await running.stop();
    }
  });
});
