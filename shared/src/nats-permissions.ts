/**
 * Least privilege on the bus: one NATS user per service, one for clients and one for the
 * administrator, each with the subjects it may publish to and subscribe on. The matrix is
 * built from the subject, stream and bucket names in `subjects.ts`, and rendered as a
 * nats-server configuration (`deploy/nats.conf` is this module's output, checked by a test).
 *
 * What the matrix enforces (nats-server refuses the rest with a permission violation):
 * - a client submits tasks and improvement runs, reads events, asks the architect for a
 *   task's state, cancels, reads history and stats from memory, uploads repository
 *   snapshots, pings `$SRV`; it cannot publish events or results, call a builder, reviewer,
 *   executor or memory write endpoint, serve any endpoint, read another user's inbox or use
 *   the JetStream management API;
 * - only the architect (the conductor) publishes events and calls the builder, reviewer,
 *   executor and memory endpoints;
 * - each service subscribes only on its own endpoints;
 * - only the admin creates, updates, purges or deletes streams, buckets and durable consumers
 *   (`loopsmith bus setup`); a reader may create ephemeral consumers on what it reads.
 *
 * Not enforced: clients are one group; one client can read another client's task events
 * (the events subject carries no owner). nats-server does not check a push consumer's
 * delivery subject against its creator's permissions (see the README's limits).
 */
import { REPOS_BUCKET } from "./snapshot.js";
import { BEATS_PREFIX, ServiceNames, Streams, Subjects, SUBJECT_PREFIX, type ServiceName } from "./subjects.js";

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

/** The inbox prefix of a role's connection (`NATS_INBOX_PREFIX`): replies to one user go where no other user may subscribe. */
export function inboxPrefixOf(role: NatsRole): string {
  return `_INBOX_${role}`;
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
  return [`${API}.STREAM.INFO.${stream}`, `${API}.CONSUMER.INFO.${stream}.${consumer}`, `${API}.CONSUMER.MSG.NEXT.${stream}.${consumer}`, `$JS.ACK.${stream}.${consumer}.>`];
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
    subscribe: [`${SUBJECT_PREFIX}.${role}.>`, "$SRV.PING", "$SRV.INFO", "$SRV.STATS", `$SRV.*.${name}`, `$SRV.*.${name}.*`, `${inboxPrefixOf(role)}.>`],
    respond: true,
  };
}

/** Reading one object's metadata and putting objects (no consumers: a put needs none). */
function putObjects(bucket: string): string[] {
  const stream = objStream(bucket);
  return [`${API}.STREAM.INFO.${stream}`, `${API}.STREAM.MSG.GET.${stream}`, `${API}.DIRECT.GET.${stream}`, `${API}.DIRECT.GET.${stream}.>`, `$O.${bucket}.>`];
}

/** The streams whose existence the CLI checks before it submits (`ensureStreams`). */
const CHECKED = [Streams.tasks, Streams.events, Streams.improve, kvStream(Streams.taskStateBucket), kvStream(Streams.improveStateBucket)];

/**
 * The permission matrix.
 * @returns each role's {@link NatsPermission}; `admin` may do everything
 */
export function natsPermissions(): Record<NatsRole, NatsPermission> {
  const memoryReads = [Subjects.memory.history, Subjects.memory.failures, Subjects.memory.stats, Subjects.memory.run];
  const architect = serviceBase("architect");
  architect.publish.push(
    `${SUBJECT_PREFIX}.builder.>`,
    `${SUBJECT_PREFIX}.reviewer.>`,
    `${SUBJECT_PREFIX}.executor.>`,
    `${SUBJECT_PREFIX}.memory.>`,
    Subjects.eventsAll,
    Subjects.rejectsAll,
    // An improvement run's generations are tasks it submits.
    Subjects.tasksSubmit,
    `${API}.INFO`,
    ...consume(Streams.tasks, Streams.conductorConsumer),
    ...consume(Streams.improve, Streams.improveConsumer),
    ...readStream(Streams.events),
    ...kv(Streams.taskStateBucket),
    ...kv(Streams.improveStateBucket),
    ...kv(Streams.recordOutboxBucket),
    ...readStream(objStream(REPOS_BUCKET)),
    // An improvement run stores each accepted generation's tree as a snapshot.
    `$O.${REPOS_BUCKET}.>`,
  );
  architect.subscribe.push(`${BEATS_PREFIX}.>`);
  const executor = serviceBase("executor");
  executor.publish.push(`${API}.INFO`, ...readStream(objStream(REPOS_BUCKET)));
  const memory = serviceBase("memory");
  // Memory keeps each recorded run's events: it reads them from the events stream.
  memory.publish.push(`${API}.INFO`, ...readStream(Streams.events));
  const client: NatsPermission = {
    publish: [
      Subjects.tasksSubmit,
      Subjects.improveSubmit,
      `${SUBJECT_PREFIX}.architect.>`,
      ...memoryReads,
      "$SRV.>",
      `${API}.INFO`,
      ...CHECKED.map((s) => `${API}.STREAM.INFO.${s}`),
      `${API}.CONSUMER.INFO.${Streams.tasks}.${Streams.conductorConsumer}`,
      `${API}.CONSUMER.INFO.${Streams.improve}.${Streams.improveConsumer}`,
      ...readStream(Streams.events),
      ...putObjects(REPOS_BUCKET),
    ],
    subscribe: [`${inboxPrefixOf("client")}.>`, Subjects.rejectsAll],
    respond: false,
  };
  return {
    architect,
    builder: serviceBase("builder"),
    reviewer: serviceBase("reviewer"),
    executor,
    memory,
    client,
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

/** Options of {@link renderNatsServerConfig}. */
export interface NatsServerConfigOptions {
  /** JetStream's store directory inside the server (default `/data`). */
  storeDir?: string;
  /** The monitoring port (default 8222; 0 for none). */
  httpPort?: number;
  /**
   * TLS for client connections: the server's certificate and key files (paths inside the
   * server), and with `caFile` + `verify` clients must present a certificate signed by that
   * CA (mutual TLS; the processes then set `NATS_CERT` and `NATS_KEY`). The processes trust
   * the server with `NATS_CA`.
   */
  tls?: { certFile: string; keyFile: string; caFile?: string; verify?: boolean };
}

/**
 * The nats-server configuration for the matrix: JetStream on, one user per role whose
 * password is the environment variable {@link passwordVariable} (nats-server reads `$NAME`
 * from its environment, so the file holds no secret).
 */
export function renderNatsServerConfig(opts: NatsServerConfigOptions = {}): string {
  const q = (s: string): string => JSON.stringify(s);
  const list = (xs: string[]): string => `[\n${xs.map((x) => `          ${q(x)}`).join("\n")}\n        ]`;
  const perms = natsPermissions();
  const users = NATS_ROLES.map((role) => {
    const p = perms[role];
    return [
      "    {",
      `      user: ${q(role)}`,
      `      password: $${passwordVariable(role)}`,
      "      permissions: {",
      `        publish: { allow: ${list(p.publish)} }`,
      `        subscribe: { allow: ${list(p.subscribe)} }`,
      ...(p.respond && role !== "admin" ? ["        allow_responses: true"] : []),
      "      }",
      "    }",
    ].join("\n");
  });
  const httpPort = opts.httpPort ?? 8222;
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
    "# the subjects it may use (least privilege). Generated by `loopsmith bus config --out deploy/nats.conf`",
    "# from shared/src/nats-permissions.ts; do not edit by hand. Each password is read from",
    "# the server's environment (LOOPSMITH_NATS_<ROLE>_PASSWORD; deploy/compose-env.sh writes them).",
    "",
    `jetstream { store_dir: ${q(opts.storeDir ?? "/data")} }`,
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

