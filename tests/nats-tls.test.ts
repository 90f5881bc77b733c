/**
 * TLS on the bus, on a real nats-server started with `renderNatsServerConfig({tls})` (what
 * `loopsmith bus config --tls-cert … --tls-key … --tls-ca … --tls-verify` prints) and
 * certificates made here with openssl: a service that trusts the CA (`NATS_CA`) and presents
 * its certificate (`NATS_CERT`, `NATS_KEY`) registers and answers `$SRV` pings; a process
 * without the CA, or without a client certificate, is refused.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GenericContainer, Wait, type StartedTestContainer } from "testcontainers";
import { connect } from "@nats-io/transport-node";
import {
  NATS_ROLES,
  inboxPrefixOf,
  natsConnectOptions,
  passwordVariable,
  renderNatsServerConfig,
} from "@loopsmith/shared/bus";
import { loadConfig } from "@loopsmith/shared/runtime";
import { pingBuilder } from "./fixtures/ping.js";

const dir = mkdtempSync(join(tmpdir(), "loopsmith-nats-tls-"));
const password = (role: string): string => `pw${role}TLS7`;
let container: StartedTestContainer;
let url: string;

/** A CA, a server certificate for localhost/127.0.0.1 and a client certificate, by openssl. */
function makeCertificates(): void {
  const ssl = (...args: string[]): void => void execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  ssl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-days",
    "2",
    "-subj",
    "/CN=loopsmith-test-ca",
  );
  for (const [name, ext] of [
    ["server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"],
    ["client", "extendedKeyUsage=clientAuth\n"],
  ] as const) {
    writeFileSync(join(dir, `${name}.ext`), ext);
    ssl(
      "req",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.csr`,
      "-subj",
      `/CN=loopsmith-${name}`,
    );
    ssl(
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "2",
      "-extfile",
      `${name}.ext`,
    );
  }
}

beforeAll(async () => {
  makeCertificates();
  const conf = renderNatsServerConfig({
    storeDir: "/tmp/js",
    httpPort: 0,
    tls: {
      certFile: "/etc/nats-tls/server.pem",
      keyFile: "/etc/nats-tls/server.key",
      caFile: "/etc/nats-tls/ca.pem",
      verify: true,
    },
  });
  container = await new GenericContainer(loadConfig({ env: { NATS_URL: "" } }).images.nats)
    .withCopyContentToContainer([
      { content: conf, target: "/etc/nats-tls/nats.conf" },
      ...["server.pem", "server.key", "ca.pem"].map((f) => ({
        content: readFileSync(join(dir, f)),
        target: `/etc/nats-tls/${f}`,
        mode: 0o644,
      })),
    ])
    .withEnvironment(Object.fromEntries(NATS_ROLES.map((r) => [passwordVariable(r), password(r)])))
    .withCommand(["-c", "/etc/nats-tls/nats.conf"])
    .withExposedPorts(4222)
    .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
    .start();
  url = `tls://127.0.0.1:${container.getMappedPort(4222)}`;
});
afterAll(async () => {
  await container?.stop({ timeout: 1_000 });
});

const env = (role: string, extra: Record<string, string> = {}): Record<string, string> => ({
  NATS_URL: url,
  NATS_USER: role,
  NATS_PASSWORD: password(role),
  NATS_INBOX_PREFIX: inboxPrefixOf(role as never),
  ...extra,
});
const tlsFiles = {
  NATS_CA: join(dir, "ca.pem"),
  NATS_CERT: join(dir, "client.pem"),
  NATS_KEY: join(dir, "client.key"),
};

describe("NATS over TLS (NATS_CA, NATS_CERT, NATS_KEY)", () => {
  it("a service that trusts the CA and presents its certificate registers and answers a client's $SRV ping over TLS", async () => {
    const ping = await pingBuilder(
      loadConfig({ env: env("builder", tlsFiles) }),
      loadConfig({ env: env("client", tlsFiles) }),
      url,
    );
    expect(ping.tlsRequired).toBe(true);
    expect(ping.answered).toEqual([ping.serviceId]);
  });

  it("refuses a process that does not trust the server's CA, and one without a client certificate", async () => {
    const noCa = await connect({
      ...natsConnectOptions(
        loadConfig({ env: env("client", { NATS_CERT: tlsFiles.NATS_CERT, NATS_KEY: tlsFiles.NATS_KEY }) }),
      ),
      servers: url,
      timeout: 3_000,
      reconnect: false,
    }).then(
      async (nc) => {
        await nc.close();
        return undefined;
      },
      (err: unknown) => err as Error,
    );
    expect(noCa).toBeInstanceOf(Error);
    const noCert = await connect({
      ...natsConnectOptions(loadConfig({ env: env("client", { NATS_CA: tlsFiles.NATS_CA }) })),
      servers: url,
      timeout: 3_000,
      reconnect: false,
    }).then(
      async (nc) => {
        // A server that verifies may accept the handshake and close at once: prove nothing goes through.
        const ok = await nc.flush().then(
          () => true,
          () => false,
        );
        await nc.close().catch(() => undefined);
        return ok ? undefined : new Error("closed");
      },
      (err: unknown) => err as Error,
    );
    expect(noCert).toBeInstanceOf(Error);
  });
});
