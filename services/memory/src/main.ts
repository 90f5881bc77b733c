/**
 * Process entry point of the memory service:
 * `node --import tsx services/memory/src/main.ts` with `NATS_URL`, and optionally
 * `DATABASE_URL` (else embedded PGlite under `LOOPSMITH_DATA_DIR`/memory).
 */
import { serviceMain } from "@loopsmith/shared";
import { memoryService } from "./service.js";

await serviceMain("memory", ({ config, log }) => memoryService({ config, log }));
