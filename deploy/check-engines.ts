/**
 * Checks that loopsmith states one Node.js floor and that everything agrees with it
 * (`npm run lint:engines`, part of `npm run lint`):
 *
 * - the floor is the root `package.json`'s `engines.node` (a semver range, e.g. `>=20.12`);
 *   its lowest version (`semver.minVersion`, e.g. 20.12.0) is the version checked;
 * - every workspace's `package.json` states the same `engines.node`;
 * - every runtime package installed (`npm query .prod`: the production dependencies of the
 *   root and the workspaces, transitively) whose `engines.node` is set accepts that version
 *   (`semver.satisfies`); a package that declares a newer Node is pinned with `overrides` in
 *   the root `package.json` instead;
 * - `deploy/Dockerfile`'s default base image (`node:<major>-…`) is the floor's major;
 * - the README's requirements name the floor (`Node.js <major>.<minor>`).
 *
 * Prints one line per disagreement and exits 1 when there is any, else prints the floor and
 * the number of packages checked and exits 0. Needs the node modules installed (`npm ci`).
 *
 * Usage: node --import tsx deploy/check-engines.ts
 */
import { execFile } from "node:child_process";
import { readFile, readdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import semver from "semver";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The fields of a `package.json` (or an `npm query` row) this check reads. */
interface Manifest {
  name?: string;
  version?: string;
  engines?: { node?: string };
  workspaces?: string[];
  /** `npm query` only: where the package is installed, relative to the root. */
  location?: string;
}

/** Reads a JSON file under the root. */
async function readJson<T>(path: string): Promise<T> {
  return JSON.parse(await readFile(join(ROOT, path), "utf8")) as T;
}

/**
 * The runtime packages installed: `npm query .prod` (one row per installed copy).
 * @throws the child process error when npm fails (no node modules, a broken tree)
 */
async function runtimePackages(): Promise<Manifest[]> {
  const { stdout } = await promisify(execFile)("npm", ["query", ".prod"], {
    cwd: ROOT,
    maxBuffer: 256 * 1024 * 1024,
  });
  return JSON.parse(stdout) as Manifest[];
}

/** The workspace folders named by the root manifest's globs (`services/*` → each folder). */
async function workspaceDirs(globs: readonly string[]): Promise<string[]> {
  const dirs: string[] = [];
  for (const glob of globs) {
    if (!glob.endsWith("/*")) {
      dirs.push(glob);
      continue;
    }
    const parent = glob.slice(0, -2);
    for (const entry of await readdir(join(ROOT, parent), { withFileTypes: true })) {
      if (entry.isDirectory()) dirs.push(`${parent}/${entry.name}`);
    }
  }
  return dirs;
}

async function main(): Promise<void> {
  const problems: string[] = [];
  const root = await readJson<Manifest>("package.json");
  const floor = root.engines?.node;
  const lowest = floor && semver.validRange(floor) ? semver.minVersion(floor) : null;
  if (!floor || !lowest) {
    process.stderr.write(`check-engines: package.json has no valid engines.node (${String(floor)})\n`);
    process.exit(1);
  }

  for (const dir of await workspaceDirs(root.workspaces ?? [])) {
    const manifest = await readJson<Manifest>(join(dir, "package.json")).catch(() => null);
    if (manifest && manifest.engines?.node !== floor) {
      problems.push(`${dir}/package.json: engines.node is ${String(manifest.engines?.node)}, the root says ${floor}`);
    }
  }

  const packages = await runtimePackages();
  for (const pkg of packages) {
    const range = pkg.engines?.node;
    if (range === undefined || !pkg.location) continue;
    if (!semver.validRange(range) || !semver.satisfies(lowest, range)) {
      problems.push(
        `${pkg.name}@${pkg.version} (${pkg.location}) declares node ${range}, which excludes ${lowest.version}: pin a version that supports it in the root package.json's overrides`,
      );
    }
  }

  const dockerfile = await readFile(join(ROOT, "deploy", "Dockerfile"), "utf8");
  const base = /^ARG RUNTIME_IMAGE=node:(\d+)/m.exec(dockerfile);
  if (!base || Number(base[1]) !== lowest.major) {
    problems.push(
      `deploy/Dockerfile: the default base image is not node:${lowest.major} (${base?.[0] ?? "no ARG RUNTIME_IMAGE=node:…"})`,
    );
  }

  const readme = await readFile(join(ROOT, "README.md"), "utf8");
  if (!readme.includes(`Node.js ${lowest.major}.${lowest.minor}`)) {
    problems.push(`README.md: does not name the floor as "Node.js ${lowest.major}.${lowest.minor}"`);
  }

  for (const problem of problems) process.stderr.write(`check-engines: ${problem}\n`);
  if (problems.length > 0) process.exit(1);
  process.stdout.write(`check-engines: node ${floor} (${lowest.version}): ${packages.length} runtime packages agree\n`);
}

await main();
