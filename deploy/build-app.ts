/**
 * Builds the application once to JavaScript for the app image (`npm run build`): each
 * service's entry point and the CLI are bundled by esbuild into `dist/app/dist/*.js` (code
 * shared between entry points in chunks), with the files they read at run time and the few
 * packages that cannot be bundled (they load wasm or data files from beside themselves)
 * copied beside. `deploy/Dockerfile` copies `dist/app` into the image as it is: no
 * TypeScript compiler, no tsx, no development dependency at run time.
 *
 *   dist/app/package.json                 the root manifest (how `assetPath` finds the root)
 *   dist/app/dist/<entry>.js, chunk-*.js  architect, builder, reviewer, executor, memory, cli
 *   dist/app/shared/prompts/              the prompts
 *   dist/app/services/memory/migrations/  the memory migrations
 *   dist/app/deploy/seccomp/sandbox.json  the sandbox's seccomp profile
 *   dist/app/deploy/rootfs/sandbox-python/loopsmith_verdict.py  the pytest verdict plugin a task's own image is given
 *   dist/app/node_modules/                PGlite (+ pgvector, socket)
 *
 * It also writes `dist/app/build.json` (cli/bin/build-stamp.js): the source files the bundles
 * were made from and a fingerprint of their contents. The `loopsmith` command and the stacks
 * it starts run the build only while that fingerprint matches the sources. A build of the
 * default folder that is already current is not made again (`--force` makes it), so a running
 * stack's build is not removed under it.
 *
 * Usage: node --import tsx deploy/build-app.ts [--out <dir>] [--metafile] [--force]
 */
import { cp, mkdir, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Plugin } from "esbuild";
import { BUILD_DIR, BUILD_STAMP, currentBuild, makeStamp } from "../cli/bin/build-stamp.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Entry points: output name → source. */
const ENTRIES: Record<string, string> = {
  architect: "services/architect/src/main.ts",
  builder: "services/builder/src/main.ts",
  reviewer: "services/reviewer/src/main.ts",
  executor: "services/executor/src/main.ts",
  memory: "services/memory/src/main.ts",
  cli: "cli/src/main.ts",
};

/**
 * Packages left out of the bundle and copied whole (less their source maps): they find wasm
 * and data files next to their own modules, or are loaded by a `require` esbuild cannot follow.
 */
const COPIED = [
  "@electric-sql/pglite",
  "@electric-sql/pglite-pgvector",
  "@electric-sql/pglite-socket",
  // Model prices (shared/src/llm/prices.ts): loaded with createRequire on the first look-up,
  // so services that never price a call never parse its data; esbuild cannot see that load.
  "@pydantic/genai-prices",
];
/**
 * Optional native modules that bundled packages try to load inside `try` (pg's `pg-native`,
 * ssh2's `cpu-features` and its crypto binding): left unresolved, so they fail as optional.
 * `pino-pretty` is loaded by name in a worker thread; the image logs JSON and never asks for it.
 */
const OPTIONAL = ["pg-native", "cpu-features", "pino-pretty"];

/** Files and folders read at run time, relative to the root. */
const ASSETS = [
  "shared/prompts",
  "services/memory/migrations",
  "deploy/seccomp/sandbox.json",
  "deploy/rootfs/sandbox-python/loopsmith_verdict.py",
];

/** Marks the copied and optional packages (and native `.node` files) external. */
const externals: Plugin = {
  name: "loopsmith-externals",
  setup(b) {
    const names = [...COPIED, ...OPTIONAL];
    b.onResolve({ filter: /.*/ }, (args) => {
      if (args.path.endsWith(".node")) return { path: args.path, external: true };
      const hit = names.some((n) => args.path === n || args.path.startsWith(`${n}/`));
      return hit ? { path: args.path, external: true } : undefined;
    });
  },
};

/** Copies a folder without source maps. */
async function copyTree(from: string, to: string): Promise<void> {
  await cp(from, to, { recursive: true, dereference: true, filter: (src) => !src.endsWith(".map") });
}

/** The files under `path` (relative to the root, `/`-separated), or `path` itself when it is a file. */
async function filesUnder(path: string): Promise<string[]> {
  if (!(await stat(join(ROOT, path))).isDirectory()) return [path];
  const entries = await readdir(join(ROOT, path), { withFileTypes: true });
  return (
    await Promise.all(
      entries.map((e) =>
        e.isDirectory() ? filesUnder(`${path}/${e.name}`) : Promise.resolve(e.isFile() ? [`${path}/${e.name}`] : []),
      ),
    )
  ).flat();
}

/** Size of a folder in bytes. */
async function sizeOf(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += await sizeOf(path);
    else if (entry.isFile()) total += (await stat(path)).size;
  }
  return total;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const outIndex = args.indexOf("--out");
  const out = resolve(outIndex >= 0 && args[outIndex + 1] ? (args[outIndex + 1] as string) : join(ROOT, BUILD_DIR));
  const started = Date.now();
  if (out === join(ROOT, BUILD_DIR) && !args.includes("--force") && currentBuild(ROOT, {})) {
    process.stdout.write(
      `build: ${relative(process.cwd(), out) || "."} is current (made from these sources); --force makes it again\n`,
    );
    return;
  }
  await rm(out, { recursive: true, force: true });
  await mkdir(out, { recursive: true });

  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([name, src]) => [name, join(ROOT, src)])),
    outdir: join(out, "dist"),
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: false,
    legalComments: "none",
    metafile: true,
    logLevel: "warning",
    plugins: [externals],
    // CommonJS packages bundled into ES modules call `require` for Node's built-ins and read
    // `__dirname`; both are given as globals (a module-level name could clash with a bundled one).
    banner: {
      js: [
        'import { createRequire as __loopsmithRequire } from "node:module";',
        'import { dirname as __loopsmithDirname } from "node:path";',
        'import { fileURLToPath as __loopsmithPath } from "node:url";',
        "globalThis.require ??= __loopsmithRequire(import.meta.url);",
        "globalThis.__filename ??= __loopsmithPath(import.meta.url);",
        "globalThis.__dirname ??= __loopsmithDirname(globalThis.__filename);",
      ].join(" "),
    },
  });
  if (args.includes("--metafile")) await writeFile(join(out, "meta.json"), JSON.stringify(result.metafile));

  const manifest = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as {
    name: string;
    version: string;
    license?: string;
  };
  await writeFile(
    join(out, "package.json"),
    `${JSON.stringify({ name: manifest.name, version: manifest.version, private: true, type: "module", license: manifest.license, bin: { loopsmith: "dist/cli.js" } }, null, 2)}\n`,
  );
  for (const asset of ASSETS) await copyTree(join(ROOT, asset), join(out, asset));
  for (const pkg of COPIED) await copyTree(join(ROOT, "node_modules", pkg), join(out, "node_modules", pkg));
  // The stamp: the bundles' own sources, the files copied in, the lock file (the packages
  // bundled) and this script. Written last, so a build that failed half-way is never current.
  const sources = Object.keys(result.metafile.inputs).filter((f) => !f.split("/").includes("node_modules"));
  const assets = (await Promise.all(ASSETS.map((a) => filesUnder(a)))).flat();
  const stamp = makeStamp(ROOT, [
    ...sources,
    ...assets,
    "package-lock.json",
    "deploy/build-app.ts",
    "cli/bin/build-stamp.js",
  ]);
  await writeFile(join(out, BUILD_STAMP), `${JSON.stringify(stamp, null, 2)}\n`);
  const bytes = await sizeOf(out);
  process.stdout.write(
    `build: ${relative(process.cwd(), out) || "."} (${(bytes / 1e6).toFixed(1)} MB) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
}

await main();
