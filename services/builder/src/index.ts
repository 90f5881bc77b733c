/** @loopsmith/builder: writes candidates (code and, where the task has none, tests). */
import type { Logger } from "pino";
import { Endpoints, handle } from "@loopsmith/shared/bus";
import { createProvider, type LlmProvider } from "@loopsmith/shared/llm";
import { type Config, type ServiceModule } from "@loopsmith/shared/runtime";
import { createBuilder } from "./builder.js";
import { createTurnTaker } from "./turn.js";

export { buildMessages, createBuilder, type Builder } from "./builder.js";
export {
  createTurnTaker,
  openingMessage,
  stepsNote,
  turnRequest,
  MAX_TOOL_CALLS_PER_TURN,
  type TurnTaker,
} from "./turn.js";

/**
 * The builder's service module: registers `loopsmith.builder.build` and agent mode's
 * `loopsmith.builder.turn`.
 * @throws LoopsmithError `config_invalid` when no provider can be built from the configuration.
 */
export async function builderService(deps: {
  config: Config;
  log: Logger;
  provider?: LlmProvider;
}): Promise<ServiceModule> {
  const provider = deps.provider ?? createProvider({ config: deps.config, log: deps.log });
  const builder = createBuilder({ provider, log: deps.log });
  const agent = createTurnTaker({ provider, log: deps.log });
  return {
    registrations: [
      handle(Endpoints.builder.build, (req) => builder.build(req)),
      handle(Endpoints.builder.turn, (req) => agent.turn(req)),
    ],
    metadata: { provider: provider.info.name, model: provider.info.model, scripted: String(provider.info.scripted) },
  };
}
