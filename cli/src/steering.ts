/**
 * Who answers, for every command that runs tasks (`solve`, `improve`): the model flags as
 * commander gives them (`addModelFlags` in model-flags.ts, `--script`, `--transcript`), the
 * configuration's flags layer they make, and the configuration a command runs with over it
 * (a running stack's flags when none is given). One path, so the same flags mean the same
 * configuration and the same `config show` sources on every command.
 */
import { resolve } from "node:path";
import { loadConfig, type Config } from "@loopsmith/shared/runtime";
import { type Role } from "@loopsmith/shared/llm";
import { ROLES } from "@loopsmith/shared/contracts/values";
import { liveStack } from "./stack-record.js";

/** `--model-<role>` and `--provider-<role>`, as commander names them (`modelPlan`, `providerBuild`, …). */
export type RoleFlags = Partial<Record<`model${Capitalize<Role>}` | `provider${Capitalize<Role>}`, string>>;

/**
 * The flags that pick who answers, as commander gives them (`addModelFlags` in model-flags.ts,
 * and `--script`, `--transcript`), with the configuration file: the same on `solve` and `improve`.
 */
export interface ModelOptions extends RoleFlags {
  provider?: string;
  model?: string;
  script?: string;
  baseUrl?: string;
  transcript?: string;
  config?: string;
}

/**
 * The flags layer of the configuration, also handed to child services: `llm.provider`,
 * `llm.model`, `llm.scriptPath` and `llm.transcriptPath` (resolved), `llm.baseUrl`, and
 * `llm.roles.<role>.model`/`.provider`; `{}` when no such flag is given.
 */
export function flagsOf(o: ModelOptions): Record<string, unknown> {
  const llm: Record<string, unknown> = {};
  if (o.provider) llm.provider = o.provider;
  if (o.model) llm.model = o.model;
  if (o.script) llm.scriptPath = resolve(o.script);
  if (o.baseUrl) llm.baseUrl = o.baseUrl;
  if (o.transcript) llm.transcriptPath = resolve(o.transcript);
  const roles: Record<string, Record<string, string>> = {};
  for (const role of ROLES) {
    const cap = `${role[0]?.toUpperCase() ?? ""}${role.slice(1)}` as Capitalize<Role>;
    const model = o[`model${cap}`];
    const provider = o[`provider${cap}`];
    if (model || provider) roles[role] = { ...(model ? { model } : {}), ...(provider ? { provider } : {}) };
  }
  if (Object.keys(roles).length) llm.roles = roles;
  return Object.keys(llm).length ? { llm } : {};
}

/** What a command steered by the model flags runs with: see {@link steering}. */
export interface Steering {
  /** The flags layer (for the services this command starts, as `LOOPSMITH_CONFIG_JSON`). */
  flags: Record<string, unknown>;
  /** The configuration loaded over `files` with `flags` as its highest layer. */
  config: Config;
  /** The environment of the services this command starts: the flags layer and `--config`. */
  childEnv: NodeJS.ProcessEnv;
}

/**
 * The flags layer and the configuration of a command that runs tasks (`solve`, `improve`),
 * one path for both: its own model flags ({@link flagsOf}); with none, on a running stack
 * (`up`, and no NATS configured), the flags the stack was started with, so the provider
 * checked here is the one its services run. Flags win over the environment, which wins over
 * the files; `config show` names them `flag`.
 * @param files - the configuration files: `--config`, and the repository whose file counts
 * @throws LoopsmithError `config_invalid` for an invalid configuration (see `loadConfig`)
 */
export async function steering(o: ModelOptions, files: { file?: string; repoRoot?: string }): Promise<Steering> {
  const steered = (flags: Record<string, unknown>, config?: Config): Steering => ({
    flags,
    config: config ?? loadConfig({ ...files, flags }),
    childEnv: {
      LOOPSMITH_CONFIG_JSON: JSON.stringify(flags),
      ...(o.config ? { LOOPSMITH_CONFIG: resolve(o.config) } : {}),
    },
  });
  const own = flagsOf(o);
  const config = loadConfig({ ...files, flags: own });
  if (Object.keys(own).length || config.natsUrl) return steered(own, config);
  const live = (await liveStack(config.dataDir))?.flags;
  return live ? steered(live) : steered(own, config);
}
