/**
 * loopsmith as a user installs it (docs/INSTALL.md): the package
 * `npm run pack` makes is installed with `npm install -g` into a temporary prefix; a git
 * repository with a failing test (a copy of examples/repo-bugfix/repo) is made in a
 * temporary folder outside this checkout; there, as a user who is not root and is in the
 * docker group, `loopsmith solve "<goal>"` (no `--repo`: the repository of the working
 * directory), scripted and without a key, makes the test pass and leaves its branch in that
 * repository. The data directory is `$XDG_DATA_HOME/loopsmith`.
 *
 * The user: run as root, `loopsmith-ci` (deploy/prepare.sh creates it: `useradd -G docker`),
 * through `runuser`; run as anyone else, that user, who must be in the docker group. The
 * images are the local ones (`loopsmith/*:local`), as built by deploy/prepare.sh.
 * About 2.5 minutes: the pack ~35 s, the install ~12 s, the solve ~100 s.
 */
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO, runBash, runNode, type CliRun } from "../fixtures/cli.js";

/** The user `deploy/prepare.sh` creates for this test when it runs as root. */
const CI_USER = "loopsmith-ci";
const asRoot = process.getuid?.() === 0;
const user = asRoot ? CI_USER : userInfo().username;

const tmp = mkdtempSync(join(tmpdir(), "loopsmith-install-"));
const prefix = join(tmp, "prefix");
const work = join(tmp, "inventory");
const dataHome = join(tmp, "data");
const script = join(tmp, "script.json");
const taskId = `install-${Date.now().toString(36)}`;
const goal = "Fix the failing test tests/test_pricing.py::test_bulk_discount_starts_at_threshold";

/** A user's numeric ids, from `id`. */
function idsOf(name: string): { uid: number; gid: number; groups: string[] } {
  const out = (flag: string): string => execFileSync("id", [flag, name], { encoding: "utf8" }).trim();
  return { uid: Number(out("-u")), gid: Number(out("-g")), groups: out("-Gn").split(/\s+/) };
}

/** Quotes one word for bash. */
const q = (word: string): string => `'${word.replaceAll("'", `'\\''`)}'`;

/**
 * Runs a bash line as the test's user in `cwd`, with only the environment a user's shell has
 * (PATH with the prefix's bin first, HOME, XDG_DATA_HOME; DOCKER_HOST when set here).
 */
function asUser(line: string, cwd: string, timeoutMs = 600_000): Promise<CliRun> {
  const entry = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${user}:`));
  const home = entry?.split(":")[5] ?? "/tmp";
  const env = [
    `PATH=${join(prefix, "bin")}:/usr/local/bin:/usr/bin:/bin`,
    `HOME=${home}`,
    `USER=${user}`,
    `XDG_DATA_HOME=${dataHome}`,
    "LANG=C.UTF-8",
    ...(process.env.DOCKER_HOST ? [`DOCKER_HOST=${process.env.DOCKER_HOST}`] : []),
  ];
  const inner = `cd ${q(cwd)} && ${line}`;
  const cmd = asRoot
    ? `runuser -u ${q(user)} -- env -i ${env.map(q).join(" ")} bash -c ${q(inner)}`
    : `env -i ${env.map(q).join(" ")} bash -c ${q(inner)}`;
  return runBash(cmd, { PATH: process.env.PATH ?? "/usr/bin:/bin" }, timeoutMs);
}

/** Throws with a command's output when it failed. */
function ok(run: CliRun, what: string): CliRun {
  if (run.code !== 0)
    throw new Error(`${what} failed (exit ${run.code}):\n${run.stdout.slice(-3000)}\n${run.stderr.slice(-3000)}`);
  return run;
}

let solved: CliRun;
const timings: Record<string, number> = {};

describe("the installed package, used in the user's own repository", () => {
  beforeAll(async () => {
    const ids = idsOf(user);
    if (ids.uid === 0) throw new Error(`the install test runs loopsmith as a user who is not root; ${user} is root`);
    if (!ids.groups.includes("docker"))
      throw new Error(`${user} is not in the docker group (deploy/prepare.sh makes ${CI_USER}: useradd -G docker)`);

    const pack = ok(await runNode(join(REPO, "deploy", "pack.ts"), []), "npm run pack");
    timings.pack = pack.ms;
    const tarball = pack.stdout.trim().split("\n").at(-1) as string;
    expect(existsSync(tarball), tarball).toBe(true);

    // Readable by the user (mkdtemp makes 0700 folders); the repository and the data are the user's.
    chmodSync(tmp, 0o755);
    const install = ok(
      await runBash(`npm install -g --prefix ${q(prefix)} ${q(tarball)} --no-audit --no-fund`, { ...process.env }),
      "npm install -g",
    );
    timings.install = install.ms;
    cpSync(join(REPO, "examples", "repo-bugfix", "repo"), work, { recursive: true });
    cpSync(join(REPO, "examples", "repo-bugfix", "script.json"), script);
    chmodSync(script, 0o644);
    mkdirSync(dataHome, { recursive: true });
    if (asRoot) execFileSync("chown", ["-R", `${ids.uid}:${ids.gid}`, work, dataHome]);
    else chownSync(work, ids.uid, ids.gid);
    ok(
      await asUser(
        "git init -q && git add -A && git -c user.name=you -c user.email=you@example.com commit -qm initial",
        work,
      ),
      "git init",
    );

    solved = await asUser(
      `loopsmith solve ${q(goal)} --provider scripted --script ${q(script)} --task-id ${q(taskId)}`,
      work,
    );
    timings.solve = solved.ms;
    process.stdout.write(
      `install test: pack ${(timings.pack / 1000).toFixed(1)} s, install ${(timings.install / 1000).toFixed(1)} s, solve ${(timings.solve / 1000).toFixed(1)} s\n`,
    );
  }, 900_000);

  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it("puts loopsmith on PATH from the prefix, at the checkout's version", async () => {
    const which = ok(await asUser("command -v loopsmith && loopsmith --version", tmp), "loopsmith --version");
    const [path, version] = which.stdout.trim().split("\n");
    expect(path).toBe(join(prefix, "bin", "loopsmith"));
    const manifest = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
    expect(version).toBe(manifest.version);
  });

  it("solves the task in the working directory's repository, as a user who is not root", async () => {
    expect(solved.code, `${solved.stdout.slice(-3000)}\n${solved.stderr.slice(-3000)}`).toBe(0);
    expect(solved.stdout).toMatch(/PASSED/);
    expect(solved.stdout).toContain(`branch loopsmith/${taskId}`);
  });

  it("leaves the branch in that repository, the user's own branch where it was", async () => {
    const branches = ok(await asUser("git branch --format='%(refname:short)'", work), "git branch");
    expect(branches.stdout.split("\n")).toContain(`loopsmith/${taskId}`);
    const changed = ok(await asUser(`git diff --name-only HEAD loopsmith/${taskId}`, work), "git diff");
    expect(changed.stdout.trim().split("\n")).toEqual(["inventory/pricing.py"]);
    const head = ok(await asUser("git symbolic-ref --short HEAD && git status --porcelain", work), "git status");
    expect(head.stdout.trim()).not.toContain("loopsmith/");
    expect(head.stdout.trim().split("\n")).toHaveLength(1);
  });

  it("keeps its data under $XDG_DATA_HOME/loopsmith, owned by the user", () => {
    const dir = join(dataHome, "loopsmith");
    expect(existsSync(dir)).toBe(true);
    expect(statSync(dir).uid).toBe(idsOf(user).uid);
  });
});
