/**
 * Least privilege on the bus: one NATS user per service, one for clients and one for the
 * administrator, each with the subjects it may publish to and subscribe on. The matrix is
 * built from the subject, stream and bucket names in `subjects.ts`, and rendered as a
 * nats-server configuration (`deploy/nats.conf` is this module's output, checked by a test).
 *
 * What the matrix enforces (nats-server refuses the rest with a permission violation):
 * - a client submits tasks and improvement runs, follows their events, asks the architect for
 *   their state, cancels them, answers their dependency approval requests, reads their history, failures and stats from memory, uploads
 *   repository snapshots, pings `$SRV` — each through subjects that carry its owner token
 *   (`subjects.ts`), so it reaches only its own tasks; it cannot publish events or results,
 *   call a builder, reviewer, executor or memory write endpoint, serve any endpoint, read
 *   another user's inbox, create a JetStream consumer or use the JetStream management API;
 * - only the architect (the conductor) publishes events and calls the builder, reviewer,
 *   executor and memory endpoints;
 * - each service subscribes only on its own endpoints;
 * - only the admin creates, updates, purges or deletes streams, buckets and durable consumers
 *   (`loopsmith bus setup`); a reader may create ephemeral consumers on what it reads. One
 *   exception: the architect purges its own checkpoint blob store (`OBJ_loopsmith-checkpoints`),
 *   which is how an object store deletes an object's chunks (see {@link checkpointBlobs}).
 *
 * Several clients: `renderNatsServerConfig({ clients })` adds one user per name, each the owner
 * of its tasks. Not enforced (see the README's limits): the repository snapshot store is one
 * bucket, and uploading needs the object store's message reads, so a client can read another
 * client's snapshots by sequence number.
 */
import { LoopsmithError } from "../runtime/errors.js";
import { snapshotBucket } from "./snapshot.js";
import { CHECKPOINT_BLOBS_BUCKET } from "./streams.js";
import {
  BEATS_PREFIX,
  DEFAULT_OWNER,
  ServiceNames,
  Streams,
  Subjects,
  SUBJECT_PREFIX,
  checkOwner,
  type ServiceName,
} from "./subjects.js";

/** The NATS users of a loopsmith deployment: one per service, `client` and `admin`. */
export const NATS_ROLES = ["architect", "builder", "reviewer", "executor", "memory", "client", "admin"] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

/** What one user may do: subjects it may publish to and subscribe on (NATS wildcards). */
export interface NatsPermission {
  publish: string[];
  subscribe: string[];
  /** Whether it may answer requests it received (`allow_responses`): the services do. */
  respond: boolean;
}

/**
 * The inbox prefix of a user's connection (`NATS_INBOX_PREFIX`): replies to one user go where
 * no other user may subscribe. A role's, or a further client's (its name).
 */
export function inboxPrefixOf(user: string): string {
  return `_INBOX_${user}`;
}

const API = "$JS.API";
const kvStream = (bucket: string): string => `KV_${bucket}`;
const objStream = (bucket: string): string => `OBJ_${bucket}`;

/** Reading a stream: its info, single messages, and ordered (ephemeral) consumers on it. */
function readStream(stream: string): string[] {
  return [
    `${API}.STREAM.INFO.${stream}`,
    `${API}.STREAM.MSG.GET.${stream}`,
    `${API}.DIRECT.GET.${stream}`,
    `${API}.DIRECT.GET.${stream}.>`,
    // Ordered consumers: nats.js creates them without a name (`CREATE.<stream>`) or with one.
    `${API}.CONSUMER.CREATE.${stream}`,
    `${API}.CONSUMER.CREATE.${stream}.>`,
    `${API}.CONSUMER.INFO.${stream}.*`,
    `${API}.CONSUMER.MSG.NEXT.${stream}.*`,
    `${API}.CONSUMER.DELETE.${stream}.*`,
  ];
}

/** Taking work from a durable pull consumer an admin created: info, pulls, acks. */
function consume(stream: string, consumer: string): string[] {
  return [
    `${API}.STREAM.INFO.${stream}`,
    `${API}.CONSUMER.INFO.${stream}.${consumer}`,
    `${API}.CONSUMER.MSG.NEXT.${stream}.${consumer}`,
    `$JS.ACK.${stream}.${consumer}.>`,
  ];
}

/** Reading and writing a KV bucket's keys. */
function kv(bucket: string): string[] {
  return [...readStream(kvStream(bucket)), `$KV.${bucket}.>`];
}

/** What every service does: answer its own endpoints and `$SRV`, heartbeat, ping (its health check). */
function serviceBase(role: ServiceName): NatsPermission {
  const name = ServiceNames[role];
  return {
    publish: [`${BEATS_PREFIX}.>`, "$SRV.>"],
    // `$SRV` requests to every service and to its own name only: no service answers a ping
    // meant for another (the health of the executor is the executor's). The verbs are
    // literal: an allowed `$SRV.*` would also let a subscription on `$SRV.>` through (the
    // server matches the subscription's `>` token against the `*`).
    subscribe: [
      `${SUBJECT_PREFIX}.${role}.>`,
      "$SRV.PING",
      "$SRV.INFO",
      "$SRV.STATS",
      `$SRV.*.${name}`,
      `$SRV.*.${name}.*`,
      `${inboxPrefixOf(role)}.>`,
    ],
    respond: true,
  };
}

/** Reading one object's metadata and putting objects (no consumers: a put needs none). */
function putObjects(bucket: string): string[] {
  const stream = objStream(bucket);
  return [
    `${API}.STREAM.INFO.${stream}`,
    `${API}.STREAM.MSG.GET.${stream}`,
    `${API}.DIRECT.GET.${stream}`,
    `${API}.DIRECT.GET.${stream}.>`,
    `$O.${bucket}.>`,
  ];
}

/**
 * The architect's rights on the checkpoint blob store: read it (object info, ordered
 * consumers for the chunks, the listing), put objects, and delete them. nats.js deletes an
 * object by purging its chunks from the store's stream (`STREAM.PURGE` with a subject
 * filter), and purges the old chunks when an object is put again: the one purge right outside
 * the admin's, on a stream that holds nothing but the architect's own scratch data.
 */
function checkpointBlobs(): string[] {
  const stream = objStream(CHECKPOINT_BLOBS_BUCKET);
  return [...readStream(stream), `$O.${CHECKPOINT_BLOBS_BUCKET}.>`, `${API}.STREAM.PURGE.${stream}`];
}

/**
 * The intake streams whose existence a client checks before it submits (`checkIntake`). Not
 * the events stream nor the state buckets: their info lists subjects, which name other
 * owners' tasks.
 */
const CHECKED = [Streams.tasks, Streams.improve];

/**
 * What a client may do, all of it with its own owner token: submit tasks and improvement
 * runs, call the architect's and memory's client endpoints, follow its events (core
 * subscription), hear its rejected messages, ping `$SRV`, check the intake streams, upload
 * snapshots.
 * @param owner - the client's user name, which is the owner token of its tasks
 * @throws Error when `owner` is not a valid owner token
 */
export function clientPermission(owner: string): NatsPermission {
  checkOwner(owner);
  const owned = [
    Subjects.architect.status,
    Subjects.architect.cancel,
    Subjects.architect.events,
    Subjects.architect.improveStatus,
    Subjects.architect.approve,
    Subjects.memory.history,
    Subjects.memory.failures,
    Subjects.memory.stats,
    Subjects.memory.run,
  ];
  return {
    publish: [
      `${Subjects.tasksSubmit}.${owner}`,
      `${Subjects.improveSubmit}.${owner}`,
      ...owned.map((subject) => `${subject}.${owner}`),
      "$SRV.>",
      `${API}.INFO`,
      ...CHECKED.map((s) => `${API}.STREAM.INFO.${s}`),
      `${API}.CONSUMER.INFO.${Streams.tasks}.${Streams.conductorConsumer}`,
      `${API}.CONSUMER.INFO.${Streams.improve}.${Streams.improveConsumer}`,
      ...putObjects(snapshotBucket(owner)),
    ],
    subscribe: [
      `${inboxPrefixOf(owner)}.>`,
      `${SUBJECT_PREFIX}.events.${owner}.>`,
      `${SUBJECT_PREFIX}.rejects.*.${owner}`,
    ],
    respond: false,
  };
}

/**
 * The permission matrix.
 * @param clients - further client users (see {@link checkClientNames}): the architect and the
 *   executor read their snapshot stores too
 * @returns each role's {@link NatsPermission}; `admin` may do everything
 * @throws Error for a client name that is not a valid owner or is a role's
 */
export function natsPermissions(clients: readonly string[] = []): Record<NatsRole, NatsPermission> {
  const stores = [DEFAULT_OWNER, ...checkClientNames(clients)].map((owner) => snapshotBucket(owner));
  const architect = serviceBase("architect");
  architect.publish.push(
    `${SUBJECT_PREFIX}.builder.>`,
    `${SUBJECT_PREFIX}.reviewer.>`,
    `${SUBJECT_PREFIX}.executor.>`,
    `${SUBJECT_PREFIX}.memory.>`,
    Subjects.eventsAll,
    Subjects.rejectsAll,
    // An improvement run's generations are tasks it submits (as the run's owner).
    `${Subjects.tasksSubmit}.>`,
    `${API}.INFO`,
    ...consume(Streams.tasks, Streams.conductorConsumer),
    ...consume(Streams.improve, Streams.improveConsumer),
    ...readStream(Streams.events),
    ...kv(Streams.taskStateBucket),
    ...kv(Streams.improveStateBucket),
    ...kv(Streams.recordOutboxBucket),
    ...checkpointBlobs(),
    ...stores.flatMap((store) => readStream(objStream(store))),
    // An improvement run stores each accepted generation's tree as a snapshot (its owner's).
    ...stores.map((store) => `$O.${store}.>`),
  );
  architect.subscribe.push(`${BEATS_PREFIX}.>`);
  const executor = serviceBase("executor");
  executor.publish.push(`${API}.INFO`, ...stores.flatMap((store) => readStream(objStream(store))));
  const memory = serviceBase("memory");
  // Memory keeps each recorded run's events: it reads them from the events stream.
  memory.publish.push(`${API}.INFO`, ...readStream(Streams.events));
  return {
    architect,
    builder: serviceBase("builder"),
    reviewer: serviceBase("reviewer"),
    executor,
    memory,
    client: clientPermission(DEFAULT_OWNER),
    admin: { publish: [">"], subscribe: [">"], respond: true },
  };
}

/**
 * The environment variable that holds a role's password in the server configuration and in
 * compose's `.env`. nats-server parses the variable's value as a configuration token: use a
 * letter first, then letters and digits only (a value like `1e5…` is read as a number).
 */
export function passwordVariable(role: NatsRole): string {
  return `LOOPSMITH_NATS_${role.toUpperCase()}_PASSWORD`;
}

/** The password variable of a further client user (`LOOPSMITH_NATS_CLIENT_<NAME>_PASSWORD`, `-` as `_`). */
export function clientPasswordVariable(name: string): string {
  return `LOOPSMITH_NATS_CLIENT_${checkOwner(name).toUpperCase().replace(/-/g, "_")}_PASSWORD`;
}

/**
 * Checks the names of further client users: valid owner tokens, none a role's name, no two
 * the same (also not after upper-casing, which their password variables do).
 * @throws Error naming the first bad name
 */
export function checkClientNames(names: readonly string[]): string[] {
  const seen = new Set<string>();
  for (const name of names) {
    checkOwner(name);
    if ((NATS_ROLES as readonly string[]).includes(name))
      throw new Error(`the client name "${name}" is a role's name: choose another`);
    const key = clientPasswordVariable(name);
    if (seen.has(key))
      throw new Error(`the client name "${name}" is given twice (names differ in case or "-"/"_" only)`);
    seen.add(key);
  }
  return [...names];
}

/** Options of {@link renderNatsServerConfig}. */
export interface NatsServerConfigOptions {
  /** JetStream's store directory inside the server (default `/data`). */
  storeDir?: string;
  /** The monitoring port (default 8222; 0 for none). */
  httpPort?: number;
  /**
   * JetStream's `sync_interval`: how often nats-server forces its stream files to disk
   * (`fsync`). `always` syncs every message before it is acknowledged, so a power loss or a
   * kernel crash of the host loses no acknowledged message; a duration (`2m`, nats-server's own
   * default, or `10s`) acknowledges from the page cache and can lose that window's messages
   * when the host (or, on a cluster, every node) goes down at once (github.com/nats-io/nats-server/issues/7564).
   * Measured on one server (1,000 acknowledged 1 KiB publishes in a row): 2.9 s with `always`
   * against 1.9 s with the default, while one loopsmith task publishes tens of messages over
   * minutes of model calls, so the default here is `always` (docs/OPERATIONS.md, "Durability").
   * @defaultValue "always"
   */
  syncInterval?: string;
  /**
   * TLS for client connections: the server's certificate and key files (paths inside the
   * server), and with `caFile` + `verify` clients must present a certificate signed by that
   * CA (mutual TLS; the processes then set `NATS_CERT` and `NATS_KEY`). The processes trust
   * the server with `NATS_CA`.
   */
  tls?: { certFile: string; keyFile: string; caFile?: string; verify?: boolean };
  /**
   * Further client users besides `client`, by name: each is the owner of its own tasks and
   * reads its password from {@link clientPasswordVariable}.
   */
  clients?: string[];
  /**
   * A JetStream cluster: every node reads the same file; its name comes from the environment
   * variable `NATS_SERVER_NAME` (JetStream needs one per node), its routes are the other
   * nodes' cluster addresses (`nats-route://nats-2:6222`; a node's own address is ignored).
   */
  cluster?: { name: string; routes: string[]; port?: number };
}

/**
 * What `deploy/nats-cluster.conf` is rendered from: the three nodes of
 * `deploy/compose.cluster.yml` (`nats`, `nats-2`, `nats-3`), routes on port 6222.
 */
export const CLUSTER_CONF: NatsServerConfigOptions = {
  cluster: {
    name: "loopsmith",
    routes: ["nats-route://nats:6222", "nats-route://nats-2:6222", "nats-route://nats-3:6222"],
  },
};

/**
 * The nats-server configuration for the matrix: JetStream on, one user per role whose
 * password is the environment variable {@link passwordVariable} (nats-server reads `$NAME`
 * from its environment, so the file holds no secret).
 * @throws LoopsmithError `bad_request` for a `syncInterval` that is neither `always` nor a duration
 */
export function renderNatsServerConfig(opts: NatsServerConfigOptions = {}): string {
  const q = (s: string): string => JSON.stringify(s);
  const list = (xs: string[]): string => `[\n${xs.map((x) => `          ${q(x)}`).join("\n")}\n        ]`;
  const perms = natsPermissions(opts.clients ?? []);
  const user = (name: string, variable: string, p: NatsPermission, admin = false): string =>
    [
      "    {",
      `      user: ${q(name)}`,
      `      password: $${variable}`,
      "      permissions: {",
      `        publish: { allow: ${list(p.publish)} }`,
      `        subscribe: { allow: ${list(p.subscribe)} }`,
      ...(p.respond && !admin ? ["        allow_responses: true"] : []),
      "      }",
      "    }",
    ].join("\n");
  const users = [
    ...NATS_ROLES.map((role) => user(role, passwordVariable(role), perms[role], role === "admin")),
    ...checkClientNames(opts.clients ?? []).map((name) =>
      user(name, clientPasswordVariable(name), clientPermission(name)),
    ),
  ];
  const httpPort = opts.httpPort ?? 8222;
  const sync = opts.syncInterval ?? "always";
  if (!/^(always|[1-9][0-9]*(ms|s|m|h))$/.test(sync)) {
    throw new LoopsmithError(
      "bad_request",
      `sync interval ${JSON.stringify(sync)}: use always or a duration (10s, 2m)`,
    );
  }
  const tls = opts.tls
    ? [
        "tls {",
        `  cert_file: ${q(opts.tls.certFile)}`,
        `  key_file: ${q(opts.tls.keyFile)}`,
        ...(opts.tls.caFile ? [`  ca_file: ${q(opts.tls.caFile)}`] : []),
        ...(opts.tls.verify ? ["  verify: true"] : []),
        "}",
        "",
      ]
    : [];
  return [
    "# loopsmith's NATS: JetStream and one user per service, `client` and `admin`, each with",
    opts.cluster
      ? "# the subjects it may use (least privilege). Generated by `loopsmith bus config --cluster-routes <routes> --out deploy/nats-cluster.conf`"
      : "# the subjects it may use (least privilege). Generated by `loopsmith bus config --out deploy/nats.conf`",
    "# from shared/src/bus/nats-permissions.ts; do not edit by hand. Each password is read from",
    "# the server's environment (LOOPSMITH_NATS_<ROLE>_PASSWORD; deploy/compose-env.sh writes them).",
    "",
    ...(opts.cluster
      ? [
          "# One of the nodes of a JetStream cluster: each reads this file with its own NATS_SERVER_NAME.",
          "server_name: $NATS_SERVER_NAME",
          "cluster {",
          `  name: ${q(opts.cluster.name)}`,
          `  listen: ${q(`0.0.0.0:${opts.cluster.port ?? 6222}`)}`,
          `  routes: [${opts.cluster.routes.map(q).join(", ")}]`,
          "}",
          "",
        ]
      : []),
    sync === "always"
      ? '# Every acknowledged message is on disk (docs/OPERATIONS.md, "Durability: what a crash can lose").'
      : `# Forced to disk every ${sync}: a power loss can lose that window (docs/OPERATIONS.md, "Durability").`,
    `jetstream { store_dir: ${q(opts.storeDir ?? "/data")}, sync_interval: ${sync} }`,
    ...(httpPort ? [`http_port: ${httpPort}`] : []),
    "",
    ...tls,
    "authorization {",
    "  users: [",
    users.join("\n"),
    "  ]",
    "}",
    "",
  ].join("\n");
}
