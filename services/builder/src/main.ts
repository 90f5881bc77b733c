/** Process entry point of the builder service (`NATS_URL` required). */
import { serviceMain } from "@loopsmith/shared/runtime";
import { builderService } from "./index.js";

await serviceMain("builder", ({ config, log }) => builderService({ config, log }));
