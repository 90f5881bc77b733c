/** Process entry point of the architect service (`NATS_URL` required). */
import { serviceMain } from "@loopsmith/shared/runtime";
import { architectService } from "./index.js";

await serviceMain("architect", ({ nc, config, log }) => architectService({ nc, config, log }));
