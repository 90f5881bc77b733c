/**
 * `loopsmith health`: a `$SRV` ping of services on NATS, for container health checks and
 * scripts. With `--id-file` it pings the one instance whose identity the service wrote
 * there (`LOOPSMITH_SERVICE_ID_FILE`), so compose marks a container healthy only when its own
 * process answers on the bus, whatever other replicas do. Without it, each named service (all
 * five by default) must have at least one instance that answers. An instance that answers
 * but whose `$SRV` STATS data says `healthy: false` (an executor whose Docker engine does not
 * answer) counts as not answering.
 *
 * Exit codes: 0 every service asked for answers; 3 NATS does not answer, or one does not.
 */
import { readFile } from "node:fs/promises";
import { Svcm } from "@nats-io/services";
import { connect } from "@nats-io/transport-node";
import { LoopsmithError, loadConfig, type ServiceIdentityFile } from "@loopsmith/shared/runtime";
import {
  ServiceNames,
  natsConnectOptions,
  natsIdentity,
  natsRefusal,
  type ServiceName,
  natsServers,
} from "@loopsmith/shared/bus";
import { ExitCode } from "./exit-codes.js";
import { jsonLine } from "./terminal.js";

/** Options of `health`. */
export interface HealthOptions {
  /** File a service wrote its `$SRV` name and id to (`LOOPSMITH_SERVICE_ID_FILE`). */
  idFile?: string;
  /** How long a ping waits for answers, in ms. @defaultValue 2000 */
  timeoutMs?: number;
  config?: string;
  json?: boolean;
}

/** One service's answer. */
export interface HealthAnswer {
  service: string;
  /** Instances that answered the ping (their `$SRV` ids). */
  ids: string[];
  healthy: boolean;
  /** Instances that answered but report themselves unhealthy in `$SRV` STATS (`data.healthy` false), with why. */
  unhealthy?: { id: string; error: string }[];
}

/**
 * Reads and checks an identity file.
 * @throws LoopsmithError `not_found` when the file does not exist (the service has not
 *   registered yet), `bad_request` when it is not `{name, id}` JSON
 */
async function readIdentity(file: string): Promise<ServiceIdentityFile> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new LoopsmithError("not_found", `no service id file at ${file}: the service has not registered on NATS yet`, {
      cause: err,
    });
  }
  let value: Partial<ServiceIdentityFile> | null = null;
  try {
    value = JSON.parse(text) as Partial<ServiceIdentityFile> | null;
  } catch {
    // reported below
  }
  if (typeof value?.name !== "string" || typeof value.id !== "string") {
    throw new LoopsmithError("bad_request", `${file} is not a service id file ({"name", "id"})`);
  }
  return { name: value.name, id: value.id };
}

/**
 * Pings services (`$SRV.PING.<name>[.<id>]`) on the configured NATS (`NATS_URL`).
 * @param services short names (`executor`) or `$SRV` names (`loopsmith-executor`); none: all five
 * @returns {@link ExitCode.ok} when every one answers, else {@link ExitCode.infrastructure}
 * @throws LoopsmithError `config_invalid` (NATS_URL unset, an unknown service name),
 *   `not_found`/`bad_request` (the id file)
 */
export async function healthCommand(services: string[], opts: HealthOptions): Promise<number> {
  const config = loadConfig(opts.config ? { file: opts.config } : {});
  if (!config.natsUrl)
    throw new LoopsmithError("config_invalid", "NATS_URL is not set: health pings services on a NATS server");
  const timeoutMs = opts.timeoutMs ?? 2_000;
  const names = Object.values(ServiceNames) as string[];
  let targets: { name: string; id?: string }[];
  if (opts.idFile) {
    const identity = await readIdentity(opts.idFile);
    targets = [identity];
  } else {
    const asked = services.length ? services : (Object.keys(ServiceNames) as ServiceName[]);
    targets = asked.map((s) => {
      const name = (ServiceNames as Record<string, string>)[s] ?? s;
      if (!names.includes(name))
        throw new LoopsmithError(
          "config_invalid",
          `unknown service ${s}: one of ${Object.keys(ServiceNames).join(", ")}`,
        );
      return { name };
    });
  }
  let nc;
  try {
    nc = await connect({
      ...natsConnectOptions(config),
      servers: natsServers(config.natsUrl),
      timeout: timeoutMs,
      reconnect: false,
      name: "loopsmith-health",
    });
  } catch (err) {
    const refused = natsRefusal(err, config.natsUrl, natsIdentity(config));
    if (refused) throw refused;
    report(
      opts,
      targets.map((t) => ({ service: t.name, ids: [], healthy: false })),
      `NATS at ${config.natsUrl} does not answer: ${(err as Error).message}`,
    );
    return ExitCode.infrastructure;
  }
  const answers: HealthAnswer[] = [];
  try {
    // One instance answers a ping by id: stop at its answer. By name, collect for the window.
    const byName = new Svcm(nc as never).client({ strategy: "timer", maxWait: timeoutMs });
    const byId = new Svcm(nc as never).client({ strategy: "count", maxMessages: 1, maxWait: timeoutMs });
    for (const t of targets) {
      const ids: string[] = [];
      try {
        for await (const ping of await (t.id ? byId : byName).ping(t.name, t.id)) ids.push(ping.id);
      } catch {
        // no responders: nobody answers
      }
      // An instance that answers but reports its own health false (an executor whose
      // Docker engine does not answer) is not healthy.
      const sick: { id: string; error: string }[] = [];
      if (ids.length) {
        try {
          for await (const stats of await (t.id ? byId : byName).stats(t.name, t.id)) {
            const bad = stats.endpoints?.find((e) => (e.data as { healthy?: unknown } | undefined)?.healthy === false);
            if (bad)
              sick.push({
                id: stats.id,
                error: String((bad.data as { error?: unknown }).error ?? "reports itself unhealthy"),
              });
          }
        } catch {
          // STATS unanswered: the ping decides
        }
      }
      const well = ids.filter((id) => !sick.some((s) => s.id === id));
      answers.push({
        service: t.name,
        ids: well,
        healthy: well.length > 0,
        ...(sick.length ? { unhealthy: sick } : {}),
      });
    }
  } finally {
    await nc.close();
  }
  report(opts, answers);
  return answers.every((a) => a.healthy) ? ExitCode.ok : ExitCode.infrastructure;
}

function report(opts: HealthOptions, answers: HealthAnswer[], problem?: string): void {
  if (opts.json) {
    process.stdout.write(
      `${jsonLine({ kind: "health", healthy: !problem && answers.every((a) => a.healthy), ...(problem ? { problem } : {}), services: answers })}\n`,
    );
    return;
  }
  if (problem) process.stderr.write(`loopsmith: ${problem}\n`);
  for (const a of answers) {
    const sick = a.unhealthy?.length
      ? `; ${a.unhealthy.map((u) => `${u.id} reports itself unhealthy: ${u.error}`).join("; ")}`
      : "";
    process.stdout.write(
      `${a.healthy ? "healthy" : "unhealthy"} ${a.service}${a.healthy ? ` (${a.ids.length} answered)` : a.unhealthy?.length ? "" : ": no answer"}${sick}\n`,
    );
  }
}
