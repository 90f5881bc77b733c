/**
 * The memory service: every `Endpoints.memory.*` endpoint over one {@link MemoryStore}.
 * The typed bus validates requests (garbage gets `bad_request` and never reaches a handler);
 * store failures come back as typed errors (`db_error`, `not_found`) and the service keeps
 * serving. Shutdown closes the store (pool, then socket server, then PGlite).
 */
import type { Logger } from "pino";
import { Endpoints, handle, type Config, type ServiceModule } from "@loopsmith/shared";
import type { Embedder } from "./embedder.js";
import { openMemoryStore, type MemoryStore } from "./store.js";

/** Dependencies of {@link memoryService}. */
export interface MemoryServiceDeps {
  config: Config;
  log: Logger;
  /** @defaultValue the offline hashing embedder (`hash-v1-256`) */
  embedder?: Embedder;
}

/** The registrations of every memory endpoint over `store`. */
export function memoryRegistrations(store: MemoryStore): ServiceModule["registrations"] {
  const m = Endpoints.memory;
  return [
    handle(m.recall, (req) => store.recall(req)),
    handle(m.rememberFailure, (req) => store.rememberFailure(req)),
    handle(m.attachFix, (req) => store.attachFix(req)),
    handle(m.rememberSuccess, (req) => store.rememberSuccess(req)),
    handle(m.recordTask, (req) => store.recordTask(req)),
    handle(m.history, (req) => store.history(req)),
    handle(m.failures, (req) => store.failures(req)),
    handle(m.stats, () => store.stats()),
  ];
}

/**
 * Opens the store and returns the service module for `runService("memory", …)`.
 * @throws LoopsmithError `config_invalid` or `db_error` when the store cannot be opened
 */
export async function memoryService(deps: MemoryServiceDeps): Promise<ServiceModule> {
  const store = await openMemoryStore(deps);
  return {
    registrations: memoryRegistrations(store),
    hooks: [{ name: "memory store (pool, socket server, PGlite)", run: () => store.close() }],
    metadata: { backend: store.backend, embedder: store.embedder.id },
  };
}
