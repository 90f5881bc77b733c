/** @loopsmith/memory: error signatures, embedders, the pgvector memory store and its service. */
export { signature, normaliseMessage, type Signature } from "./signature.js";
export {
  createHashingEmbedder,
  checkEmbedder,
  combine,
  cosine,
  type Embedder,
  type HashingEmbedderOptions,
} from "./embedder.js";
export {
  openMemoryStore,
  createMemoryStore,
  SIGNATURE_WEIGHT,
  CONTEXT_WEIGHT,
  type MemoryStore,
  type MemoryStoreDeps,
} from "./store.js";
export { openDatabase, hnswIndexName, MIGRATIONS_DIR, type Backend, type Database, type OpenDatabaseOptions } from "./db.js";
export { memoryService, memoryRegistrations, type MemoryServiceDeps, type RegistrationDeps } from "./service.js";
export { assembleRun, capEvents, jsonbText, readRun, runPart, saveRun, type ReadEvents } from "./runs.js";
export { readTaskEvents, type EventsConnection, type ReadTaskEventsOptions } from "./run-events.js";
