/**
 * Process entry point of the memory service:
 * `node --import tsx services/memory/src/main.ts` with `NATS_URL`, and optionally
 * `DATABASE_URL` (else embedded PGlite under `LOOPSMITH_DATA_DIR`/memory). The service's
 * NATS connection also reads a finished task's events when its run is recorded.
 */
import { serviceMain } from "@loopsmith/shared";
import { memoryService } from "./service.js";

await serviceMain("memory", ({ nc, config, log }) => memoryService({ nc, config, log }));
