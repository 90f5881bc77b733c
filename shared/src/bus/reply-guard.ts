/**
 * Services answer only to inboxes. A reply is published with the responder's permissions
 * (and NATS's `allow_responses`), so a request whose reply subject names something else — a
 * KV key, the events subject — would have a service write there on the requester's behalf.
 */
import type { NatsConnection, SubscriptionOptions } from "@nats-io/transport-node";
import type { Logger } from "pino";

/** Whether a reply subject is an inbox: NATS's `_INBOX.…` or a user's own `_INBOX_<user>.…`. */
export function isInboxSubject(reply: string): boolean {
  return /^_INBOX(_[A-Za-z0-9-]+)?\./.test(reply);
}

/**
 * The connection as a service's subscriptions should see it: a request whose reply subject
 * is not an inbox never reaches a handler (logged, not answered). A reply goes out with the
 * service's own permissions (and NATS's `allow_responses`), so without this a client could
 * name `$KV.loopsmith_tasks.cancel.<id>` as the reply of a `$SRV.PING` and have the architect
 * cancel someone's task, or write into any subject a service may publish to.
 */
export function repliesToInboxesOnly(nc: NatsConnection, log: Logger): NatsConnection {
  return new Proxy(nc, {
    get(target, prop, receiver) {
      if (prop === "subscribe") {
        return (subject: string, opts?: SubscriptionOptions) => {
          const callback = opts?.callback;
          if (!callback) return target.subscribe(subject, opts);
          return target.subscribe(subject, {
            ...opts,
            callback: (err, msg) => {
              if (!err && msg.reply && !isInboxSubject(msg.reply)) {
                log.warn(
                  { code: "permission_denied", subject: msg.subject, reply: msg.reply.slice(0, 200) },
                  "request dropped: its reply subject is not an inbox, and a service answers only to inboxes",
                );
                return;
              }
              return callback(err, msg);
            },
          });
        };
      }
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
