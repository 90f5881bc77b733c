/** @loopsmith/memory: error signatures, embedders, the pgvector memory store and its service. */
export { signature, normaliseMessage, decodeEntities, type Signature } from "./signature.js";
export {
  buildEmbedText,
  prepareFailure,
  embedParts,
  embedPartsMany,
  anyWordQuery,
  PART_WEIGHTS,
  type EmbedInput,
  type EmbedText,
  type PreparedFailure,
} from "./embed-text.js";
export { hybridRecall, RANKING_WEIGHTS, RRF_K } from "./recall.js";
export {
  createHashingEmbedder,
  checkEmbedder,
  combine,
  cosine,
  type Embedder,
  type HashingEmbedderOptions,
} from "./embedder.js";
export { apiEmbedderId, configuredEmbedder, createApiEmbedder, type ApiEmbedderOptions } from "./api-embedder.js";
export {
  openMemoryStore,
  createMemoryStore,
  type MemoryStore,
  type MemoryStoreDeps,
  type StoreOptions,
} from "./store.js";
export type { ReembedResult } from "./reembed.js";
export {
  openDatabase,
  analyseStale,
  embeddingExpr,
  hnswIndexName,
  MIGRATIONS_DIR,
  type AnalysedTable,
  type Backend,
  type Database,
  type OpenDatabaseOptions,
} from "./db.js";
export { insertFailures, type InsertFailuresOptions, type InsertFailuresResult } from "./bulk.js";
export { memoryService, memoryRegistrations, type MemoryServiceDeps, type RegistrationDeps } from "./service.js";
export { assembleRun, capEvents, jsonbText, readRun, runPart, saveRun, type ReadEvents } from "./runs.js";
export { readTaskEvents, type EventsConnection, type ReadTaskEventsOptions } from "./run-events.js";
export { resetMemory, type ResetCounts, type ResetScope } from "./reset.js";
