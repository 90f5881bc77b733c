/**
 * How a failed NATS or JetStream call is classified, for every caller (the bus, the streams,
 * the snapshot store, the conductor): a failure that passes (a restart, a reconnect) and a
 * refusal by the user's permissions.
 */
import {
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  NoRespondersError,
  PermissionViolationError,
  RequestError,
  TimeoutError,
} from "@nats-io/transport-node";
import { JetStreamApiError } from "@nats-io/jetstream";
import { LoopsmithError } from "../runtime/errors.js";

/**
 * Whether an error thrown by a NATS or JetStream call (a KV read, a publish, a fetch) is one
 * that passes: a timeout, no responder, a closed, draining or failed connection (NATS
 * restarting, a reconnect under way), or JetStream answering 503 (no stream leader yet). A
 * task that meets one is handed back and resumed from its checkpoint, not ended: a NATS
 * restart during a checkpoint read would otherwise end the task with `error: timeout`.
 */
export function isTransientNatsError(err: unknown): boolean {
  const cause = err instanceof RequestError ? (err.cause ?? err) : err;
  if (err instanceof RequestError && err.isNoResponders()) return true;
  if ([cause, err].some((e) => e instanceof TimeoutError || e instanceof NoRespondersError)) return true;
  if (
    cause instanceof ClosedConnectionError ||
    cause instanceof DrainingConnectionError ||
    cause instanceof ConnectionError
  )
    return true;
  return err instanceof JetStreamApiError && err.status === 503;
}

/**
 * A typed `permission_denied` when NATS refused a publish or a subscription to this
 * connection's user (a {@link PermissionViolationError}, also as a cause of a cause, as
 * JetStream wraps it); undefined otherwise.
 * The message names the operation and the subject, never a credential.
 */
export function permissionDenied(err: unknown): LoopsmithError | undefined {
  let pv: unknown = err;
  for (let depth = 0; pv && !(pv instanceof PermissionViolationError) && depth < 5; depth++) pv = (pv as Error).cause;
  if (!(pv instanceof PermissionViolationError)) return undefined;
  const what = pv.operation === "subscription" ? "subscribe on" : "publish to";
  return new LoopsmithError(
    "permission_denied",
    `NATS does not let this user ${what} ${pv.subject}${pv.queue ? ` (queue ${pv.queue})` : ""}: its permissions forbid it`,
    { cause: err, retryable: false },
  );
}
