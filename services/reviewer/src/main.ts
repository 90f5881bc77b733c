/**
 * The reviewer process: `node --import tsx services/reviewer/src/main.ts` with `NATS_URL`
 * (and the LLM configuration) in the environment.
 */
import { serviceMain } from "@loopsmith/shared/runtime";
import { reviewerService } from "./service.js";

await serviceMain("reviewer", ({ config, log }) => reviewerService({ config, log }));
