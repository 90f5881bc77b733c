/**
 * The compose commands of docs/OPERATIONS.md, run as they are written (the block after
 * `<!-- compose-offline -->`), on this machine with no registry and no key: build the app,
 * write `.env`, `docker compose up -d --build --wait`, a scripted task through the CLI,
 * `loopsmith health`, `docker compose down`. Only the two install lines are not run here
 * (`npm ci` and `sudo npm run images`: `deploy/prepare.sh` has done both before the tests).
 * Between `health` and `down` it checks what the production-stack issue asks of the stack:
 * the app image's size, user and read-only root; who gets the key and the Docker socket; a
 * keyless task ending with `provider_unconfigured`; a killed service coming back healthy; a
 * NATS restart logged as a disconnect and a reconnect.
 */
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO, jsonLines, runBash, type CliRun } from "../fixtures/cli.js";
import { shBlock } from "../fixtures/doc-blocks.js";

const run = promisify(execFile);
const PROJECT = "loopsmith-e2e-compose";
const APP = ["memory", "executor", "builder", "reviewer", "architect"];
/** Documented lines this test does not run, because prepare.sh ran them already. */
const INSTALL_LINES = ["npm ci", "sudo npm run images"];
// No key and no NATS of the test environment: what a user's shell has.
// LOOPSMITH_CLIENTS: a further client user, alice (docs/OPERATIONS.md, "More than one client"):
// compose-env.sh reads it, and the documented lines then start a stack that has her.
const env: NodeJS.ProcessEnv = {
  ...process.env,
  COMPOSE_PROJECT_NAME: PROJECT,
  ANTHROPIC_API_KEY: "",
  NATS_URL: "",
  LOOPSMITH_PROVIDER: "",
  LOG_LEVEL: "",
  LOOPSMITH_CLIENTS: "alice",
};

/** The offline compose block of docs/OPERATIONS.md, one command per line. */
function composeBlock(): string[] {
  return shBlock("docs/OPERATIONS.md", "compose-offline");
}

/** Runs one documented line with bash from the repository root. */
function shell(line: string, extra: NodeJS.ProcessEnv = {}, timeoutMs = 600_000): Promise<CliRun> {
  return runBash(line, { ...env, ...extra }, timeoutMs);
}

async function docker(args: string[]): Promise<string> {
  return (await run("docker", args, { env, maxBuffer: 64 * 1024 * 1024 })).stdout;
}

/** The container of a compose service. */
async function containerOf(service: string): Promise<string> {
  const id = (await docker(["compose", "-p", PROJECT, "ps", "-q", service])).trim().split("\n")[0];
  if (!id) throw new Error(`no container for ${service}`);
  return id;
}

async function inspect(id: string): Promise<{
  Config: { User: string; Env: string[] };
  HostConfig: { ReadonlyRootfs: boolean; Binds: string[] | null };
  State: { Health?: { Status: string } };
  RestartCount: number;
}> {
  return (JSON.parse(await docker(["inspect", id])) as never[])[0] as never;
}

type Inspected = Awaited<ReturnType<typeof inspect>>;

/**
 * Inspects a service's container every 500 ms until `done` holds (or `timeoutMs` passes);
 * returns the last inspection (undefined when none succeeded).
 */
async function inspectUntil(
  service: string,
  done: (info: Inspected) => boolean,
  timeoutMs: number,
): Promise<Inspected | undefined> {
  const started = Date.now();
  for (;;) {
    const info = await inspect(await containerOf(service)).catch(() => undefined);
    if ((info && done(info)) || Date.now() - started > timeoutMs) return info;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Waits until a service's container reports healthy. @throws when it does not within `timeoutMs` */
async function healthy(service: string, timeoutMs: number): Promise<void> {
  const info = await inspectUntil(service, (i) => i.State.Health?.Status === "healthy", timeoutMs);
  if (info?.State.Health?.Status !== "healthy") throw new Error(`${service} not healthy after ${timeoutMs} ms`);
}

/** The host pid of the `node` process in a service's container (not the init). */
async function nodePid(service: string): Promise<number> {
  const top = await docker(["top", await containerOf(service), "-eo", "pid,comm"]);
  const row = top.split("\n").find((l) => /\bnode$/.test(l.trim()));
  if (!row) throw new Error(`no node process in ${service}:\n${top}`);
  return Number(row.trim().split(/\s+/)[0]);
}

const lines = composeBlock();
// compose-env.sh rewrites .env and client.env (with LOOPSMITH_CLIENTS it also points .env at
// nats.conf and nats-cluster.conf, which afterAll removes): both are put back as they were.
const envFileBefore = existsSync(join(REPO, ".env")) ? readFileSync(join(REPO, ".env")) : undefined;
const clientFileBefore = existsSync(join(REPO, "client.env")) ? readFileSync(join(REPO, "client.env")) : undefined;
const outcomes = new Map<string, CliRun>();
/** Files compose-env.sh writes for a further client user (removed afterwards). */
const CLIENT_FILES = ["client-alice.env", "nats-clients.env", "nats.conf", "nats-cluster.conf"];

describe("the compose commands of docs/OPERATIONS.md, offline and keyless", () => {
  beforeAll(async () => {
    expect(lines.filter((l) => INSTALL_LINES.includes(l))).toEqual(INSTALL_LINES);
    for (const line of lines) {
      if (INSTALL_LINES.includes(line) || line.startsWith("docker compose down")) continue;
      const result = await shell(line);
      outcomes.set(line, result);
      if (result.code !== 0)
        throw new Error(
          `docs/OPERATIONS.md line failed (exit ${result.code}): ${line}\n${result.stdout.slice(-3000)}\n${result.stderr.slice(-3000)}`,
        );
    }
  }, 900_000);

  afterAll(async () => {
    await shell(`docker compose -p ${PROJECT} down -v --remove-orphans`, {}, 180_000);
    for (const [file, before] of [
      [".env", envFileBefore],
      ["client.env", clientFileBefore],
    ] as const) {
      if (before === undefined) rmSync(join(REPO, file), { force: true });
      else writeFileSync(join(REPO, file), before, { mode: 0o600 });
    }
    for (const f of CLIENT_FILES) rmSync(join(REPO, f), { force: true });
  }, 200_000);

  it("keeps clients apart: alice's task is hers; the default client can neither list, show nor cancel it", async () => {
    const solve = await shell(
      `npx loopsmith --env-from client-alice.env solve --file examples/roman/task.json --script examples/roman/script.json --task-id compose-alice-1 --json`,
    );
    expect(solve.code, solve.stderr.slice(-2000)).toBe(0);
    const hers = await shell("npx loopsmith --env-from client-alice.env history --json");
    expect(
      JSON.parse(hers.stdout.trim().split("\n").at(-1) as string).tasks.map((t: { taskId: string }) => t.taskId),
    ).toContain("compose-alice-1");
    const theirs = await shell("npx loopsmith --env-from client.env history --json");
    expect(theirs.code).toBe(0);
    expect(
      JSON.parse(theirs.stdout.trim().split("\n").at(-1) as string).tasks.map((t: { taskId: string }) => t.taskId),
    ).not.toContain("compose-alice-1");
    const show = await shell("npx loopsmith --env-from client.env show compose-alice-1 --json");
    expect(show.code).not.toBe(0);
    expect(jsonLines(show.stdout).at(-1)).toMatchObject({ kind: "error", code: "not_found" });
    // The files hold her password at mode 0600; the server configuration holds none.
    const { stdout } = await run("stat", [
      "-c",
      "%a",
      join(REPO, "client-alice.env"),
      join(REPO, "nats-clients.env"),
      join(REPO, "nats.conf"),
    ]);
    expect(stdout.trim().split("\n")).toEqual(["600", "600", "644"]);
    expect(readFileSync(join(REPO, "nats.conf"), "utf8")).toContain("password: $LOOPSMITH_NATS_CLIENT_ALICE_PASSWORD");
  });

  it("runs the scripted example on the stack: the replies travel with the task, which passes", () => {
    const solve = [...outcomes].find(([line]) => /\bloopsmith\b.* solve /.test(line))?.[1];
    expect(solve?.code).toBe(0);
    expect(solve?.stdout.split("\n")[0]).toMatch(/^SCRIPTED RUN/);
    expect(solve?.stdout).toMatch(/passed/);
    const health = [...outcomes].find(([line]) => /\bloopsmith\b.* health\b/.test(line))?.[1];
    expect(
      health?.stdout
        .trim()
        .split("\n")
        .map((l) => l.split(" ")[0]),
    ).toEqual(Array(5).fill("healthy"));
  });

  it("writes .env and client.env with mode 0600: generated passwords (the database, each NATS user), the socket's group, the client's variables", async () => {
    const { stdout } = await run("stat", ["-c", "%a", join(REPO, ".env"), join(REPO, "client.env")]);
    expect(stdout.trim().split("\n")).toEqual(["600", "600"]);
    const text = readFileSync(join(REPO, ".env"), "utf8");
    expect(text).toMatch(/^POSTGRES_PASSWORD=[A-Za-z0-9]{32}$/m);
    expect(text).toMatch(/^DOCKER_GID=\d+$/m);
    for (const role of [...APP, "client", "admin"])
      expect(text).toMatch(new RegExp(`^LOOPSMITH_NATS_${role.toUpperCase()}_PASSWORD=[A-Za-z][A-Za-z0-9]{31}$`, "m"));
    const client = readFileSync(join(REPO, "client.env"), "utf8");
    const password = /^LOOPSMITH_NATS_CLIENT_PASSWORD=(.*)$/m.exec(text)?.[1];
    expect(client).toContain(`NATS_PASSWORD=${password}`);
    expect(client).toMatch(/^NATS_USER=client$/m);
    expect(client).toMatch(/^NATS_INBOX_PREFIX=_INBOX_client$/m);
  });

  it("gives NATS a health check (JetStream on, by its monitoring endpoint) that bus-setup waits for", async () => {
    await healthy("nats", 30_000);
    const yaml = await docker(["compose", "-p", PROJECT, "config", "--format", "json"]);
    const services = (
      JSON.parse(yaml) as { services: Record<string, { depends_on?: Record<string, { condition: string }> }> }
    ).services;
    expect(services["bus-setup"]?.depends_on?.nats?.condition).toBe("service_healthy");
    // The check itself: the command compose runs, against this NATS, answers 0.
    const id = (await docker(["compose", "-p", PROJECT, "ps", "-q", "nats"])).trim();
    const test = JSON.parse(await docker(["inspect", "-f", "{{json .Config.Healthcheck.Test}}", id])) as string[];
    expect(test[0]).toBe("CMD-SHELL");
    expect(test[1]).toContain("/healthz?js-enabled-only=true");
    await expect(docker(["exec", id, "/bin/sh", "-c", test[1] as string])).resolves.toBeDefined();
  });

  it("runs NATS with a user per service: the admin's bus-setup ran once and exited 0, a connection without credentials is refused, and a client's forged event is refused and logged with the subject and the user", async () => {
    const setup = JSON.parse(
      await docker(["compose", "-p", PROJECT, "ps", "-a", "--format", "json", "bus-setup"]).then(
        (o) => o.trim().split("\n")[0] as string,
      ),
    ) as { State: string; ExitCode: number };
    expect(setup).toMatchObject({ State: "exited", ExitCode: 0 });
    const rendered = JSON.parse(await docker(["compose", "-p", PROJECT, "config", "--format", "json"])) as {
      services: Record<string, { environment?: Record<string, string> }>;
    };
    for (const service of APP) {
      expect(rendered.services[service]?.environment?.NATS_USER, service).toBe(service);
      expect(rendered.services[service]?.environment?.NATS_INBOX_PREFIX, service).toBe(`_INBOX_${service}`);
    }
    const anonymous = await shell("npx loopsmith health --json", { NATS_URL: "nats://127.0.0.1:4222" });
    expect(anonymous.code).toBe(2);
    expect(jsonLines(anonymous.stdout).at(-1)).toMatchObject({ kind: "error", code: "config_invalid" });
    // As the client (client.env), on core NATS: the server refuses and logs it.
    const forged = await shell(
      `set -a && . ./client.env && node -e 'const { connect } = require("@nats-io/transport-node"); (async () => { const nc = await connect({ servers: process.env.NATS_URL, user: process.env.NATS_USER, pass: process.env.NATS_PASSWORD, inboxPrefix: process.env.NATS_INBOX_PREFIX }); nc.publish("loopsmith.events.forged-1", "{}"); await nc.flush(); await new Promise((r) => setTimeout(r, 500)); await nc.close(); })()'`,
    );
    expect(forged.code).toBe(0);
    const logs = await docker(["compose", "-p", PROJECT, "logs", "--no-color", "nats"]);
    expect(logs).toMatch(/Publish Violation - User "client", Subject "loopsmith\.events\.forged-1"/);
    const password = /^NATS_PASSWORD=(.*)$/m.exec(readFileSync(join(REPO, "client.env"), "utf8"))?.[1] as string;
    expect(logs).not.toContain(password);
  });

  it("runs a repo-mode task as the client: the snapshot goes through the object store to the executor", async () => {
    const repo = mkdtempSync(join(tmpdir(), "loopsmith-compose-repo-"));
    cpSync(join(REPO, "examples", "repo-bugfix", "repo"), repo, { recursive: true });
    await run(
      "bash",
      ["-c", "git init -q && git add -A && git -c user.name=t -c user.email=t@example.com commit -qm initial"],
      { cwd: repo },
    );
    const r = await shell(
      `npx loopsmith --env-from client.env solve --repo ${repo} "Fix the failing test tests/test_pricing.py::test_bulk_discount_starts_at_threshold" --script examples/repo-bugfix/script.json --task-id compose-repo-1 --json`,
    );
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    expect(jsonLines(r.stdout).find((l) => "status" in l)).toMatchObject({ status: "passed" });
    expect(jsonLines(r.stdout).at(-1)).toMatchObject({ kind: "repo", branch: "loopsmith/compose-repo-1" });
    rmSync(repo, { recursive: true, force: true });
  });

  it("runs the app as a non-root user on a read-only root, from an image of at most 250 MB", async () => {
    const size = Number((await docker(["image", "inspect", "-f", "{{.Size}}", "loopsmith/app:local"])).trim());
    expect(size).toBeLessThanOrEqual(250e6);
    for (const service of APP) {
      const info = await inspect(await containerOf(service));
      expect(info.Config.User, service).toBe("10001:10001");
      expect(info.HostConfig.ReadonlyRootfs, service).toBe(true);
      expect(info.State.Health?.Status, service).toBe("healthy");
    }
  });

  it("gives the model key only to the services that call a model, and the Docker socket only to the executor", async () => {
    const rendered = JSON.parse(await docker(["compose", "-p", PROJECT, "config", "--format", "json"])) as {
      services: Record<
        string,
        { environment?: Record<string, string>; volumes?: { source?: string; target: string }[] }
      >;
    };
    for (const service of APP) {
      const s = rendered.services[service];
      expect(s, service).toBeDefined();
      expect("ANTHROPIC_API_KEY" in (s?.environment ?? {}), service).toBe(
        ["architect", "builder", "reviewer"].includes(service),
      );
      expect("DATABASE_URL" in (s?.environment ?? {}), service).toBe(service === "memory");
      const socket = (s?.volumes ?? []).some((v) => v.target === "/var/run/docker.sock");
      expect(socket, service).toBe(service === "executor");
    }
  });

  it("runs PostgreSQL with the compose file's 512 MB of shared buffers (memory's table and index at 100,000 failures fit)", async () => {
    const shown = await docker([
      "compose",
      "-p",
      PROJECT,
      "exec",
      "-T",
      "postgres",
      "sh",
      "-c",
      'PGPASSWORD="$POSTGRES_PASSWORD" psql -h 127.0.0.1 -U loopsmith -tAc "SHOW shared_buffers" loopsmith',
    ]);
    expect(shown.trim()).toBe("512MB");
  });

  it("ends a task that needs a model, on a stack without a key, with provider_unconfigured (exit 2)", async () => {
    const r = await shell(
      `npx loopsmith --env-from client.env solve "a function add(a, b) in solution.py" --language python --json`,
    );
    expect(r.code).toBe(2);
    const error = jsonLines(r.stdout).at(-1);
    expect(error).toMatchObject({
      kind: "error",
      code: "provider_unconfigured",
      message: expect.stringContaining("ANTHROPIC_API_KEY"),
    });
  });

  it("brings a service killed with kill -9 back, healthy", async () => {
    const before = (await inspect(await containerOf("builder"))).RestartCount;
    process.kill(await nodePid("builder"), "SIGKILL");
    // Docker restarts the container once it has seen the exit; on a loaded 2-core machine
    // that can take longer than any fixed pause, and until then the old "healthy" stands.
    const restarted = await inspectUntil("builder", (i) => i.RestartCount > before, 60_000);
    expect(restarted?.RestartCount).toBe(before + 1);
    await healthy("builder", 120_000);
  });

  it("logs the NATS disconnect and the reconnect when the server is killed and comes back", async () => {
    const natsPid = Number((await docker(["inspect", "-f", "{{.State.Pid}}", await containerOf("nats")])).trim());
    process.kill(natsPid, "SIGKILL");
    const started = Date.now();
    let logs = "";
    while (Date.now() - started < 90_000) {
      logs = await docker(["compose", "-p", PROJECT, "logs", "--no-color", "reviewer"]);
      if (logs.includes("NATS reconnected")) break;
      await new Promise((r) => setTimeout(r, 1_000));
    }
    expect(logs).toContain("NATS disconnected; reconnecting");
    expect(logs).toContain("NATS reconnected");
    await healthy("reviewer", 60_000);
  });

  it("stops with the documented down", async () => {
    const down = lines.find((l) => l.startsWith("docker compose down"));
    expect(down).toBeDefined();
    const r = await shell(down as string, {}, 180_000);
    expect(r.code).toBe(0);
    expect((await docker(["compose", "-p", PROJECT, "ps", "-q"])).trim()).toBe("");
  });
});
