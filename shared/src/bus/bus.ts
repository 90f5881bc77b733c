/**
 * The typed bus: request/reply endpoints served through `@nats-io/services` (queue groups,
 * `$SRV` PING/INFO/STATS) with zod validation in both directions and typed errors.
 *
 * Replies are `{ok: true, value}` or `{ok: false, error: {code, message, retryable}}`.
 * A request that is not JSON or fails its schema is answered with `bad_request`; the
 * handler never sees it and the service keeps serving.
 */
import { randomBytes } from "node:crypto";
import type { Msg, MsgHdrs, NatsConnection } from "@nats-io/transport-node";
import {
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  InvalidArgumentError,
  NoRespondersError,
  RequestError,
  TimeoutError,
  headers,
} from "@nats-io/transport-node";
import { Svcm, type Service, type ServiceMsg } from "@nats-io/services";
import type { Logger } from "pino";
import { z } from "zod";
import pRetry from "p-retry";
import { LoopsmithError, busyReason, toErrorData, type ErrorData } from "../runtime/errors.js";
import { Reply } from "../contracts/common.js";
import { BEATS_PREFIX, DEFAULT_OWNER, OWNER_PATTERN } from "./subjects.js";
import { requestSubject, servedSubject, type EndpointDef } from "./endpoints.js";
import { permissionDenied } from "./nats-errors.js";
import { repliesToInboxesOnly } from "./reply-guard.js";

/** A handler: gets the parsed request, returns the response value or throws. */
export type Handler<E extends EndpointDef> = (
  request: z.infer<E["request"]>,
  ctx: HandlerContext,
) => Promise<z.input<E["response"]>>;

/** What a handler knows besides the request. */
export interface HandlerContext {
  log: Logger;
  /** The endpoint's subject (without the owner token). */
  subject: string;
  /** An owned endpoint's caller (the subject's last token); {@link DEFAULT_OWNER} for the others. */
  owner: string;
}

/** Pairs an endpoint with its handler, keeping their types together. */
export interface Registration {
  def: EndpointDef;
  handler: Handler<EndpointDef>;
}

/** Typed helper to build a {@link Registration}. */
export function handle<E extends EndpointDef>(def: E, handler: Handler<E>): Registration {
  return { def, handler: handler as unknown as Handler<EndpointDef> };
}

const encoder = new TextEncoder();

function encodeReply(reply: Reply<unknown>): Uint8Array {
  return encoder.encode(JSON.stringify(reply));
}

/** HTTP-like status for `$SRV` error stats: 400 for the caller's fault, 500 otherwise. */
function statusOf(error: ErrorData): number {
  return error.code === "bad_request" || error.code === "workspace_invalid" ? 400 : 500;
}

/**
 * Header of a request whose caller wants a sign of life while the handler works: its value
 * is a subject under `loopsmith.beats.` the service publishes an empty message to every {@link HEARTBEAT_EVERY_MS}
 * until it replies (see {@link CallOptions.livenessMs}).
 */
export const HEARTBEAT_HEADER = "Loopsmith-Heartbeat";
/** How often a service signals that it is still working on a request, in ms. */
export const HEARTBEAT_EVERY_MS = 2_000;
/**
 * Header (value "1") of a reply sent to the heartbeat subject instead of the request's reply
 * subject: the service's connection to NATS was lost and made again since the request came,
 * and nats-server lets a user answer a request (`allow_responses`) only on the connection that
 * received it, so the reply subject is refused now. The body is the reply as usual.
 */
export const REPLY_HEADER = "Loopsmith-Reply";

/**
 * How a service sends what is not the reply itself: heartbeats, and replies that must go to
 * the heartbeat subject ({@link REPLY_HEADER}).
 */
export interface ReplyLink {
  /** Publishes to `subject` (a heartbeat when `body` is absent); never throws. */
  publish(subject: string, body?: Uint8Array, hdrs?: MsgHdrs): void;
  /** A number that changes whenever the connection is lost (and made again). */
  epoch(): number;
}

/**
 * Decodes, validates and answers one request. Never throws: every failure becomes a typed
 * error reply. While the handler works, publishes heartbeats to the subject the request names
 * in {@link HEARTBEAT_HEADER} (through `link`), so the caller can tell a slow step from a
 * dead service; when the connection was lost and made again meanwhile, the reply goes to that
 * subject too, marked with {@link REPLY_HEADER} (the reply subject would be refused).
 */
export async function answer(
  msg: ServiceMsg,
  def: EndpointDef,
  handler: Handler<EndpointDef>,
  log: Logger,
  link?: ReplyLink,
): Promise<void> {
  const raw = msg.headers?.get(HEARTBEAT_HEADER);
  const beatTo = raw && link && raw.startsWith(`${BEATS_PREFIX}.`) ? raw : undefined;
  const beat = beatTo && link ? setInterval(() => link.publish(beatTo), HEARTBEAT_EVERY_MS) : undefined;
  const arrived = link?.epoch();
  const send: Sender = (body, error) => {
    if (beatTo && link && link.epoch() !== arrived) {
      const h = headers();
      h.set(REPLY_HEADER, "1");
      link.publish(beatTo, body, h);
      return;
    }
    if (error) msg.respondError(error.status, error.description, body);
    else msg.respond(body);
  };
  try {
    await answerOnce(msg, def, handler, log, send);
  } finally {
    clearInterval(beat);
  }
}

/** Sends a reply's body; with `error`, as a `$SRV` error reply (status and description headers). */
type Sender = (body: Uint8Array, error?: { status: number; description: string }) => void;

async function answerOnce(
  msg: ServiceMsg,
  def: EndpointDef,
  handler: Handler<EndpointDef>,
  log: Logger,
  send: Sender,
): Promise<void> {
  const fail = (error: ErrorData): void => {
    // The description travels in a header: one line, bounded.
    const description = error.message.replace(/[\r\n]+/g, " ").slice(0, 200);
    send(encodeReply({ ok: false, error }), { status: statusOf(error), description });
  };
  let raw: unknown;
  try {
    raw = JSON.parse(msg.string());
  } catch {
    fail({ code: "bad_request", message: `the request to ${def.subject} is not valid JSON`, retryable: false });
    return;
  }
  const parsed = def.request.safeParse(raw);
  if (!parsed.success) {
    fail({
      code: "bad_request",
      message: `the request to ${def.subject} does not match its schema: ${z.prettifyError(parsed.error)}`,
      retryable: false,
      details: parsed.error.issues,
    });
    return;
  }
  const taskId = (parsed.data as { taskId?: string }).taskId;
  const owner = def.owned ? msg.subject.slice(def.subject.length + 1) : DEFAULT_OWNER;
  if (!OWNER_PATTERN.test(owner)) {
    fail({ code: "bad_request", message: `the request to ${def.subject} names no valid owner`, retryable: false });
    return;
  }
  const child = log.child({ endpoint: def.name, ...(taskId ? { taskId } : {}), ...(def.owned ? { owner } : {}) });
  try {
    const value = await handler(parsed.data, { log: child, subject: def.subject, owner });
    const checked = def.response.safeParse(value);
    if (!checked.success) {
      child.error({ issues: checked.error.issues }, "handler returned a value that fails the reply schema");
      fail({ code: "internal", message: `${def.subject} produced an invalid reply`, retryable: false });
      return;
    }
    send(encodeReply({ ok: true, value: checked.data }));
  } catch (err) {
    const error = toErrorData(err);
    if (error.code === "internal") child.error({ err }, "handler failed");
    // A busy answer is ordinary flow control (the caller asks another replica), not a fault.
    else if (busyReason(err)) child.debug({ code: error.code, msg: error.message }, "busy: the caller asks again");
    else child.warn({ code: error.code, msg: error.message }, "handler returned an error");
    fail(error);
  }
}

/** Options of {@link startService}. */
export interface ServiceOptions {
  name: string;
  version: string;
  description: string;
  log: Logger;
  registrations: Registration[];
  metadata?: Record<string, string>;
  /**
   * The `data` of each endpoint in `$SRV` STATS answers (called per STATS request and
   * endpoint, with the endpoint's subject; serialised as JSON): live figures such as the
   * executor's free slots. Absent: no `data`.
   */
  stats?: (subject: string) => unknown;
}

/**
 * Registers a `@nats-io/services` service with its endpoints. Each endpoint uses the
 * service's queue group, so several instances share the load. Answers `$SRV.PING/INFO/STATS`.
 * Every request (its endpoints' and `$SRV`'s) whose reply subject is not an inbox is dropped
 * (see {@link repliesToInboxesOnly}).
 * @throws whatever `Svcm.add` throws when the connection is closed.
 */
export async function startService(nc: NatsConnection, opts: ServiceOptions): Promise<Service> {
  const svcm = new Svcm(repliesToInboxesOnly(nc, opts.log) as unknown as ConstructorParameters<typeof Svcm>[0]);
  let epoch = 0;
  void (async () => {
    for await (const s of nc.status()) if (s.type === "disconnect" || s.type === "reconnect") epoch++;
  })().catch(() => undefined);
  const link: ReplyLink = {
    publish: (subject, body, hdrs) => {
      try {
        nc.publish(subject, body, hdrs ? { headers: hdrs } : undefined);
      } catch {
        // The connection is closing or reconnecting; the caller's liveness limit decides.
      }
    },
    epoch: () => epoch,
  };
  const service = await svcm.add({
    name: opts.name,
    version: opts.version,
    description: opts.description,
    ...(opts.metadata ? { metadata: opts.metadata } : {}),
    ...(opts.stats
      ? { statsHandler: (endpoint: { subject: string }) => Promise.resolve(opts.stats?.(endpoint.subject) ?? null) }
      : {}),
  });
  for (const { def, handler } of opts.registrations) {
    service.addEndpoint(def.name, {
      subject: servedSubject(def),
      handler: (err, msg) => {
        if (err) {
          opts.log.error({ err }, "endpoint subscription failed");
          return;
        }
        void answer(msg, def, handler, opts.log, link);
      },
    });
  }
  return service;
}

/** Options of one {@link call}. */
export interface CallOptions {
  /** Time to wait for one reply, in ms. @defaultValue 30000 */
  timeoutMs?: number;
  /** Further attempts after a retryable failure (timeout, no responder, retryable error). @defaultValue 2 */
  retries?: number;
  /** Wait before the first retry, in ms; doubles each time. @defaultValue 250 */
  backoffMs?: number;
  /**
   * Longest silence accepted from the service while it works, in ms: the request carries a
   * heartbeat inbox, the service signals every {@link HEARTBEAT_EVERY_MS}, and an attempt
   * that hears nothing (no heartbeat, no reply) for this long fails as a retryable
   * `timeout` and is sent again — to another replica if the first died, or after NATS came
   * back if the request or its reply was lost (handlers are idempotent by key, so a retry
   * joins work in flight). Undefined: only `timeoutMs` bounds an attempt.
   */
  livenessMs?: number;
  /** The caller's owner token, for an owned endpoint ({@link EndpointDef.owned}). @defaultValue DEFAULT_OWNER */
  owner?: string;
  /**
   * How long to keep asking while replicas answer busy ({@link busyReason}: no free slot, or
   * their engine is down), in ms. Each ask goes to the replica the queue group picks, so a
   * request finds the replica with room instead of queueing behind a full one. 0: a busy
   * answer fails the call at once (it never uses up `retries`). @defaultValue 0
   */
  busyWaitMs?: number;
}

/** One answer to a `$SRV` PING: the service's name, instance id, version and metadata. */
export interface ServicePing {
  name: string;
  id: string;
  version: string;
  metadata: Record<string, string>;
}

/**
 * The instances of a service (every service when `name` is "") that answer a `$SRV` PING
 * within `opts.maxWaitMs` (default 500 ms, the services client's collection window), or
 * until `opts.enough` says the answers so far suffice (a running stack answers in a few ms).
 * @returns their answers; empty when nothing answers (no responders)
 * @throws whatever the request throws besides no responders (a closed or draining
 *   connection, a permission refused): the caller cannot tell who is alive.
 */
export async function pingService(
  nc: NatsConnection,
  name: string,
  opts: { maxWaitMs?: number; enough?: (found: readonly ServicePing[]) => boolean } = {},
): Promise<ServicePing[]> {
  const client = new Svcm(nc as never).client({ strategy: "timer", maxWait: opts.maxWaitMs ?? 500 });
  const found: ServicePing[] = [];
  try {
    for await (const p of await client.ping(name)) {
      found.push({ name: p.name, id: p.id, version: p.version, metadata: p.metadata ?? {} });
      if (opts.enough?.(found)) break;
    }
  } catch (err) {
    const cause = err instanceof RequestError ? (err.cause ?? err) : err;
    if (!((err instanceof RequestError && err.isNoResponders()) || cause instanceof NoRespondersError)) throw err;
  }
  return found;
}

/**
 * Maps a failed request to a typed error. Only what a retry can cure is retryable: a timeout,
 * no responder, a closed or draining connection. A request the client refuses (larger than
 * the server's max_payload) or anything unknown is not.
 */
function busError(err: unknown, subject: string, timeoutMs: number): LoopsmithError {
  const cause = err instanceof RequestError ? (err.cause ?? err) : err;
  if ((err instanceof RequestError && err.isNoResponders()) || cause instanceof NoRespondersError) {
    return new LoopsmithError("unavailable", `no service answers on ${subject}; is it running?`, { cause: err });
  }
  if (err instanceof SilentServiceError) {
    return new LoopsmithError(
      "timeout",
      `${err.message}; sending it again (the service died, or NATS lost the request or its reply)`,
      { cause: err },
    );
  }
  if (cause instanceof TimeoutError || err instanceof TimeoutError) {
    return new LoopsmithError("timeout", `${subject} did not answer within ${timeoutMs} ms`, { cause: err });
  }
  if (
    cause instanceof ClosedConnectionError ||
    cause instanceof DrainingConnectionError ||
    cause instanceof ConnectionError
  ) {
    return new LoopsmithError(
      "unavailable",
      `the connection to NATS is not usable for ${subject}: ${(cause as Error).message}`,
      { cause: err },
    );
  }
  const refused = permissionDenied(err);
  if (refused) return refused;
  if (cause instanceof InvalidArgumentError) {
    return new LoopsmithError("bad_request", `the request to ${subject} cannot be sent: ${(cause as Error).message}`, {
      cause: err,
    });
  }
  return new LoopsmithError(
    "internal",
    `the request to ${subject} failed: ${String((cause as Error)?.message ?? cause)}`,
    { cause: err },
  );
}

/**
 * Calls an endpoint and returns its validated value.
 * Retries (bounded, with backoff) on timeouts, missing responders and retryable error replies.
 * @throws LoopsmithError `bad_request` when `request` fails its own schema (nothing is sent),
 *   the error the service replied with, `timeout`/`unavailable` once retries are used up, or
 *   `internal` when the reply fails its schema.
 */
export async function call<E extends EndpointDef>(
  nc: NatsConnection,
  def: E,
  request: z.input<E["request"]>,
  opts: CallOptions = {},
): Promise<z.infer<E["response"]>> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const checked = def.request.safeParse(request);
  if (!checked.success) {
    throw new LoopsmithError("bad_request", `invalid request for ${def.subject}: ${z.prettifyError(checked.error)}`, {
      details: checked.error.issues,
    });
  }
  const payload = JSON.stringify(checked.data);
  const replySchema = Reply(def.response);
  const subject = requestSubject(def, opts.owner);
  const attempt = async (): Promise<z.infer<E["response"]>> => {
    let msg;
    try {
      msg = await requestOnce(nc, subject, payload, timeoutMs, opts.livenessMs);
    } catch (err) {
      throw err instanceof LoopsmithError ? err : busError(err, def.subject, timeoutMs);
    }
    let body: unknown;
    try {
      body = JSON.parse(msg.string());
    } catch (err) {
      throw new LoopsmithError("internal", `${def.subject} answered with something that is not JSON`, { cause: err });
    }
    const reply = replySchema.safeParse(body);
    if (!reply.success) {
      throw new LoopsmithError("internal", `${def.subject} answered with a reply that fails its schema`, {
        details: reply.error.issues,
      });
    }
    if (reply.data.ok) return reply.data.value as z.infer<E["response"]>;
    throw LoopsmithError.fromData(reply.data.error);
  };
  // Failures a retry can cure: `retries` more attempts, the wait doubling from `backoffMs`.
  const retried = (): Promise<z.infer<E["response"]>> =>
    pRetry(attempt, {
      retries: opts.retries ?? 2,
      minTimeout: opts.backoffMs ?? 250,
      factor: 2,
      shouldRetry: ({ error }) => error instanceof LoopsmithError && error.retryable && !busyReason(error),
    });
  const busyWaitMs = opts.busyWaitMs ?? 0;
  if (busyWaitMs <= 0) return retried();
  // A busy replica: ask again soon (the queue group picks a replica at random each time),
  // for up to busyWaitMs; these attempts do not use up `retries`.
  return pRetry(retried, {
    retries: Number.POSITIVE_INFINITY,
    maxRetryTime: busyWaitMs,
    minTimeout: BUSY_RETRY_MIN_MS,
    maxTimeout: BUSY_RETRY_MAX_MS,
    factor: 1.5,
    randomize: true,
    shouldRetry: ({ error }) => busyReason(error) !== undefined,
  });
}

/** First wait before asking again after a busy answer, in ms (then ×1.5, randomized ×1–2). */
export const BUSY_RETRY_MIN_MS = 20;
/** Longest wait between asks after busy answers, in ms. */
export const BUSY_RETRY_MAX_MS = 500;

/** Thrown when a service went silent for longer than the caller's liveness limit. */
class SilentServiceError extends Error {
  override readonly name = "SilentServiceError";
}

/**
 * One request: `nc.request`, or with `livenessMs`, the same raced against a watchdog that
 * heartbeats from the service reset.
 * @throws SilentServiceError when no heartbeat or reply came for `livenessMs`; whatever
 *   `nc.request` throws otherwise
 */
async function requestOnce(
  nc: NatsConnection,
  subject: string,
  payload: string,
  timeoutMs: number,
  livenessMs?: number,
): Promise<Msg> {
  if (livenessMs === undefined) return nc.request(subject, payload, { timeout: timeoutMs });
  // Unguessable (not a nuid): a reply may come this way ({@link REPLY_HEADER}).
  const inbox = `${BEATS_PREFIX}.${randomBytes(16).toString("hex")}`;
  const beats = nc.subscribe(inbox);
  const h = headers();
  h.set(HEARTBEAT_HEADER, inbox);
  let timer: NodeJS.Timeout | undefined;
  const silence = new Promise<Msg>((resolve, reject) => {
    const arm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(
        () => reject(new SilentServiceError(`no sign of life from ${subject} for ${livenessMs} ms`)),
        livenessMs,
      );
    };
    arm();
    void (async () => {
      for await (const m of beats) {
        if (m.headers?.get(REPLY_HEADER) === "1") resolve(m);
        else arm();
      }
    })();
  });
  const reply = nc.request(subject, payload, { timeout: timeoutMs, headers: h });
  // An abandoned request still settles later (its own timeout); nobody waits for it then.
  reply.catch(() => undefined);
  try {
    return await Promise.race([reply, silence]);
  } finally {
    clearTimeout(timer);
    beats.unsubscribe();
  }
}
