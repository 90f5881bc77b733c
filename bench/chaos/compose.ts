/**
 * The compose side of the chaos bench: one compose project of its own (a unique name, its
 * own NATS port, scripted provider through an override file in a temp folder), the host
 * pids of its containers, `kill -9`, logs, and the sandbox containers its executors left.
 */
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdirSync, openSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { LABEL as SANDBOX_LABEL, LABEL_HOST as SANDBOX_HOST_LABEL } from "@loopsmith/executor";
import { NATS_ROLES, inboxPrefixOf, passwordVariable } from "@loopsmith/shared/bus";

const run = promisify(execFile);

/** A compose project driven by the bench. */
export interface Project {
  /** Compose project name (unique per run). */
  name: string;
  /** Host port of the project's NATS. */
  natsPort: number;
  /** How the bench connects: as the stack's `client` user (the permission matrix of deploy/nats.conf). */
  client: { user: string; pass: string; inboxPrefix: string };
  /** The stack's `admin` user: the audit reads the whole events stream, which no client may. */
  admin: { user: string; pass: string };
  /** Folder of the override file, compose's output and saved logs. */
  dir: string;
  /** Runs `docker compose <args>` for this project; output goes to `compose.log`. @throws when compose fails (with its last lines) */
  compose(args: string[], timeoutMs?: number): Promise<string>;
  /**
   * Starts the cluster stack through `deploy/cluster-up.sh <args>` (the README's cluster
   * command, which restarts a NATS node left out of the JetStream meta group), with this
   * project's files, name and environment; output goes to `compose.log`.
   * @throws when the script fails (with its last lines)
   */
  clusterUp(args: string[], timeoutMs?: number): Promise<void>;
  /** Ids of the project's running containers of a service (all replicas). */
  containers(service: string): Promise<string[]>;
  /** Saves `docker compose logs` of every service to `<dir>/logs/<service>.log`; returns the folder. */
  saveLogs(services: string[]): Promise<string>;
  /**
   * Streams a service's logs (`logs -f`) into `<dir>/logs/<file>` until its containers are
   * gone (for logs of containers a `down` removes); the promise settles when the stream ends.
   */
  followLogs(service: string, file: string): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (published for NATS so a restarted container keeps it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

/** Runs `docker <args>` and returns its stdout. */
export async function docker(args: string[], timeoutMs = 60_000): Promise<string> {
  const { stdout } = await run("docker", args, { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/**
 * Prepares a compose project over the repository's docker-compose.yml: an override file
 * that publishes NATS on `natsPort` only (`!override`), runs every service with the
 * scripted provider on `scriptDir/script.json` (mounted read-only at /chaos) and leaves
 * everything else as a user gets it. `files` are further compose files, after the main one
 * (the cluster file: `deploy/compose.cluster.yml`). `env` adds to compose's environment
 * (`LOOPSMITH_NATS_CLUSTER_CONF`, say).
 */
export function prepareProject(opts: {
  repo: string;
  name: string;
  natsPort: number;
  scriptDir: string;
  dir: string;
  files?: string[];
  env?: NodeJS.ProcessEnv;
}): Project {
  const { repo, name, natsPort, dir } = opts;
  mkdirSync(dir, { recursive: true });
  const app = ["memory", "executor", "builder", "reviewer", "architect"];
  const lines = ["services:", "  nats:", `    ports: !override ["127.0.0.1:${natsPort}:4222"]`];
  for (const s of app) {
    lines.push(
      `  ${s}:`,
      "    environment:",
      "      LOOPSMITH_PROVIDER: scripted",
      "      LOOPSMITH_SCRIPT: /chaos/script.json",
      `    volumes: [${JSON.stringify(`${opts.scriptDir}:/chaos:ro`)}]`,
    );
  }
  const override = join(dir, "chaos.override.yml");
  writeFileSync(override, lines.join("\n") + "\n");
  const logFile = join(dir, "compose.log");
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LOOPSMITH_NATS_IMAGE: process.env.LOOPSMITH_NATS_IMAGE ?? "loopsmith/nats:local",
    LOOPSMITH_POSTGRES_IMAGE: process.env.LOOPSMITH_POSTGRES_IMAGE ?? "loopsmith/postgres:local",
    LOOPSMITH_RUNTIME_IMAGE: process.env.LOOPSMITH_RUNTIME_IMAGE ?? "loopsmith/node-runtime:local",
    // What deploy/compose-env.sh writes to .env for a user: a generated password, the socket's group.
    POSTGRES_PASSWORD: process.env.POSTGRES_PASSWORD ?? randomBytes(18).toString("base64url"),
    DOCKER_GID: process.env.DOCKER_GID ?? String(statSync(process.env.DOCKER_SOCKET ?? "/var/run/docker.sock").gid),
    // The cluster file's extra engines load the sandbox images from here (compose-env.sh --engines).
    LOOPSMITH_SANDBOX_IMAGES_FILE: process.env.LOOPSMITH_SANDBOX_IMAGES_FILE ?? join(repo, "sandbox-images.tar"),
    // And a password per NATS user (a letter first: nats-server parses the value as a token).
    ...Object.fromEntries(
      NATS_ROLES.map((r) => [
        passwordVariable(r),
        process.env[passwordVariable(r)] ?? `p${randomBytes(16).toString("hex")}`,
      ]),
    ),
    ...opts.env,
  };
  const files = [join(repo, "docker-compose.yml"), ...(opts.files ?? []).map((f) => join(repo, f)), override];
  const base = ["compose", "-p", name, ...files.flatMap((f) => ["-f", f])];
  /** Runs `cmd argv` from the repository, its output appended to `compose.log` after `$ shown`. @throws naming `label` and the last lines */
  const logged = async (
    label: string,
    shown: string,
    cmd: string,
    argv: string[],
    runEnv: NodeJS.ProcessEnv,
    timeoutMs: number,
  ): Promise<string> => {
    appendFileSync(logFile, `\n$ ${shown}\n`);
    try {
      const { stdout, stderr } = await run(cmd, argv, {
        env: runEnv,
        cwd: repo,
        timeout: timeoutMs,
        maxBuffer: 256 * 1024 * 1024,
      });
      appendFileSync(logFile, stdout + stderr);
      return stdout;
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      appendFileSync(logFile, `${e.stdout ?? ""}${e.stderr ?? ""}`);
      const tail = `${e.stderr ?? ""}`.trim().split("\n").slice(-8).join("\n");
      throw new Error(`${label} failed (${logFile}):\n${tail || e.message}`, { cause: err });
    }
  };
  const compose = (args: string[], timeoutMs = 600_000): Promise<string> =>
    logged(
      `docker compose ${args[0]}`,
      `docker compose ${args.join(" ")}`,
      "docker",
      [...base, ...args],
      env,
      timeoutMs,
    );
  // deploy/cluster-up.sh runs compose on this project's files and name (COMPOSE_FILE, COMPOSE_PROJECT_NAME).
  const clusterEnv = { ...env, COMPOSE_FILE: files.join(":"), COMPOSE_PATH_SEPARATOR: ":", COMPOSE_PROJECT_NAME: name };
  const clusterUp = async (args: string[], timeoutMs = 900_000): Promise<void> =>
    void (await logged(
      "deploy/cluster-up.sh",
      `bash deploy/cluster-up.sh ${args.join(" ")}`,
      "bash",
      [join(repo, "deploy", "cluster-up.sh"), ...args],
      clusterEnv,
      timeoutMs,
    ));
  return {
    name,
    natsPort,
    clusterUp,
    client: { user: "client", pass: env[passwordVariable("client")] as string, inboxPrefix: inboxPrefixOf("client") },
    admin: { user: "admin", pass: env[passwordVariable("admin")] as string },
    dir,
    compose,
    async containers(service) {
      return (await compose(["ps", "-q", service], 30_000)).split("\n").filter(Boolean);
    },
    followLogs(service, file) {
      mkdirSync(join(dir, "logs"), { recursive: true });
      const fd = openSync(join(dir, "logs", file), "a");
      const child = spawn("docker", [...base, "logs", "-f", "--no-color", "--timestamps", service], {
        env,
        cwd: repo,
        stdio: ["ignore", fd, fd],
      });
      return new Promise((resolve) => child.once("close", () => resolve()).once("error", () => resolve()));
    },
    async saveLogs(services) {
      const logs = join(dir, "logs");
      mkdirSync(logs, { recursive: true });
      for (const s of services) {
        try {
          writeFileSync(join(logs, `${s}.log`), await compose(["logs", "--no-color", "--timestamps", s], 120_000));
        } catch (err) {
          writeFileSync(join(logs, `${s}.log`), `could not read the logs: ${(err as Error).message}\n`);
        }
      }
      return logs;
    },
  };
}

/** The host pid of a container's first process (with `init: true`, the init), or 0 when it is not running. */
export async function hostPid(container: string): Promise<number> {
  try {
    return Number((await docker(["inspect", "-f", "{{.State.Pid}}", container], 10_000)).trim()) || 0;
  } catch {
    return 0;
  }
}

/** What is left on the engine after a `down`. */
export interface Leftovers {
  /** Sandbox containers made by this project's executors (by their host label). */
  ours: string[];
  /** Sandbox containers on the whole engine (other projects and tests included). */
  all: number;
}

/**
 * Sandbox containers left on the engine. `executors` are the (full or short) ids of the
 * project's executor containers: in compose a sandbox's host label is its executor's
 * container hostname, the first 12 characters of the container id.
 */
export async function sandboxLeftovers(executors: Iterable<string>): Promise<Leftovers> {
  const hosts = new Set([...executors].map((id) => id.slice(0, 12)));
  const out = await docker([
    "ps",
    "-a",
    "--filter",
    `label=${SANDBOX_LABEL}`,
    "--format",
    `{{.ID}} {{.State}} {{.Label "${SANDBOX_HOST_LABEL}"}} {{.Image}}`,
  ]);
  const rows = out.split("\n").filter(Boolean);
  const ours = rows.filter((r) => hosts.has(r.split(" ")[2] ?? ""));
  return { ours, all: rows.length };
}

/** Removes the given sandbox containers (rows of {@link sandboxLeftovers}); errors are ignored. */
export async function removeContainers(rows: string[]): Promise<void> {
  const ids = rows.map((r) => r.split(" ")[0]).filter((id): id is string => Boolean(id));
  if (ids.length) await docker(["rm", "-f", ...ids]).catch(() => "");
}
