/**
 * `loopsmith bus setup`, `bus members` and `bus config`: the JetStream streams, consumers and
 * buckets created by the one user allowed to (the admin, under the permission matrix); who
 * is in a cluster's JetStream meta group (read from its nodes' monitoring ports); and the
 * nats-server configuration that carries the matrix (`deploy/nats.conf` is its output).
 *
 * Exit codes: 0 done; 1 (`bus members`) a node is left out of the meta group; 2 bad
 * configuration, refused credentials, or a user without the right to manage JetStream
 * (`permission_denied`); 3 NATS does not answer (`bus members`: no meta leader known).
 */
import { writeFileSync } from "node:fs";
import type { Command } from "commander";
import type { Logger } from "pino";
import { usageError, type CommandRunner } from "../errors.js";
import { ExitCode } from "../exit-codes.js";
import { wholeNumber } from "../preflight.js";

/** A repeatable `--client <name>` option's value list. */
const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/**
 * The further client users: `--client` values, else `LOOPSMITH_CLIENTS` (names separated by
 * commas or spaces), so `bus config` and `bus setup` can read the same list from the environment.
 * @throws CliError (usage, exit 2) naming a bad name
 */
async function clientsOf(given: string[] | undefined): Promise<string[]> {
  const { checkClientNames } = await import("@loopsmith/shared/bus");
  const clients = given ?? (process.env.LOOPSMITH_CLIENTS ?? "").split(/[\s,]+/).filter(Boolean);
  try {
    return checkClientNames(clients);
  } catch (err) {
    throw usageError((err as Error).message);
  }
}

/** Registers `bus setup`, `bus members` and `bus config`. */
export function registerBus(program: Command, run: CommandRunner, logger: () => Promise<Logger>): void {
  const bus = program
    .command("bus")
    .description("the NATS side of a deployment: JetStream setup and the server's permission configuration");
  registerBusSetup(bus, run, logger);
  registerBusMembers(bus, run);
  registerBusConfig(bus, run);
}

/** `bus setup`'s flags. */
interface BusSetupFlags {
  wait: number;
  config?: string;
  json?: boolean;
  client?: string[];
}

/** Registers `bus setup`: every stream, consumer and bucket, created or updated. */
function registerBusSetup(bus: Command, run: CommandRunner, logger: () => Promise<Logger>): void {
  bus
    .command("setup")
    .description(
      "create or update every stream, consumer and bucket loopsmith uses (needs the right to manage JetStream: the admin user)",
    )
    .option("--wait <ms>", "keep trying a NATS that does not answer yet for this long, in ms", wholeNumber(0), 30_000)
    .option("--config <file>", "configuration file (JSON)")
    .option("--json", "print JSON")
    .option(
      "--client <name>",
      "a further client user whose snapshot store to create (repeatable; default: LOOPSMITH_CLIENTS)",
      collect,
    )
    .action(async (opts: BusSetupFlags) => run(opts.json, () => busSetup(opts, logger)));
}

/** `bus setup`'s work: connects to NATS_URL and ensures what the bus needs. */
async function busSetup(opts: BusSetupFlags, logger: () => Promise<Logger>): Promise<ExitCode> {
  const [{ LoopsmithError, connectNats, loadConfig }, { setupBus }] = await Promise.all([
    import("@loopsmith/shared/runtime"),
    import("@loopsmith/shared/bus"),
  ]);
  const clients = await clientsOf(opts.client);
  const { jsonLine } = await import("../terminal.js");
  const config = loadConfig(opts.config ? { file: opts.config } : {});
  if (!config.natsUrl)
    throw new LoopsmithError("config_invalid", "NATS_URL is not set: bus setup works on a NATS server");
  const log = await logger();
  const nc = await connectNats(config.natsUrl, "loopsmith-bus-setup", { waitMs: opts.wait, log, config });
  try {
    const ensured = await setupBus(nc, { clients, replicas: config.nats.replicas, waitMs: opts.wait });
    if (opts.json) process.stdout.write(`${jsonLine({ kind: "bus_setup", ensured })}\n`);
    else process.stdout.write(`bus ready: ${ensured.join(", ")}\n`);
  } finally {
    await nc.close();
  }
  return ExitCode.ok;
}

/** `bus members`' flags. */
interface BusMembersFlags {
  monitor: string;
  wait: number;
  settle: number;
  json?: boolean;
}

/** Registers `bus members`: the JetStream meta group, read from the nodes' monitoring ports. */
function registerBusMembers(bus: Command, run: CommandRunner): void {
  bus
    .command("members")
    .description(
      "who is in the JetStream meta group, from each node's monitoring port; exit 1 names the nodes left out (restart those), 3 when no leader is known",
    )
    .requiredOption(
      "--monitor <urls>",
      "every node's monitoring URL, comma-separated (http://nats:8222,http://nats-2:8222,…)",
    )
    .option("--wait <ms>", "how long to wait for a leader and a settled group, in ms", wholeNumber(0), 30_000)
    .option(
      "--settle <ms>",
      "how long a node must stay out before it counts as left out, in ms",
      wholeNumber(0),
      10_000,
    )
    .option("--json", "print JSON")
    .action(async (opts: BusMembersFlags) => run(opts.json, () => busMembers(opts)));
}

/** `bus members`' work: waits for a settled group and prints it; the exit code says how it settled. */
async function busMembers(opts: BusMembersFlags): Promise<ExitCode> {
  const { settleMembership } = await import("@loopsmith/shared/bus");
  const { jsonLine } = await import("../terminal.js");
  const urls = opts.monitor
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean);
  const bad = urls.find((u) => !/^https?:\/\/[^\s/]+(?::\d+)?\/?$/.test(u));
  if (!urls.length || bad)
    throw usageError(`--monitor: ${bad ?? "(empty)"} is not a monitoring URL (http://<host>:8222)`);
  const { outcome, membership: m } = await settleMembership(urls, { waitMs: opts.wait, settleMs: opts.settle });
  if (opts.json) process.stdout.write(`${jsonLine({ kind: "bus_members", outcome, ...m })}\n`);
  else {
    process.stdout.write(
      m.leader ? `meta leader ${m.leader}; members: ${m.members.join(", ")}\n` : "no meta leader known\n",
    );
    if (m.leftOut.length)
      process.stdout.write(
        `left out of the meta group: ${m.leftOut.join(", ")} (restart ${m.leftOut.length === 1 ? "it" : "them"} alone)\n`,
      );
    for (const n of m.nodes.filter((x) => x.error)) process.stdout.write(`no answer from ${n.url}: ${n.error}\n`);
  }
  return outcome === "complete" ? ExitCode.ok : outcome === "left_out" ? ExitCode.failed : ExitCode.infrastructure;
}

/** `bus config`'s flags. */
interface BusConfigFlags {
  out?: string;
  storeDir: string;
  httpPort: number;
  syncInterval: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsCa?: string;
  tlsVerify?: boolean;
  client?: string[];
  clusterRoutes?: string;
  clusterName: string;
}

/** Registers `bus config`: the nats-server configuration that carries the permission matrix. */
function registerBusConfig(bus: Command, run: CommandRunner): void {
  bus
    .command("config")
    .description(
      "print the nats-server configuration with one user per service, `client` and `admin`, and their permissions",
    )
    .option("--out <file>", "write it to this file instead of stdout")
    .option("--store-dir <dir>", "JetStream's store directory inside the server", "/data")
    .option("--http-port <port>", "the monitoring port (0: none)", wholeNumber(0, 65535), 8222)
    .option(
      "--sync-interval <interval>",
      "JetStream's sync_interval: always (every acknowledged message on disk) or a duration such as 2m (faster; a power loss can lose that window)",
      "always",
    )
    .option("--tls-cert <file>", "TLS: the server's certificate (a path inside the server); clients then set NATS_CA")
    .option("--tls-key <file>", "TLS: the server's private key")
    .option("--tls-ca <file>", "TLS: the CA that signs client certificates")
    .option("--tls-verify", "TLS: require a client certificate signed by --tls-ca (clients set NATS_CERT and NATS_KEY)")
    .option(
      "--cluster-routes <urls>",
      "a JetStream cluster node: the nodes' route URLs, comma-separated (nats-route://nats-2:6222,…); each node reads the file with its own NATS_SERVER_NAME",
    )
    .option("--cluster-name <name>", "with --cluster-routes: the cluster's name", "loopsmith")
    .option(
      "--client <name>",
      "a further client user, the owner of its own tasks (repeatable; its password is LOOPSMITH_NATS_CLIENT_<NAME>_PASSWORD; default: LOOPSMITH_CLIENTS)",
      collect,
    )
    .action(async (opts: BusConfigFlags) => run(false, () => busConfig(opts)));
}

/**
 * `bus config`'s TLS block from its flags, none without `--tls-cert`.
 * @throws CliError (usage, exit 2) for a combination of the TLS flags that does not go together
 */
function tlsOf(
  opts: BusConfigFlags,
): { certFile: string; keyFile: string; caFile?: string; verify?: true } | undefined {
  if (!opts.tlsCert !== !opts.tlsKey) throw usageError("--tls-cert and --tls-key go together");
  if ((opts.tlsCa || opts.tlsVerify) && !opts.tlsCert)
    throw usageError("--tls-ca and --tls-verify need --tls-cert and --tls-key");
  if (opts.tlsVerify && !opts.tlsCa)
    throw usageError("--tls-verify needs --tls-ca (the CA that signs client certificates)");
  return opts.tlsCert && opts.tlsKey
    ? {
        certFile: opts.tlsCert,
        keyFile: opts.tlsKey,
        ...(opts.tlsCa ? { caFile: opts.tlsCa } : {}),
        ...(opts.tlsVerify ? { verify: true } : {}),
      }
    : undefined;
}

/**
 * `bus config`'s route URLs from `--cluster-routes` (none without it).
 * @throws CliError (usage, exit 2) for a URL that is not a route URL, or fewer than two
 */
function routesOf(clusterRoutes: string | undefined): string[] {
  const routes = (clusterRoutes ?? "")
    .split(",")
    .map((r) => r.trim())
    .filter(Boolean);
  const badRoute = routes.find((r) => !/^nats-route:\/\/[^\s/]+:\d+$/.test(r));
  if (badRoute) throw usageError(`--cluster-routes: ${badRoute} is not a route URL (nats-route://<host>:<port>)`);
  if (clusterRoutes !== undefined && routes.length < 2)
    throw usageError(
      "--cluster-routes needs the route URL of every node (at least two; three for a JetStream cluster that survives a node)",
    );
  return routes;
}

/** `bus config`'s work: renders the configuration, to stdout or `--out`. */
async function busConfig(opts: BusConfigFlags): Promise<ExitCode> {
  const { renderNatsServerConfig } = await import("@loopsmith/shared/bus");
  const clients = await clientsOf(opts.client);
  const tls = tlsOf(opts);
  const routes = routesOf(opts.clusterRoutes);
  const cluster = routes.length ? { cluster: { name: opts.clusterName, routes } } : {};
  const text = renderNatsServerConfig({
    storeDir: opts.storeDir,
    httpPort: opts.httpPort,
    syncInterval: opts.syncInterval,
    ...(tls ? { tls } : {}),
    ...(clients.length ? { clients } : {}),
    ...cluster,
  });
  if (!opts.out) process.stdout.write(text);
  else {
    try {
      writeFileSync(opts.out, text);
    } catch (err) {
      throw usageError(`cannot write ${opts.out}: ${(err as Error).message}`);
    }
  }
  return ExitCode.ok;
}
