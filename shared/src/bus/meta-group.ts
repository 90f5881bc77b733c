/**
 * Who is in a JetStream cluster's meta group, read from the nodes' monitoring endpoints
 * (`/varz` for a node's name, `/jsz` for its view of the group: the leader lists the members
 * under `meta_cluster.replicas`). A node that answers but is not a member was left out: on
 * nats-server 2.10 a node can miss the first meta election and never be added (README,
 * "Running on several machines"); restarting that node alone brings it in.
 */

/** One node's answer: its name and what it sees of the meta group. */
export interface MetaNodeView {
  /** The monitoring URL asked (`http://nats-2:8222`). */
  url: string;
  /** Its `server_name`; absent when the node did not answer. */
  name?: string;
  /** The meta leader it knows of. */
  leader?: string;
  /** The group size it reports (`meta_cluster.cluster_size`). */
  size?: number;
  /** Only on the leader: the other members (`meta_cluster.replicas[].name`). */
  replicas?: string[];
  /** Why it did not answer. */
  error?: string;
}

/** The meta group as the nodes report it. */
export interface MetaMembership {
  /** The leader, when one of the nodes that answered is it. */
  leader?: string;
  /** The leader and the members it lists; empty without a leader. */
  members: string[];
  /** Nodes that answered, while a leader was known, and are not members. */
  leftOut: string[];
  /** Every node's answer, in the order asked. */
  nodes: MetaNodeView[];
}

async function getJson(url: string, timeoutMs: number): Promise<Record<string, unknown>> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  return (await res.json()) as Record<string, unknown>;
}

/** Asks one node for its name and its view of the meta group; never throws. */
async function viewOf(url: string, timeoutMs: number): Promise<MetaNodeView> {
  const base = url.replace(/\/+$/, "");
  try {
    const [varz, jsz] = await Promise.all([getJson(`${base}/varz`, timeoutMs), getJson(`${base}/jsz`, timeoutMs)]);
    const meta = (jsz.meta_cluster ?? {}) as {
      leader?: string;
      cluster_size?: number;
      replicas?: Array<{ name?: string }>;
    };
    return {
      url,
      name: typeof varz.server_name === "string" ? varz.server_name : undefined,
      ...(meta.leader ? { leader: meta.leader } : {}),
      ...(typeof meta.cluster_size === "number" ? { size: meta.cluster_size } : {}),
      ...(meta.replicas ? { replicas: meta.replicas.map((r) => r.name ?? "").filter(Boolean) } : {}),
    };
  } catch (err) {
    return { url, error: (err as Error).message };
  }
}

/**
 * Reads the meta group from every node's monitoring endpoint at once.
 * @param monitorUrls - each node's monitoring base URL (`http://nats:8222`; nats-server's
 *   `http_port`, 8222 in loopsmith's configuration)
 * @param timeoutMs - per request, in ms
 * @returns the membership; a node that does not answer is neither a member nor left out
 */
export async function metaMembership(monitorUrls: string[], timeoutMs = 2_000): Promise<MetaMembership> {
  const nodes = await Promise.all(monitorUrls.map((u) => viewOf(u, timeoutMs)));
  const leaderView = nodes.find((n) => n.name !== undefined && n.leader === n.name);
  if (!leaderView?.name) return { members: [], leftOut: [], nodes };
  const members = [leaderView.name, ...(leaderView.replicas ?? [])];
  const leftOut = nodes.filter((n) => n.name !== undefined && !members.includes(n.name)).map((n) => n.name as string);
  return { leader: leaderView.name, members, leftOut, nodes };
}

/** How {@link settleMembership} ended: every node in, a node stayed out, or no leader known. */
export type MembershipOutcome = "complete" | "left_out" | "no_leader";

/**
 * Reads the meta group until it settles: every node that answers is a member (`complete`,
 * at once), the same nodes have stayed out for `settleMs` (`left_out`: a node joining late is
 * added within a second or two, one left out never is), or `waitMs` passes (`left_out` if
 * some are out then, else `no_leader`).
 * @param opts.waitMs - at most this long, in ms
 * @param opts.settleMs - how long a node must stay out to count as left out, in ms
 * @param opts.pollMs - between reads, in ms
 */
export async function settleMembership(
  monitorUrls: string[],
  opts: { waitMs: number; settleMs: number; pollMs?: number },
): Promise<{ outcome: MembershipOutcome; membership: MetaMembership }> {
  const deadline = Date.now() + opts.waitMs;
  let outKey = "";
  let outSince = Date.now();
  for (;;) {
    const membership = await metaMembership(monitorUrls);
    const key = membership.leftOut.join(",");
    if (key !== outKey) [outKey, outSince] = [key, Date.now()];
    if (membership.leader && membership.leftOut.length === 0) return { outcome: "complete", membership };
    if (membership.leader && Date.now() - outSince >= opts.settleMs) return { outcome: "left_out", membership };
    if (Date.now() >= deadline) return { outcome: membership.leftOut.length ? "left_out" : "no_leader", membership };
    await new Promise((r) => setTimeout(r, opts.pollMs ?? 500));
  }
}
