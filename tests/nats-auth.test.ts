/**
 * Connecting to a NATS that requires credentials, on a real nats-server started with a user
 * and password: a service and the CLI connect with `NATS_USER`/`NATS_PASSWORD`; wrong or
 * missing credentials are refused at once with a typed `config_invalid` that names the user
 * and never the secret.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GenericContainer, Wait, type StartedTestContainer } from "testcontainers";
import pino from "pino";
import { LoopsmithError, loadConfig, runService } from "@loopsmith/shared/runtime";
import { ServiceNames } from "@loopsmith/shared/bus";
import { jsonLines, loopsmith } from "./fixtures/cli.js";
import { pingBuilder } from "./fixtures/ping.js";

const USER = "svc-builder";
const SECRET = "s3cret-pass-8c1f2a";
const log = pino({ level: "silent" });
let container: StartedTestContainer;
let url: string;

beforeAll(async () => {
  const image = loadConfig({ env: { NATS_URL: "" } }).images.nats;
  container = await new GenericContainer(image)
    .withCommand(["-js", "-sd", "/tmp/js", "--user", USER, "--pass", SECRET])
    .withExposedPorts(4222)
    .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
    .start();
  url = `nats://${container.getHost()}:${container.getMappedPort(4222)}`;
});
afterAll(async () => {
  await container?.stop({ timeout: 1_000 });
});

describe("NATS with authentication", () => {
  it("a service connects with NATS_USER and NATS_PASSWORD, registers, and answers $SRV pings from an authenticated client", async () => {
    const config = loadConfig({ env: { NATS_URL: url, NATS_USER: USER, NATS_PASSWORD: SECRET } });
    const ping = await pingBuilder(config, config, url);
    expect(ping.answered).toEqual([ping.serviceId]);
  });

  it("refuses a wrong password at once with config_invalid naming the user, never the password", async () => {
    const config = loadConfig({ env: { NATS_URL: url, NATS_USER: USER, NATS_PASSWORD: "wrong-password-123" } });
    const started = Date.now();
    const err = await runService("builder", async () => ({ registrations: [] }), { config, log }).then(
      () => undefined,
      (e: unknown) => e as LoopsmithError,
    );
    expect(err).toBeInstanceOf(LoopsmithError);
    expect(err?.code).toBe("config_invalid");
    expect(err?.message).toContain(`user ${USER}`);
    expect(err?.message).not.toContain("wrong-password-123");
    // Not retried for the 30 s a service waits for a NATS that does not answer yet.
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("start-up work that needs no connection (PreparedStart) reaches build; it is undone when NATS refuses, and its own failure stops the start", async () => {
    const good = loadConfig({ env: { NATS_URL: url, NATS_USER: USER, NATS_PASSWORD: SECRET } });
    const seen: string[] = [];
    const prepare = {
      open: async () => {
        seen.push("open");
        return "the-store";
      },
      close: async (value: string) => {
        seen.push(`close ${value}`);
      },
    };
    const running = await runService<string>(
      "builder",
      async ({ prepared }) => {
        seen.push(`build with ${prepared}`);
        return { registrations: [] };
      },
      { config: good, log, prepare },
    );
    await running.stop();
    expect(seen).toEqual(["open", "build with the-store"]);

    seen.length = 0;
    const refused = loadConfig({ env: { NATS_URL: url, NATS_USER: USER, NATS_PASSWORD: "wrong-password-456" } });
    const err = await runService<string>("builder", async () => ({ registrations: [] }), {
      config: refused,
      log,
      prepare,
    }).then(
      () => undefined,
      (e: unknown) => e as LoopsmithError,
    );
    expect(err?.code).toBe("config_invalid");
    expect(seen).toEqual(["open", "close the-store"]);

    const broken = {
      open: async (): Promise<string> => Promise.reject(new LoopsmithError("db_error", "the disk is full")),
      close: async () => undefined,
    };
    const failed = await runService<string>("builder", async () => ({ registrations: [] }), {
      config: good,
      log,
      prepare: broken,
    }).then(
      () => undefined,
      (e: unknown) => e as LoopsmithError,
    );
    expect(failed?.code).toBe("db_error");
    expect(failed?.message).toBe("the disk is full");
  });

  it("refuses a connection without credentials, saying which variables to set", async () => {
    const config = loadConfig({ env: { NATS_URL: url } });
    const err = await runService("builder", async () => ({ registrations: [] }), { config, log }).then(
      () => undefined,
      (e: unknown) => e as LoopsmithError,
    );
    expect(err?.code).toBe("config_invalid");
    expect(err?.message).toMatch(/refused no credentials .*NATS_USER and NATS_PASSWORD, NATS_TOKEN or NATS_CREDS/);
  });

  it("loopsmith health connects with the credentials (exit 3: no service answers), and exits 2 with a typed error on a wrong password, the secret never printed", async () => {
    const ok = await loopsmith(["health", "builder", "--timeout", "500", "--json"], {
      NATS_URL: url,
      NATS_USER: USER,
      NATS_PASSWORD: SECRET,
    });
    expect(ok.code).toBe(3);
    expect(jsonLines(ok.stdout).at(-1)).toMatchObject({
      kind: "health",
      healthy: false,
      services: [{ service: ServiceNames.builder, ids: [], healthy: false }],
    });
    expect(jsonLines(ok.stdout).at(-1)).not.toHaveProperty("problem");
    const bad = await loopsmith(["health", "--json"], {
      NATS_URL: url,
      NATS_USER: USER,
      NATS_PASSWORD: "not-the-password-77",
    });
    expect(bad.code).toBe(2);
    expect(jsonLines(bad.stdout).at(-1)).toMatchObject({ kind: "error", code: "config_invalid" });
    expect(`${bad.stdout}${bad.stderr}`).not.toContain("not-the-password-77");
    expect(`${bad.stdout}${bad.stderr}`).toContain(`user ${USER}`);
  });

  it("loopsmith health --id-file: a missing file is not_found, a garbled one bad_request (exit 2 both)", async () => {
    const env = { NATS_URL: url, NATS_USER: USER, NATS_PASSWORD: SECRET };
    const dir = mkdtempSync(join(tmpdir(), "loopsmith-health-"));
    const missing = await loopsmith(["health", "--id-file", join(dir, "none.json"), "--json"], env);
    expect(missing.code).toBe(2);
    expect(jsonLines(missing.stdout).at(-1)).toMatchObject({ kind: "error", code: "not_found" });
    writeFileSync(join(dir, "garbled.json"), "{not json");
    const garbled = await loopsmith(["health", "--id-file", join(dir, "garbled.json"), "--json"], env);
    expect(garbled.code).toBe(2);
    expect(jsonLines(garbled.stdout).at(-1)).toMatchObject({ kind: "error", code: "bad_request" });
  });
});
