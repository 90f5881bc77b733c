/**
 * What `loopsmith solve` starts when it is missing: a NATS container on the local Docker
 * engine (when `NATS_URL` is unset and no stack started by `loopsmith up` answers) and the
 * services that do not answer `$SRV.PING`, each as its own child process. Everything it
 * started is stopped by `stop()`. With `keep` (`loopsmith up`) what it starts outlives it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import { connect, type ConnectionOptions, type NatsConnection } from "@nats-io/transport-node";
import {
  DEFAULT_OWNER,
  ServiceNames,
  natsConnectOptions,
  natsIdentity,
  natsRefusal,
  pingService,
  setupBus,
  type ServiceName,
  type ServicePing,
  natsServers,
} from "@loopsmith/shared/bus";
import { LoopsmithError, installRoot, ownerOf, type Config } from "@loopsmith/shared/runtime";
import { newStackUsers, roleConnectOptions, roleEnv, writeStackUsers, type StackUsers } from "./stack-auth.js";
import { ensureStackImages, stackImages } from "./images.js";
import { startNatsContainer } from "./nats-container.js";
import { liveStack, takeOwnStackLock } from "./stack-record.js";
import { natsUnreachableMessage } from "./preflight.js";
import { conductorAtWork } from "./intake-queue.js";
import { currentBuild } from "../bin/build-stamp.js";

/** How long an external NATS (one the configuration names) gets to answer, in ms. */
const EXTERNAL_NATS_WAIT_MS = 2_000;
const ALL: ServiceName[] = ["memory", "executor", "builder", "reviewer", "architect"];

/** Which code a stack's services run, and how each is started. */
export interface ServiceCode {
  /**
   * `build`: the JavaScript `npm run build` made, current with the sources
   * (cli/bin/build-stamp.js), or this installation's own when it is a build (the image);
   * `source`: the TypeScript sources through tsx (no current build, or `LOOPSMITH_FROM_SOURCE=1`).
   */
  from: "build" | "source";
  /** Arguments to `node` (`process.execPath`) that start service `name`. */
  args(name: ServiceName): string[];
}

/**
 * Which code the services run, decided once (the build check hashes its ~200 sources). Alone
 * on a quiet machine a service answers its first `$SRV.PING` in 0.7–0.9 s from the build
 * against 1.6–2.3 s through tsx, and a cold `up` takes 0.65× the time (`npm run
 * bench:startup`); a stale build is never run.
 * @throws LoopsmithError `internal` when the installation's root cannot be found
 */
export function serviceCode(env: NodeJS.ProcessEnv = process.env): ServiceCode {
  const root = installRoot();
  // This process runs from a build (dist/app, or the image's /app): its services are beside it.
  const build = existsSync(join(root, "dist", "cli.js")) ? root : currentBuild(root, env);
  if (build) return { from: "build", args: (name) => [join(build, "dist", `${name}.js`)] };
  const tsx = fileURLToPath(import.meta.resolve("tsx"));
  return { from: "source", args: (name) => ["--import", tsx, join(root, "services", name, "src", "main.ts")] };
}

/** A started stack. */
export interface LocalStack {
  natsUrl: string;
  /** The services this stack started (not the ones that were already running). */
  started: ServiceName[];
  /** Which code the services this stack starts run (see {@link serviceCode}). */
  from: ServiceCode["from"];
  /** Where each started service writes its log. */
  logDir: string;
  /** The pid of each service this stack started. */
  pids: Partial<Record<ServiceName, number>>;
  /** The id of the NATS container this stack started, if it started one. */
  natsContainerId?: string;
  /** True when NATS is the one of a stack `loopsmith up` started (see `stack-record.ts`). */
  onRunningStack: boolean;
  /**
   * How a client connects to this stack's NATS (spread it before `servers`): the `client`
   * user of a stack the CLI started (stack-auth.ts), or the configured credentials of an
   * external NATS.
   */
  connectOptions: Partial<ConnectionOptions>;
  /**
   * The owner token this client's tasks carry (see `ownerOf`): `client` on a stack the CLI
   * started (it connects as the `client` user), the configured owner on an external NATS.
   */
  owner: string;
  /** With `keep`: the file that holds the passwords of its NATS users (mode 0600), for the stack record. */
  usersFile?: string;
  /** The NATS users of a stack the CLI started (pass them back as {@link StackOptions.users} to start services on it again). */
  users?: StackUsers;
  stop(): Promise<void>;
}

/** Where a start is, for {@link StackOptions.onProgress}. */
export interface StackProgress {
  phase: "nats" | "services" | "ready";
  natsUrl?: string;
  answered: ServiceName[];
  want: ServiceName[];
}

/** Options of {@link startLocalStack}. */
export interface StackOptions {
  config: Config;
  log: Logger;
  /** Services that must answer; the missing ones are started. @defaultValue all five */
  services?: ServiceName[];
  /** Environment for the children (the flags layer travels as LOOPSMITH_CONFIG_JSON). */
  env?: NodeJS.ProcessEnv;
  /** How long to wait for everything to answer, in ms. @defaultValue 60000 */
  readyTimeoutMs?: number;
  /**
   * Called as the start goes on (NATS up, each service answering), for a status line.
   * `answered` lists the wanted services that answer so far.
   */
  onProgress?: (p: StackProgress) => void;
  /**
   * `loopsmith up`: what is started outlives this process (services without the IPC channel
   * that stops them with their parent; a NATS container no orphan clean-up removes), and a
   * running stack is not reused. @defaultValue false
   */
  keep?: boolean;
  /**
   * The NATS users of the CLI-started stack at `config.natsUrl` (a {@link LocalStack.users}),
   * so that services started on it again connect as their own users.
   */
  users?: StackUsers;
  /**
   * Called when another command runs a stack of its own on the same data directory and this
   * one waits for it (its embedded memory opens in one process only). @defaultValue a line on stderr
   */
  onWait?: (holderPid: number) => void;
  /** Stops waiting for another command's stack (the start rejects with `cancelled`). */
  signal?: AbortSignal;
  /**
   * Told each line about images brought on first use (loading or building them, then the
   * time taken; `images.ts`). @defaultValue a line on stderr
   */
  onImages?: (line: string) => void;
}

/** The line a command prints while it waits for another command's stack. */
export function waitingLine(holderPid: number, dataDir: string): string {
  return (
    `loopsmith: another loopsmith command (process ${holderPid}) runs its own stack on ${dataDir}; ` +
    "waiting for it to finish (`loopsmith up` starts one stack that every command shares)"
  );
}

/**
 * Connects, retrying until `deadline` (ms since the epoch).
 * @throws LoopsmithError `unavailable`: for an external NATS the sentence says what was
 *   tried and how to start one; for the CLI's own container, that it did not come up
 */
async function waitForNats(
  url: string,
  deadline: number,
  external: boolean,
  config: Config,
  auth: Partial<ConnectionOptions>,
): Promise<NatsConnection> {
  for (;;) {
    try {
      return await connect({ ...auth, servers: natsServers(url), timeout: 1_000 });
    } catch (err) {
      const refused = natsRefusal(err, url, natsIdentity(config));
      if (refused) throw refused;
      if (Date.now() > deadline) {
        const why = `no NATS handshake (${(err as Error).message})`;
        const message = external
          ? natsUnreachableMessage(url, undefined, why)
          : `the NATS container at ${url} did not answer: ${why}`;
        throw new LoopsmithError("unavailable", message, { cause: err });
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * Names of the loopsmith services that answer `$SRV.PING` on this connection. With `want`,
 * it returns as soon as all of those have answered (a running stack answers in a few ms)
 * instead of waiting out the 500 ms collection window.
 */
export async function answeringServices(
  nc: NatsConnection,
  want?: readonly ServiceName[],
  maxWaitMs = 500,
): Promise<Set<ServiceName>> {
  const byName = new Map<string, ServiceName>(Object.entries(ServiceNames).map(([k, v]) => [v, k as ServiceName]));
  const namesOf = (pings: readonly ServicePing[]): Set<ServiceName> =>
    new Set(pings.map((p) => byName.get(p.name)).filter((n): n is ServiceName => n !== undefined));
  const enough = want?.length ? (pings: readonly ServicePing[]) => want.every((s) => namesOf(pings).has(s)) : undefined;
  return namesOf(await pingService(nc, "", { maxWaitMs, ...(enough ? { enough } : {}) }));
}

/**
 * How long a running stack that answered in part is asked again before the missing services
 * are started here, in ms: a NATS node failing over or a service restarting misses a ping
 * for a few seconds (bench/chaos.ts: every service answers again 1–11 s after a kill).
 */
export const PARTIAL_STACK_WAIT_MS = 12_000;

/**
 * How long a NATS cluster where no service answered is asked again before "no stack runs" is
 * the answer, in ms: a stack on a cluster whose node was just killed can miss pings entirely,
 * and taking that for no stack would start a whole second stack here, with this command's
 * credentials. tests/e2e/compose-cluster.test.ts kills `nats-2` under `solve`: 3 s is too short
 * for it on a loaded CI runner. A conductor at work also counts as a stack ({@link presentServices}).
 */
export const EMPTY_CLUSTER_WAIT_MS = 6_000;

/**
 * The services of a running stack: those that answer a ping. A stack runs when some answer,
 * or when none does but a conductor works the intake queue (`conductorAtWork`: a fetch
 * waiting or a task held on the conductor consumer). Then the missing services are most
 * likely between two pings (a NATS node failing over, a restart), so they are asked again
 * every 250 ms for up to `waitMs`: starting a second copy here, with this command's
 * credentials, would be wrong. When nothing shows a stack on a single server whose
 * connection held, the answer is given at once; on a cluster, or when the connection was
 * lost and made again during the ping, the services and the conductor are asked again for up
 * to `emptyWaitMs` first.
 */
export async function presentServices(
  nc: NatsConnection,
  want: readonly ServiceName[],
  waitMs = PARTIAL_STACK_WAIT_MS,
  emptyWaitMs = EMPTY_CLUSTER_WAIT_MS,
): Promise<Set<ServiceName>> {
  // A reconnect gets the INFO of another server (or of a restarted one: a new id).
  const server = nc.info?.server_id;
  const pause = (): Promise<void> => new Promise((r) => setTimeout(r, 250));
  const present = await answeringServices(nc, want);
  const moved = nc.info?.server_id !== server;
  const clustered = nc.info?.cluster !== undefined || (nc.info?.connect_urls?.length ?? 0) > 0;
  let running = present.size > 0 || (await conductorAtWork(nc));
  if (!running && (clustered || moved)) {
    const until = Date.now() + emptyWaitMs;
    while (!running && Date.now() < until) {
      await pause();
      for (const s of await answeringServices(nc, want)) present.add(s);
      running = present.size > 0 || (await conductorAtWork(nc, 500));
    }
  }
  if (!running) return present;
  const until = Date.now() + waitMs;
  while (want.some((s) => !present.has(s)) && Date.now() < until) {
    await pause();
    for (const s of await answeringServices(nc, want)) present.add(s);
  }
  return present;
}

function tail(path: string, lines = 5): string {
  try {
    return readFileSync(path, "utf8").trim().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  }
}

/** A service process this start spawned, and where it writes its log. */
interface StartedChild {
  name: ServiceName;
  child: ChildProcess;
  logFile: string;
}

/** What {@link spawnServices} starts services with. */
interface SpawnContext {
  opts: StackOptions;
  natsUrl: string;
  users: StackUsers | undefined;
  logDir: string;
  env: NodeJS.ProcessEnv;
  code: ServiceCode;
  /** Each spawned service is pushed here. */
  children: StartedChild[];
}

/**
 * Whether a stack runs that this start uses, and (for a stack of its own, which opens the
 * embedded memory under the data directory, which one process only may hold) the lock on the
 * data directory: a second command waits for the first's stack to stop (or for an `up` stack
 * to be ready, then uses it) instead of failing on the memory's lock. `deadline` is moved to
 * count from the end of that wait.
 */
async function claimStack(
  opts: StackOptions,
  want: readonly ServiceName[],
  deadline: number,
): Promise<{ running: Awaited<ReturnType<typeof liveStack>>; releaseOwn?: () => void; deadline: number }> {
  const { config } = opts;
  let running = config.natsUrl || opts.keep ? undefined : await liveStack(config.dataDir);
  if (config.natsUrl || running || config.databaseUrl || !want.includes("memory")) return { running, deadline };
  const releaseOwn = await takeOwnStackLock(config.dataDir, {
    onWait: opts.onWait ?? ((pid) => void process.stderr.write(`${waitingLine(pid, config.dataDir)}\n`)),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  // The time to come up counts from here, not from the wait.
  const after = Date.now() + (opts.readyTimeoutMs ?? 60_000);
  running = opts.keep ? undefined : await liveStack(config.dataDir);
  if (running) {
    releaseOwn();
    return { running, deadline: after };
  }
  return { running, releaseOwn, deadline: after };
}

/**
 * A stack of its own: the images its NATS and executor need, brought on first use (loaded or
 * built, and timed), then its NATS container. Against a configured NATS the services may run
 * elsewhere. On a failure the lock of {@link claimStack} is released.
 */
async function startOwnNats(
  opts: StackOptions,
  want: readonly ServiceName[],
  users: StackUsers | undefined,
  releaseOwn: (() => void) | undefined,
): Promise<Awaited<ReturnType<typeof startNatsContainer>>> {
  const { config, log } = opts;
  const needed = stackImages(config).filter((i) => i.kind === "nats" || want.includes("executor"));
  try {
    await ensureStackImages(config, needed, {
      say: opts.onImages ?? ((line) => void process.stderr.write(`${line}\n`)),
    });
    return await startNatsContainer(config, log, { keep: !!opts.keep, ...(users ? { users } : {}) });
  } catch (err) {
    releaseOwn?.();
    throw err;
  }
}

/** Stops each child: SIGTERM, then SIGKILL after 10 s; resolves once all have exited. */
async function stopChildren(children: readonly StartedChild[]): Promise<void> {
  await Promise.all(
    children.map(
      ({ child }) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          const kill = setTimeout(() => child.kill("SIGKILL"), 10_000);
          child.once("exit", () => {
            clearTimeout(kill);
            resolve();
          });
          child.kill("SIGTERM");
        }),
    ),
  );
}

/** Spawns these services, each writing to `<logDir>/<name>.log`, and adds them to `ctx.children`. */
async function spawnServices(names: readonly ServiceName[], ctx: SpawnContext): Promise<void> {
  const { opts, natsUrl, users, logDir, env, code } = ctx;
  mkdirSync(logDir, { recursive: true });
  // All log files are opened at once, then every service is spawned at once.
  const outs = await Promise.all(
    names.map(async (name) => {
      const out = createWriteStream(join(logDir, `${name}.log`), { flags: "a" });
      await new Promise((r) => out.once("open", r));
      return out;
    }),
  );
  for (const [i, name] of names.entries()) {
    const out = outs[i] as ReturnType<typeof createWriteStream>;
    opts.log.debug({ service: name, from: code.from }, "starting a service");
    // Own process group (a terminal's Ctrl-C reaches only the CLI, which stops the task
    // and then its children in order) and an IPC channel (a child whose parent dies, even
    // by SIGKILL, sees it close and shuts down).
    const child = spawn(process.execPath, code.args(name), {
      env: { ...env, NATS_URL: natsUrl, ...(users ? roleEnv(users, name) : {}) },
      stdio: opts.keep ? ["ignore", out, out] : ["ignore", out, out, "ipc"],
      detached: true,
    });
    child.unref();
    child.channel?.unref();
    ctx.children.push({ name, child, logFile: join(logDir, `${name}.log`) });
  }
}

/**
 * Waits until every wanted service answers, telling `progress` as they do.
 * @throws LoopsmithError `unavailable` when a started child exits (quoting its log) or at `deadline`
 */
async function waitForServices(
  nc: NatsConnection,
  want: readonly ServiceName[],
  ctx: { children: readonly StartedChild[]; deadline: number; logDir: string; natsUrl: string },
  progress: (p: Omit<StackProgress, "want">) => void,
): Promise<void> {
  const { children, deadline, logDir, natsUrl } = ctx;
  for (;;) {
    const dead = children.find((c) => c.child.exitCode !== null || c.child.signalCode !== null);
    if (dead) {
      const how = dead.child.signalCode ? `signal ${dead.child.signalCode}` : `code ${dead.child.exitCode}`;
      throw new LoopsmithError(
        "unavailable",
        `the ${dead.name} service exited at start (${how}): ${lastMessage(dead.logFile)}`,
      );
    }
    const up = await answeringServices(nc, want, 150);
    progress({ phase: "services", natsUrl, answered: want.filter((s) => up.has(s)) });
    if (want.every((s) => up.has(s))) break;
    if (Date.now() > deadline) {
      const late = want.filter((s) => !up.has(s));
      throw new LoopsmithError(
        "unavailable",
        `services did not answer in time: ${late.join(", ")} (logs in ${logDir})`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Starts what is missing and waits until every requested service answers.
 * @throws LoopsmithError `unavailable` when Docker, the NATS image or a service does not come up
 *   (the message quotes the service's last log lines).
 */
export async function startLocalStack(opts: StackOptions): Promise<LocalStack> {
  const { config, log } = opts;
  const want = opts.services ?? ALL;
  const progress = (p: Omit<StackProgress, "want">): void => opts.onProgress?.({ ...p, want });
  const firstDeadline = Date.now() + (opts.readyTimeoutMs ?? 60_000);
  progress({ phase: "nats", answered: [] });
  const { running, releaseOwn, deadline } = await claimStack(opts, want, firstDeadline);
  // The CLI's own NATS runs the permission matrix with passwords made for this start; a
  // running stack's come from its users file; an external NATS takes the configured credentials.
  const users = opts.users ?? (config.natsUrl ? undefined : running ? running.users : newStackUsers());
  const nats = config.natsUrl || running ? null : await startOwnNats(opts, want, users, releaseOwn);
  const natsUrl = config.natsUrl ?? running?.natsUrl ?? (nats as { url: string }).url;
  const connectOptions = users ? roleConnectOptions(users, "client") : config.natsUrl ? natsConnectOptions(config) : {};
  const external = !nats && !users;
  const children: StartedChild[] = [];
  const stop = async (): Promise<void> => {
    await stopChildren(children);
    await nats?.stop();
    releaseOwn?.();
  };
  const logDir = join(config.dataDir, "logs");
  const env = { ...process.env, ...opts.env };
  const code = serviceCode(env);
  const spawning: SpawnContext = { opts, natsUrl, users, logDir, env, code, children };
  try {
    // On a NATS container of its own, the services that touch no stream at start (all but
    // the architect, whose conductor binds the intake consumer the bus setup makes) start now,
    // while NATS starts and the bus is set up; they connect when NATS answers (connectNats
    // retries). This takes NATS's start off the critical path of a cold `up`.
    const early: ServiceName[] = nats ? want.filter((s) => s !== "architect") : [];
    await spawnServices(early, spawning);
    // The CLI manages its own stack as its admin: the bus setup, the pings.
    const manage = users ? roleConnectOptions(users, "admin") : connectOptions;
    const nc = await waitForNats(
      natsUrl,
      external ? Math.min(deadline, Date.now() + EXTERNAL_NATS_WAIT_MS) : deadline,
      external,
      opts.config,
      manage,
    );
    try {
      // Under the matrix only the admin may create the streams and buckets: before the architect.
      if (nats && users) await setupBus(nc);
      const present = nats ? new Set<ServiceName>() : await presentServices(nc, want);
      const missing = want.filter((s) => !present.has(s) && !early.includes(s));
      progress({ phase: "services", natsUrl, answered: want.filter((s) => present.has(s)) });
      await spawnServices(missing, spawning);
      await waitForServices(nc, want, { children, deadline, logDir, natsUrl }, progress);
      progress({ phase: "ready", natsUrl, answered: want });
      log.debug({ started: missing, natsUrl }, "stack ready");
      const pids = Object.fromEntries(children.flatMap((c) => (c.child.pid ? [[c.name, c.child.pid]] : [])));
      // Kept for later commands only once the stack answers (a failed start leaves no file).
      const usersFile = opts.keep && users && nats ? writeStackUsers(config.dataDir, users) : undefined;
      return {
        natsUrl,
        started: [...early, ...missing],
        from: code.from,
        logDir,
        pids,
        ...(nats ? { natsContainerId: nats.id } : {}),
        onRunningStack: !!running,
        connectOptions,
        owner: users ? (config.nats.owner ?? DEFAULT_OWNER) : ownerOf(config),
        ...(usersFile ? { usersFile } : {}),
        ...(users ? { users } : {}),
        stop,
      };
    } finally {
      await nc.close();
    }
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The `msg` of the last fatal/error JSON log line of a service, or its last lines. */
function lastMessage(logFile: string): string {
  const lines = tail(logFile, 20).split("\n").reverse();
  for (const line of lines) {
    try {
      const rec = JSON.parse(line) as { level?: number; msg?: string };
      if ((rec.level ?? 0) >= 50 && rec.msg) return rec.msg;
    } catch {
      /* not JSON */
    }
  }
  return lines.slice(0, 3).reverse().join(" | ");
}
