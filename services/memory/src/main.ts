/**
 * Process entry point of the memory service:
 * `node --import tsx services/memory/src/main.ts` with `NATS_URL`, and optionally
 * `DATABASE_URL` (else embedded PGlite under `LOOPSMITH_DATA_DIR`/memory), opened while the
 * NATS connection is made. The service's NATS connection also reads a finished task's events
 * when its run is recorded.
 */
import { serviceMain } from "@loopsmith/shared/runtime";
import { memoryService } from "./service.js";
import { openMemoryStore, type MemoryStore } from "./store.js";

// The database is opened while the service connects to NATS (the longest part of its start).
await serviceMain<MemoryStore>(
  "memory",
  ({ nc, config, log, prepared }) => memoryService({ nc, config, log, store: prepared }),
  {
    open: (deps) => openMemoryStore(deps),
    close: (store) => store.close(),
  },
);
