/**
 * The memory service: every `Endpoints.memory.*` endpoint over one {@link MemoryStore}.
 * The typed bus validates requests (garbage gets `bad_request` and never reaches a handler);
 * store failures come back as typed errors (`db_error`, `not_found`) and the service keeps
 * serving. Shutdown closes the store (pool, then socket server, then PGlite).
 *
 * A `record_task` that carries the task also records the run: the task's events are read
 * back from the events stream (this service's NATS connection), a result event is added
 * from the request's `result` (the conductor publishes it right after), and the run is
 * stored; `run` serves it back in parts that each fit one NATS message.
 */
import type { Logger } from "pino";
import { DEFAULT_OWNER, Endpoints, handle } from "@loopsmith/shared/bus";
import { type Config, type ServiceModule } from "@loopsmith/shared/runtime";
import { type TaskRecord } from "@loopsmith/shared/contracts";
import { rememberLessonsEndpoint } from "@loopsmith/shared/llm";
import type { Embedder } from "./embedder.js";
import { readTaskEvents, type EventsConnection } from "./run-events.js";
import { assembleRun, runPart } from "./runs.js";
import { openMemoryStore, type MemoryStore } from "./store.js";

/** `max_payload` assumed when the server does not say, in bytes (NATS's default, 1 MiB). */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** Dependencies of {@link memoryService}. */
export interface MemoryServiceDeps {
  config: Config;
  log: Logger;
  /**
   * The service's NATS connection, to read a task's events when its run is recorded.
   * Absent: runs are recorded without events (`eventsTruncated`).
   */
  nc?: EventsConnection;
  /** @defaultValue the embedder `config.memory.embedder` names (the offline hashing embedder, `hash-v1-256`, by default) */
  embedder?: Embedder;
}

/** What {@link memoryRegistrations} needs besides the store. */
export interface RegistrationDeps {
  /** To read events for runs, and the server's `max_payload` for run parts. */
  nc?: EventsConnection;
  log?: Logger;
  /** Longest the events of one run may take to read, in ms. @defaultValue 10000 */
  eventsTimeoutMs?: number;
}

/**
 * Records the task and, when the record carries `task`, its run (events from the stream).
 * @throws LoopsmithError `bad_request`; `db_error`
 */
async function recordTask(store: MemoryStore, record: TaskRecord, deps: RegistrationDeps): Promise<{ id: string }> {
  const recorded = await store.recordTask(record);
  if (record.task) {
    const read = deps.nc
      ? await readTaskEvents(deps.nc, record.owner ?? record.task.owner ?? DEFAULT_OWNER, record.taskId, {
          ...(deps.log ? { log: deps.log } : {}),
          ...(deps.eventsTimeoutMs !== undefined ? { timeoutMs: deps.eventsTimeoutMs } : {}),
        })
      : { events: [], complete: false };
    await store.saveRun(assembleRun(record, read, new Date().toISOString()));
  }
  return recorded;
}

/** The registrations of every memory endpoint over `store`. */
export function memoryRegistrations(store: MemoryStore, deps: RegistrationDeps = {}): ServiceModule["registrations"] {
  const m = Endpoints.memory;
  const maxPayload = (): number => deps.nc?.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
  return [
    handle(m.recall, async (req, ctx) => {
      const recall = await store.recall(req);
      // The log only feeds statistics: a recall answers even when it cannot be logged.
      await store
        .logRecall(req.taskId, recall)
        .catch((err: unknown) => ctx.log.warn({ err }, "could not log the recall"));
      await store
        .logUses(req, recall)
        .catch((err: unknown) => ctx.log.warn({ err }, "could not log the recalled memories"));
      return recall;
    }),
    handle(rememberLessonsEndpoint, (req) => store.rememberLessons(req)),
    handle(m.rememberFailure, (req) => store.rememberFailure(req)),
    handle(m.attachFix, (req) => store.attachFix(req)),
    handle(m.rememberSuccess, (req) => store.rememberSuccess(req)),
    handle(m.recordTask, async (req, ctx) => {
      const recorded = await recordTask(store, req, { ...deps, log: ctx.log });
      // The task ended: judge the memories it was shown (advisory: the record stands either way).
      await store
        .judge(req.taskId)
        .catch((err: unknown) => ctx.log.warn({ err }, "could not judge the recalled memories"));
      return recorded;
    }),
    handle(m.history, (req, ctx) => store.history(req, ctx.owner)),
    handle(m.failures, (req, ctx) => store.failures(req, ctx.owner)),
    handle(m.stats, (req, ctx) => store.stats(req, ctx.owner)),
    handle(m.run, async (req, ctx) => runPart(await store.run(req.taskId, ctx.owner), req.offset, maxPayload())),
  ];
}

/**
 * Opens the store (or takes `deps.store`, opened while the service connected to NATS) and
 * returns the service module for `runService("memory", …)`.
 * @throws LoopsmithError `config_invalid` or `db_error` when the store cannot be opened
 */
export async function memoryService(deps: MemoryServiceDeps & { store?: MemoryStore }): Promise<ServiceModule> {
  const store = deps.store ?? (await openMemoryStore(deps));
  return {
    registrations: memoryRegistrations(store, { ...(deps.nc ? { nc: deps.nc } : {}), log: deps.log }),
    hooks: [{ name: "memory store (pool, socket server, PGlite)", run: () => store.close() }],
    metadata: { backend: store.backend, embedder: store.embedder.id },
  };
}
