/**
 * Who answers: `$SRV.PING` through `@nats-io/services`' client (as cli/src/stack.ts does),
 * counted per loopsmith service, so replicas count one each.
 */
import {
  NoRespondersError,
  RequestError,
  connect,
  type ConnectionOptions,
  type NatsConnection,
} from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";
import { ServiceNames, type ServiceName } from "@loopsmith/shared/bus";

const BY_NAME = new Map<string, ServiceName>(Object.entries(ServiceNames).map(([k, v]) => [v, k as ServiceName]));

/** Replicas of each loopsmith service answering `$SRV.PING` within `maxWaitMs`. Throws when NATS is away. */
export async function answering(nc: NatsConnection, maxWaitMs = 500): Promise<Map<ServiceName, number>> {
  const counts = new Map<ServiceName, number>();
  const client = new Svcm(nc as never).client({ strategy: "timer", maxWait: maxWaitMs });
  try {
    for await (const p of await client.ping()) {
      const name = BY_NAME.get(p.name);
      if (name) counts.set(name, (counts.get(name) ?? 0) + 1);
    }
  } catch (err) {
    const none = err instanceof NoRespondersError || (err instanceof RequestError && err.isNoResponders());
    if (!none) throw err;
  }
  return counts;
}

/** True when every service answers with at least its expected number of replicas. */
export function complete(counts: Map<ServiceName, number>, expected: Record<ServiceName, number>): boolean {
  return (Object.entries(expected) as Array<[ServiceName, number]>).every(([s, n]) => (counts.get(s) ?? 0) >= n);
}

/**
 * Waits until every service answers with its expected replicas.
 * @returns the ms it took
 * @throws Error naming the services still short when `timeoutMs` passes
 */
export async function waitAnswering(
  nc: NatsConnection,
  expected: Record<ServiceName, number>,
  timeoutMs: number,
): Promise<number> {
  const start = Date.now();
  let counts = new Map<ServiceName, number>();
  while (Date.now() - start < timeoutMs) {
    counts = await answering(nc).catch(() => new Map<ServiceName, number>());
    if (complete(counts, expected)) return Date.now() - start;
    await new Promise((r) => setTimeout(r, 250));
  }
  const short = (Object.entries(expected) as Array<[ServiceName, number]>)
    .filter(([s, n]) => (counts.get(s) ?? 0) < n)
    .map(([s, n]) => `${s} ${counts.get(s) ?? 0}/${n}`);
  throw new Error(`services did not answer within ${Math.round(timeoutMs / 1000)} s: ${short.join(", ")}`);
}

/** Connects to NATS, retrying until it answers (at most `timeoutMs`), with reconnects forever afterwards. */
export async function connectNats(
  url: string,
  timeoutMs: number,
  auth: Partial<ConnectionOptions> = {},
): Promise<NatsConnection> {
  const start = Date.now();
  for (;;) {
    try {
      return await connect({
        ...auth,
        servers: url,
        timeout: 2_000,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        name: "loopsmith-chaos-bench",
      });
    } catch (err) {
      if (Date.now() - start > timeoutMs) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
