/**
 * How every loopsmith process connects to NATS with the configured credentials and TLS
 * (`config.nats`): the services' runtime and every CLI command use these options, so a NATS
 * with authentication needs the same few variables everywhere (`NATS_USER` + `NATS_PASSWORD`,
 * `NATS_TOKEN`, or `NATS_CREDS`; `NATS_INBOX_PREFIX` for the user's own reply subjects;
 * `NATS_CA`, `NATS_CERT`, `NATS_KEY` for TLS).
 */
import { readFileSync } from "node:fs";
import {
  AuthorizationError,
  UserAuthenticationExpiredError,
  credsAuthenticator,
  type ConnectionOptions,
} from "@nats-io/transport-node";
import type { Config } from "../runtime/config.js";
import { LoopsmithError } from "../runtime/errors.js";
import { maskUrl } from "../runtime/mask.js";

/**
 * The servers of a NATS URL setting: one URL, or several separated by commas (the nodes of a
 * cluster: `nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222`), as nats.js takes them
 * (it does not split a string itself). A client that loses its server moves to another.
 */
export function natsServers(url: string): string[] {
  return url
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean);
}

/**
 * The connection options for `config.nats` (no `servers`: the caller gives the URL).
 * @throws LoopsmithError `config_invalid` when the credentials file cannot be read
 */
export function natsConnectOptions(config: Pick<Config, "nats">): Partial<ConnectionOptions> {
  const n = config.nats;
  const out: Partial<ConnectionOptions> = {};
  if (n.user !== undefined) out.user = n.user;
  if (n.password !== undefined) out.pass = n.password;
  if (n.token !== undefined) out.token = n.token;
  if (n.inboxPrefix) out.inboxPrefix = n.inboxPrefix;
  if (n.credsFile) {
    let creds: Uint8Array;
    try {
      creds = new Uint8Array(readFileSync(n.credsFile));
    } catch (err) {
      throw new LoopsmithError(
        "config_invalid",
        `cannot read the NATS credentials file ${n.credsFile} (NATS_CREDS): ${(err as Error).message}`,
        { cause: err },
      );
    }
    out.authenticator = credsAuthenticator(creds);
  }
  const tls = n.tls;
  if (tls.caFile || tls.certFile || tls.keyFile) {
    out.tls = {
      ...(tls.caFile ? { caFile: tls.caFile } : {}),
      ...(tls.certFile ? { certFile: tls.certFile } : {}),
      ...(tls.keyFile ? { keyFile: tls.keyFile } : {}),
    };
  }
  return out;
}

/** Who this process says it is to NATS, for messages (never a secret). */
export function natsIdentity(config: Pick<Config, "nats" | "natsUrl">): string {
  const n = config.nats;
  if (n.credsFile) return `the credentials in ${n.credsFile}`;
  if (n.user) return `user ${n.user}`;
  if (n.token) return "a token";
  try {
    const user = config.natsUrl ? decodeURIComponent(new URL(config.natsUrl.split(",")[0] as string).username) : "";
    if (user) return `user ${user}`;
  } catch {
    // not a URL: no user in it
  }
  return "no credentials";
}

/**
 * A typed error when NATS refused this connection's credentials (wrong, missing or expired):
 * `config_invalid`, naming the identity (never the secret); undefined for any other failure.
 */
export function natsRefusal(err: unknown, url: string, identity: string): LoopsmithError | undefined {
  const refused = (e: unknown): boolean =>
    e instanceof AuthorizationError || e instanceof UserAuthenticationExpiredError;
  if (!refused(err) && !(err instanceof Error && refused(err.cause))) return undefined;
  return new LoopsmithError(
    "config_invalid",
    `NATS at ${maskUrl(url)} refused ${identity} (authorization violation): set NATS_USER and NATS_PASSWORD, NATS_TOKEN or NATS_CREDS`,
    { cause: err, retryable: false },
  );
}
