/** The executor process: `node --import tsx services/executor/src/main.ts` with NATS_URL set. */
import { serviceMain } from "@loopsmith/shared/runtime";
import { executorService } from "./service.js";

await serviceMain("executor", (deps) => executorService(deps));
