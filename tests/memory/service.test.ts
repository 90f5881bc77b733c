/**
 * The memory service over real NATS: typed replies, garbage answered with `bad_request`, a
 * lost database answered with `db_error`, and the service keeps serving throughout.
 */
import { afterAll, describe, expect } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Svcm } from "@nats-io/services";
import { Endpoints, call, requestSubject, servedSubject } from "@loopsmith/shared/bus";
import { LoopsmithError, loadConfig, runService } from "@loopsmith/shared/runtime";
import { rememberLessonsEndpoint } from "@loopsmith/shared/llm";
import { memoryService, openMemoryStore } from "@loopsmith/memory";
import { it, startPostgres } from "../fixtures/index.js";
import { GOAL_A, fixPlan, log, nameErrorFailure } from "./suite.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function errorOf(p: Promise<unknown>): Promise<LoopsmithError> {
  return p.then(
    () => {
      throw new Error("expected a rejection");
    },
    (e: unknown) => e as LoopsmithError,
  );
}

describe("memory service over NATS", () => {
  it("serves every endpoint, answers garbage with bad_request and keeps serving", async ({ nats }) => {
    const dir = await mkdtemp(join(tmpdir(), "loopsmith-memsvc-"));
    dirs.push(dir);
    const config = loadConfig({ env: { NATS_URL: nats.url, LOOPSMITH_DATA_DIR: dir } });
    const running = await runService("memory", (deps) => memoryService(deps), { config, log });
    const { nc } = running;
    const m = Endpoints.memory;
    try {
      const remembered = await call(nc, m.rememberFailure, nameErrorFailure("svc-a", GOAL_A, "numbrs"));
      expect(remembered.signature).toBe("NameError: name <id> is not defined");

      // Not JSON, and JSON that fails its schema, on every endpoint.
      for (const def of Object.values(m)) {
        const raw = JSON.parse((await nc.request(requestSubject(def), "{not json", { timeout: 5_000 })).string());
        expect(raw).toMatchObject({ ok: false, error: { code: "bad_request", retryable: false } });
        const bad = JSON.parse(
          (await nc.request(requestSubject(def), JSON.stringify({ v: 2, taskId: 7 }), { timeout: 5_000 })).string(),
        );
        expect(bad).toMatchObject({ ok: false, error: { code: "bad_request" } });
      }

      // A handler's typed error crosses the bus as data.
      const missing = await errorOf(
        call(
          nc,
          m.attachFix,
          {
            v: 1,
            taskId: "svc-a",
            iteration: 1,
            idempotencyKey: "svc-a/1/attach_fix",
            failureId: "424242",
            reflection: fixPlan,
          },
          { retries: 0 },
        ),
      );
      expect(missing).toBeInstanceOf(LoopsmithError);
      expect(missing.code).toBe("not_found");

      // Still serving, with the data intact.
      await call(nc, m.attachFix, {
        v: 1,
        taskId: "svc-a",
        iteration: 1,
        idempotencyKey: "svc-a/1/attach_fix",
        failureId: remembered.id,
        reflection: fixPlan,
      });
      const err = "NameError: name 'total' is not defined";
      const recall = await call(nc, m.recall, { v: 1, taskId: "svc-b", language: "python", text: err, errorText: err });
      expect(recall.failures.map((f) => [f.id, f.reflection])).toEqual([[remembered.id, fixPlan]]);
      await call(nc, m.rememberSuccess, {
        v: 1,
        taskId: "svc-a",
        iteration: 2,
        idempotencyKey: "svc-a/2/remember_success",
        language: "python",
        goal: GOAL_A,
        files: [{ path: "solution.py", content: "pass\n" }],
      });
      await call(nc, m.recordTask, {
        v: 1,
        taskId: "svc-a",
        goal: GOAL_A,
        language: "python",
        status: "passed",
        stopReason: "passed",
        iterations: 2,
        usage: {
          calls: 1,
          inputTokens: 1,
          outputTokens: 1,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          costUsd: 0.5,
          latencyMs: 1,
        },
        durationMs: 10,
        scripted: true,
        finishedAt: new Date().toISOString(),
      });
      expect((await call(nc, m.history, { v: 1 })).tasks.map((t) => t.taskId)).toEqual(["svc-a"]);
      expect(await call(nc, m.stats, { v: 1 })).toMatchObject({
        tasks: 1,
        passed: 1,
        failures: 1,
        successes: 1,
        backend: "pglite",
      });

      const infos = [];
      for await (const i of await new Svcm(nc as never).client().info("loopsmith-memory")) infos.push(i);
      expect(infos[0]?.metadata).toMatchObject({ backend: "pglite", embedder: "hash-v1-256" });
      expect(infos[0]?.endpoints.map((e) => e.subject).sort()).toEqual(
        [...Object.values(m), rememberLessonsEndpoint].map((d) => servedSubject(d)).sort(),
      );
    } finally {
      expect(await running.stop()).toBeNull();
    }
    // The shutdown hooks closed PGlite cleanly: the data dir opens again with everything in it.
    const reopened = await openMemoryStore({ config, log });
    try {
      expect(await reopened.stats()).toMatchObject({ tasks: 1, failures: 1, successes: 1 });
    } finally {
      await reopened.close();
    }
  });

  it("answers db_error when PostgreSQL goes away, and keeps serving", async ({ nats }) => {
    const pg = await startPostgres();
    const config = loadConfig({ env: { NATS_URL: nats.url, DATABASE_URL: pg.url } });
    const running = await runService("memory", (deps) => memoryService(deps), { config, log });
    const m = Endpoints.memory;
    try {
      await call(running.nc, m.rememberFailure, nameErrorFailure("lost-a", GOAL_A, "x"));
      expect((await call(running.nc, m.stats, { v: 1 })).backend).toBe("postgres");
      await pg.stop();

      const down = await errorOf(call(running.nc, m.stats, { v: 1 }, { retries: 0, timeoutMs: 20_000 }));
      expect(down).toBeInstanceOf(LoopsmithError);
      expect(down.code).toBe("db_error");
      expect(down.retryable).toBe(true);
      const recallDown = await errorOf(
        call(
          running.nc,
          m.recall,
          { v: 1, taskId: "lost-b", language: "python", text: "x" },
          { retries: 0, timeoutMs: 20_000 },
        ),
      );
      expect(recallDown.code).toBe("db_error");

      // The process and the service are still up.
      const raw = JSON.parse(
        (await running.nc.request(requestSubject(m.stats), "garbage", { timeout: 5_000 })).string(),
      );
      expect(raw.error.code).toBe("bad_request");
    } finally {
      await running.stop();
      await pg.stop().catch(() => undefined);
    }
  });
});
