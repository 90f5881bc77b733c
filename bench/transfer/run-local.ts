/**
 * Runs a HumanEval completion against its record's tests on the host, with the host's
 * `python3`, and gives the result in the executor's shape ({@link ExecutionResult}), so the
 * architect's `errorTextOf` and `failingTests` make of it what the loop stores.
 *
 * The files are the sandbox run's (`solution.py` and the record's `humanevalTestFiles`), and
 * pytest runs with the sandbox command's options (see `pytest-fork.py`); its JUnit report is
 * read by the executor's `parseJUnit`. What differs from the sandbox: no container (a forked
 * child with address-space, CPU and file-size limits and a wall-clock kill), no network only
 * through a user and network namespace of its own (required: the driver refuses to run
 * without it), and no verdict controller (the mutants here do not forge results). A completion is first screened by plain `python3`
 * (prompt, completion, test and `check(<entry_point>)`, as `plainRequest` does): one that
 * passes there passes the harness too, so pytest runs only for those that fail. On a host
 * without pytest the plain run is the result (a traceback instead of pytest's report).
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface, type Interface } from "node:readline";
import { fileURLToPath } from "node:url";
import { humanevalTestFiles, type HumanEvalRecord } from "@loopsmith/evals";
import { parseJUnit } from "@loopsmith/executor";
import type { ExecutionResult } from "@loopsmith/shared/contracts";

const DRIVER = fileURLToPath(new URL("./pytest-fork.py", import.meta.url));

/** What ran the tests. */
export interface RunnerInfo {
  /** The interpreter (`sys.executable` of the `python3` on PATH) and its version. */
  python: string;
  /** pytest's version, or null when the host has none (plain Python asserts then). */
  pytest: string | null;
}

interface Reply {
  exitCode: number | null;
  timedOut: boolean;
  ms: number;
}

/** One warm interpreter that forks a child per run (`pytest-fork.py`), one run at a time. */
class ForkServer {
  private readonly lines: AsyncIterator<string>;
  /** The end of what the driver wrote to stderr (its own errors; a run's output goes to its file). */
  stderr = "";
  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly rl: Interface,
  ) {
    this.lines = rl[Symbol.asyncIterator]();
  }

  static start(python: string): ForkServer {
    const child = spawn(python, ["-I", "-B", "-u", DRIVER], {
      env: {
        PATH: `${dirname(python)}:/usr/bin:/bin`,
        HOME: tmpdir(),
        LANG: "C.UTF-8",
        LC_ALL: "C.UTF-8",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD: "1",
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const server = new ForkServer(child, createInterface({ input: child.stdout }));
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      server.stderr = (server.stderr + d).slice(-2_000);
    });
    return server;
  }

  async next(): Promise<string> {
    const r = await this.lines.next();
    if (r.done)
      throw new Error(`the test runner (${DRIVER}) exited (code ${this.child.exitCode}): ${this.stderr.trim()}`);
    return r.value;
  }

  async run(job: { dir: string; mode: "pytest" | "plain"; timeoutS: number; memoryMb: number }): Promise<Reply> {
    this.child.stdin.write(`${JSON.stringify(job)}\n`);
    return JSON.parse(await this.next()) as Reply;
  }

  stop(): void {
    this.rl.close();
    this.child.stdin.end();
  }
}

/** The host's `python3`: its `sys.executable` and version. */
function hostPython(): { python: string; version: string } {
  const r = spawnSync("python3", ["-c", "import sys; print(sys.executable); print(sys.version.split()[0])"], {
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`no python3 on PATH: ${r.error?.message ?? r.stderr}`);
  const [python = "", version = ""] = r.stdout.trim().split("\n");
  return { python, version };
}

/** A pool of fork servers: `workers` runs at once. */
export class LocalRunner {
  private readonly idle: ForkServer[];
  private readonly waiting: Array<(s: ForkServer) => void> = [];
  private constructor(
    servers: ForkServer[],
    readonly info: RunnerInfo,
    private readonly base: string,
    private readonly opts: { timeoutMs: number; memoryMb: number },
  ) {
    this.idle = servers;
  }

  static async open(opts: { workers: number; timeoutMs: number; memoryMb: number }): Promise<LocalRunner> {
    const { python, version } = hostPython();
    const servers = Array.from({ length: Math.max(1, opts.workers) }, () => ForkServer.start(python));
    const hellos = (await Promise.all(servers.map((s) => s.next()))).map(
      (line) => JSON.parse(line) as { pytest: string | null; isolation: string | null },
    );
    const refused = hellos.find((h) => h.isolation !== null);
    if (refused) {
      for (const s of servers) s.stop();
      throw new Error(`the mutants' runs need a network namespace of their own: ${refused.isolation}`);
    }
    const pytest = hellos[0]?.pytest ?? null;
    const base = await mkdtemp(join(tmpdir(), "loopsmith-bench-transfer-runs-"));
    return new LocalRunner(servers, { python: `${python} (Python ${version})`, pytest }, base, opts);
  }

  private async take(): Promise<ForkServer> {
    const s = this.idle.pop();
    return s ?? new Promise((resolve) => this.waiting.push(resolve));
  }

  private give(s: ForkServer): void {
    const w = this.waiting.shift();
    if (w) w(s);
    else this.idle.push(s);
  }

  private async once(
    files: Array<{ path: string; content: string }>,
    mode: "pytest" | "plain",
  ): Promise<ExecutionResult> {
    const dir = await mkdtemp(join(this.base, "run-"));
    const server = await this.take();
    try {
      for (const f of files) await writeFile(join(dir, f.path), f.content);
      const reply = await server.run({
        dir,
        mode,
        timeoutS: this.opts.timeoutMs / 1000,
        memoryMb: this.opts.memoryMb,
      });
      const output = await readFile(join(dir, "output.txt"), "utf8").catch(() => "");
      const xml = mode === "pytest" ? await readFile(join(dir, "result.xml"), "utf8").catch(() => "") : "";
      const tests = (xml && parseJUnit(xml)) || [];
      const status = reply.timedOut
        ? "timeout"
        : reply.exitCode === 0
          ? "passed"
          : reply.exitCode === 1 &&
              (mode === "plain" || tests.some((t) => t.status === "failed" || t.status === "error"))
            ? "failed"
            : "error";
      return {
        status,
        exitCode: reply.exitCode,
        durationMs: reply.ms,
        tests,
        stdout: output,
        stderr: "",
        truncated: false,
        verdict: mode === "pytest" ? "result_file" : "exit_code",
      };
    } finally {
      this.give(server);
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** Runs `prompt + body` against the record's tests (plain screen, then pytest when it fails). */
  async run(rec: HumanEvalRecord, prompt: string, body: string): Promise<ExecutionResult> {
    const program = `${prompt}${body}\n${rec.test}\ncheck(${rec.entry_point})\n`;
    const plain = await this.once([{ path: "program.py", content: program }], "plain");
    if (plain.status !== "failed" || !this.info.pytest) return plain;
    return this.once([{ path: "solution.py", content: `${prompt}${body}` }, ...humanevalTestFiles(rec)], "pytest");
  }

  async close(): Promise<void> {
    for (const s of this.idle) s.stop();
    await rm(this.base, { recursive: true, force: true });
  }
}
