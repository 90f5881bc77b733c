/**
 * `loopsmith up`, `loopsmith down` and `loopsmith status`: a local stack (a NATS container,
 * embedded memory and the five services) that stays up between commands, so `solve`,
 * `history`, `stats`, `show` and `improve` start no service of their own (see
 * `stack-record.ts`). The services keep the provider settings `up` was given.
 *
 * Exit codes: 0 done (`status`: all five services answer); 2 configuration error; 3 Docker,
 * NATS or a service unavailable (`status`: a service does not answer, or no stack is up).
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import Docker from "dockerode";
import type { Logger } from "pino";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";
import { ServiceNames, natsConnectOptions, type ServiceName, natsServers } from "@loopsmith/shared/bus";
import { createProvider } from "@loopsmith/shared/llm";
import { loadConfig } from "@loopsmith/shared/runtime";
import { ExitCode } from "./exit-codes.js";
import { shownNatsUrl } from "./preflight.js";
import type { SolveOptions } from "./solve.js";
import { flagsOf } from "./steering.js";
import { liveStack, readStackRecord, removeStackRecord, writeStackRecord, type StackRecord } from "./stack-record.js";
import { readStackUsers, removeStackUsers, roleConnectOptions } from "./stack-auth.js";
import { startLocalStack, type StackProgress } from "./stack.js";
import { jsonLine } from "./terminal.js";
import { formatTable } from "./ui/index.js";

/** Options of `up` (the provider flags of `solve`), `down` and `status`. */
export type StackCommandOptions = Pick<
  SolveOptions,
  "provider" | "model" | "script" | "baseUrl" | "transcript" | "config" | "json"
>;

/** How long `down` waits for the services to stop after SIGTERM, in ms, before SIGKILL. */
const DOWN_GRACE_MS = 15_000;

function say(opts: { json?: boolean }, kind: string, message: string, data: Record<string, unknown> = {}): void {
  process.stdout.write(opts.json ? `${jsonLine({ kind, message, ...data })}\n` : `${message}\n`);
}

function configOf(opts: StackCommandOptions) {
  return loadConfig({ ...(opts.config ? { file: opts.config } : {}), flags: flagsOf(opts) });
}

/**
 * Starts the stack in the background and records it; a stack that is already up is left as
 * it is. The provider is checked first (a missing key fails before anything starts).
 * @returns {@link ExitCode.ok}
 * @throws LoopsmithError `config_invalid`, `llm_auth`; `unavailable` when Docker, the NATS
 *   image or a service does not come up (what was started is stopped again)
 */
export async function upCommand(opts: StackCommandOptions, log: Logger): Promise<number> {
  const t0 = performance.now();
  const flags = flagsOf(opts);
  const config = configOf(opts);
  const running = await liveStack(config.dataDir);
  if (running) {
    say(
      opts,
      "up",
      `a stack is already up on ${shownNatsUrl(running.natsUrl)} (since ${running.startedAt}); loopsmith down stops it`,
      { natsUrl: running.natsUrl, already: true },
    );
    return ExitCode.ok;
  }
  const provider = createProvider({ config, log });
  const status = opts.json ? undefined : statusLine(t0, !config.natsUrl);
  let stack;
  try {
    if (provider.verify) {
      status?.update("checking the provider");
      await provider.verify();
    }
    stack = await startLocalStack({
      config,
      log,
      keep: true,
      env: {
        LOOPSMITH_CONFIG_JSON: JSON.stringify(flags),
        ...(opts.config ? { LOOPSMITH_CONFIG: resolve(opts.config) } : {}),
      },
      ...(status ? { onProgress: (p: StackProgress) => status.update(progressText(p)) } : {}),
    });
  } finally {
    status?.done();
  }
  const readyMs = Math.round(performance.now() - t0);
  try {
    writeStackRecord(config.dataDir, {
      v: 1,
      natsUrl: stack.natsUrl,
      ...(stack.natsContainerId ? { natsContainerId: stack.natsContainerId } : {}),
      ...(stack.usersFile ? { usersFile: stack.usersFile } : {}),
      pids: stack.pids,
      flags,
      logDir: stack.logDir,
      startedAt: new Date().toISOString(),
      readyMs,
    });
  } catch (err) {
    await stack.stop();
    throw err;
  }
  const scripted = provider.info.scripted
    ? ` (SCRIPTED: ${config.llm.scriptPath ? `replies from ${config.llm.scriptPath}` : "replies only from the tasks (Task.script)"}; no model is called)`
    : "";
  const from =
    stack.from === "build"
      ? ""
      : " (from the TypeScript sources: no current build in dist/app; `npm run build` makes the services start faster)";
  say(
    opts,
    "up",
    `up in ${(readyMs / 1000).toFixed(1)} s on ${shownNatsUrl(stack.natsUrl)}: ${stack.started.join(", ")}${from}${scripted}; logs in ${stack.logDir}; loopsmith down stops it`,
    {
      natsUrl: stack.natsUrl,
      started: stack.started,
      from: stack.from,
      pids: stack.pids,
      readyMs,
      scripted: provider.info.scripted,
    },
  );
  return ExitCode.ok;
}

/** What a status line says about a start in progress. */
export function progressText(p: StackProgress): string {
  if (p.phase === "nats") return "starting NATS";
  if (p.phase === "ready") return "ready";
  const waiting = p.want.filter((s) => !p.answered.includes(s));
  return `services answering ${p.answered.length}/${p.want.length}${waiting.length ? ` (waiting for ${waiting.join(", ")})` : ""}`;
}

/**
 * The wait's status line on stderr, from the start of the command: on a terminal a spinner
 * with the elapsed time redrawn every 100 ms (cleared when done); elsewhere one line now and
 * one per change of what is awaited.
 */
function statusLine(t0: number, withNats: boolean): { update(text: string): void; done(): void } {
  let text = `starting ${withNats ? "NATS and " : ""}the five services`;
  const tty = process.stderr.isTTY;
  if (!tty) {
    process.stderr.write(`loopsmith: ${text}…\n`);
    let last = text;
    return {
      update: (t) => {
        // One line per phase, not per poll: only the "answering n/5" count changes are shown.
        const head = t.replace(/ \(waiting for .*\)$/, "");
        if (head !== last) process.stderr.write(`loopsmith: ${t}\n`);
        last = head;
      },
      done: () => undefined,
    };
  }
  const frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏";
  let i = 0;
  const draw = (): void => {
    const secs = ((performance.now() - t0) / 1000).toFixed(1);
    process.stderr.write(`\r\x1b[2K${frames[i++ % frames.length]} loopsmith up: ${text}… ${secs} s`);
  };
  draw();
  const timer = setInterval(draw, 100);
  timer.unref();
  return {
    update: (t) => {
      text = t;
      draw();
    },
    done: () => {
      clearInterval(timer);
      process.stderr.write("\r\x1b[2K");
    },
  };
}

/**
 * True when `pid` runs (on Linux: and runs a loopsmith service's main module, from the
 * sources or from a build; see `serviceCode`).
 */
function isService(pid: number, name: string): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return argv.some((a) => a.endsWith(`services/${name}/src/main.ts`) || a.endsWith(`dist/${name}.js`));
  } catch {
    return true; // no /proc (macOS): the pid is alive, trust the record
  }
}

/**
 * Stops the recorded stack: SIGTERM to each service (they finish in order), SIGKILL to any
 * still running after {@link DOWN_GRACE_MS}, then removes the NATS container and the record.
 * @returns {@link ExitCode.ok}, also when no stack is up
 */
export async function downCommand(opts: StackCommandOptions, log: Logger): Promise<number> {
  const config = configOf(opts);
  const record = readStackRecord(config.dataDir);
  if (!record) {
    say(opts, "down", "no stack is up");
    return ExitCode.ok;
  }
  const live = Object.entries(record.pids).filter(([name, pid]) => isService(pid, name));
  for (const [, pid] of live) process.kill(pid, "SIGTERM");
  const deadline = Date.now() + DOWN_GRACE_MS;
  let left = live;
  while (left.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    left = left.filter(([name, pid]) => isService(pid, name));
  }
  for (const [name, pid] of left) {
    log.warn({ service: name, pid }, "a service did not stop after SIGTERM; killing it");
    process.kill(pid, "SIGKILL");
  }
  if (record.natsContainerId) {
    const c = new Docker().getContainer(record.natsContainerId);
    await c.stop({ t: 1 }).catch(() => undefined);
    await c.remove({ force: true }).catch(() => undefined);
  }
  removeStackRecord(config.dataDir);
  removeStackUsers(config.dataDir);
  say(
    opts,
    "down",
    `down: stopped ${live.map(([n]) => n).join(", ") || "no service (none was running)"}${record.natsContainerId ? " and NATS" : ""}`,
    { stopped: live.map(([n]) => n), killed: left.map(([n]) => n) },
  );
  return ExitCode.ok;
}

/** One service as `status` shows it. */
interface ServiceStatus {
  service: ServiceName;
  instances: number;
  version?: string;
  metadata?: Record<string, string>;
}

/** One executor instance as `status` shows it: its engine (INFO metadata) and load (STATS data). */
export interface ExecutorEngineStatus {
  /** The executor's `$SRV` id. */
  id: string;
  /** The engine's name (`docker info` Name). */
  engine: string;
  /** Where the engine is reached (`DOCKER_HOST`, masked, or `local socket`). */
  endpoint: string;
  freeSlots?: number;
  concurrency?: number;
  running?: number;
  queued?: number;
  /** False while the executor's engine does not answer. */
  healthy?: boolean;
  error?: string;
}

/**
 * Each service's `$SRV.INFO` answers on `nc` (instances counted, the last version and
 * metadata kept) and each executor's engine and load (its `$SRV.STATS` data); closes `nc`.
 * Services that do not answer are absent.
 */
async function serviceInfo(
  nc: NatsConnection,
): Promise<{ found: Map<ServiceName, ServiceStatus>; engines: ExecutorEngineStatus[] }> {
  const found = new Map<ServiceName, ServiceStatus>();
  const engines: ExecutorEngineStatus[] = [];
  try {
    const byName = new Map<string, ServiceName>(Object.entries(ServiceNames).map(([k, v]) => [v, k as ServiceName]));
    const client = new Svcm(nc as never).client({ strategy: "timer", maxWait: 500 });
    try {
      for await (const info of await client.info()) {
        const name = byName.get(info.name);
        if (!name) continue;
        const had = found.get(name);
        found.set(name, {
          service: name,
          instances: (had?.instances ?? 0) + 1,
          version: info.version,
          ...(info.metadata ? { metadata: info.metadata } : {}),
        });
        if (name === "executor")
          engines.push({
            id: info.id,
            engine: info.metadata?.engineName ?? "?",
            endpoint: info.metadata?.engineEndpoint ?? "?",
          });
      }
    } catch {
      // no responders: no service answers
    }
    // Each executor's engine, free slots and health (its `$SRV` STATS data).
    if (engines.length) {
      try {
        for await (const stats of await client.stats(ServiceNames.executor)) {
          const e = engines.find((x) => x.id === stats.id);
          const load = stats.endpoints?.[0]?.data as Partial<ExecutorEngineStatus> | undefined;
          if (e && load)
            Object.assign(e, {
              freeSlots: load.freeSlots,
              concurrency: load.concurrency,
              running: load.running,
              queued: load.queued,
              healthy: load.healthy,
              ...(load.error ? { error: load.error } : {}),
            });
        }
      } catch {
        // no STATS answer: INFO is shown alone
      }
    }
  } finally {
    await nc.close();
  }
  return { found, engines };
}

/** `status`'s human lines: NATS, a row per service, a line per executor with its engine and load. */
function printStatus(
  url: string,
  record: StackRecord | undefined,
  services: readonly ServiceStatus[],
  engines: readonly ExecutorEngineStatus[],
): void {
  process.stdout.write(`NATS ${shownNatsUrl(url)}${record ? ` · up since ${record.startedAt}` : ""}\n`);
  const rows = services.map((s) => {
    const meta = s.metadata
      ? Object.entries(s.metadata)
          .map(([k, v]) => `${k}=${v}`)
          .join(" ")
      : "";
    return [
      s.instances ? "✔" : "✖",
      s.service,
      s.instances ? `${s.instances} instance${s.instances === 1 ? "" : "s"}  ${meta}` : "does not answer",
    ];
  });
  for (const line of formatTable(rows, { minWidths: [1, 9], gap: " ", indent: "  " }))
    process.stdout.write(`${line}\n`);
  for (const e of engines) {
    const slots =
      e.freeSlots === undefined
        ? ""
        : ` · ${e.freeSlots}/${e.concurrency ?? "?"} slots free · ${e.running ?? 0} running, ${e.queued ?? 0} queued`;
    process.stdout.write(
      `    executor ${e.id} on engine ${e.engine} (${e.endpoint})${slots}${e.healthy === false ? ` · UNHEALTHY: ${e.error ?? "the engine does not answer"}` : ""}\n`,
    );
  }
}

/**
 * Shows each service's `$SRV.INFO` (instances, version, metadata) on the stack's NATS (the
 * configured NATS, else the recorded stack's).
 * @returns {@link ExitCode.ok} when all five services answer, else {@link ExitCode.infrastructure}
 */
export async function statusCommand(opts: StackCommandOptions): Promise<number> {
  const config = configOf(opts);
  const record = readStackRecord(config.dataDir);
  const url = config.natsUrl ?? record?.natsUrl;
  if (!url) {
    say(opts, "status", "no stack is up (loopsmith up starts one)", { up: false });
    return ExitCode.infrastructure;
  }
  let nc;
  try {
    const users = !config.natsUrl && record?.usersFile ? readStackUsers(record.usersFile) : undefined;
    const auth = config.natsUrl ? natsConnectOptions(config) : users ? roleConnectOptions(users, "client") : {};
    nc = await connect({ ...auth, servers: natsServers(url), timeout: 1_500, reconnect: false });
  } catch {
    say(
      opts,
      "status",
      `NATS at ${shownNatsUrl(url)} does not answer${record && !config.natsUrl ? " (a stale record: loopsmith down cleans it up)" : ""}`,
      { up: false, natsUrl: url },
    );
    return ExitCode.infrastructure;
  }
  const { found, engines } = await serviceInfo(nc);
  const services = (Object.keys(ServiceNames) as ServiceName[]).map(
    (name) => found.get(name) ?? { service: name, instances: 0 },
  );
  const allUp = services.every((s) => s.instances > 0);
  if (opts.json) {
    process.stdout.write(
      `${jsonLine({ kind: "status", up: allUp, natsUrl: url, startedAt: record?.startedAt, services, executors: engines })}\n`,
    );
  } else printStatus(url, record, services, engines);
  return allUp ? ExitCode.ok : ExitCode.infrastructure;
}
