/**
 * The flags that pick who answers, the same on every command that runs tasks (`solve`,
 * `improve`): `--provider`, `--model`, `--base-url`, and a model and a provider per role
 * (`--model-<role>`, `--provider-<role>`). `flagsOf` (steering.ts) turns them into the
 * configuration's flags layer. Loads only `commander` and the contracts' plain values (no zod).
 */
import { Option, type Command } from "commander";
import { PROVIDERS, ROLES } from "@loopsmith/shared/contracts/values";

/**
 * Adds `--provider`, `--model`, `--base-url`, and `--model-<role>` and `--provider-<role>` for
 * each role of `ROLES` to `command` (commander names them `provider`, `model`, `baseUrl`,
 * `modelPlan`, `providerBuild`, …).
 * @returns the same command
 */
export function addModelFlags(command: Command): Command {
  command
    .addOption(new Option("--provider <name>", "LLM provider").choices(PROVIDERS))
    .option("--model <id>", "model id (every role that names none)")
    .option("--base-url <url>", "provider base URL (openai-compatible servers, proxies)");
  // A model per role (llm.roles.<role>; env LOOPSMITH_MODEL_<ROLE>, LOOPSMITH_PROVIDER_<ROLE>).
  for (const role of ROLES) {
    command.option(`--model-${role} <id>`, `model of the ${role} role`);
    command.addOption(new Option(`--provider-${role} <name>`, `provider of the ${role} role`).choices(PROVIDERS));
  }
  return command;
}
