/**
 * bench/repomap: how long the repo map of a large repository takes, through the same
 * `buildRepoMap()` the architect calls in repo mode. A synthetic repository is generated in a
 * temporary directory (seeded, so every run maps the same tree): by default 10,000 files,
 * about 70% Python, 25% TypeScript and 5% other files (Markdown, JSON, YAML, text), each
 * code file 20–200 lines of classes, methods and functions that call one another across
 * files (a few modules are called from everywhere, as utilities are), and a `tests/` folder.
 * Prints: the tree (files, MB), the cold build (nothing cached: walk, lexical index of every
 * file, graph, PageRank, lezer signatures of the files the map can show, render, and the
 * write of the disk cache) in wall and CPU ms with the load average (the machine may be shared),
 * how many files were parsed with lezer, the cached build (same commit, from memory),
 * the build from the disk cache alone (memory emptied), the tokens of the map and its first
 * lines, and the cold time against the goal "≤ 5 s on 2 cores for 10,000 files". Last, the
 * parser alone: the symbols of the first `--parse` code files (Python and TypeScript, read and
 * parsed one after another as the map does), their total size, time and definitions, and a
 * digest of those definitions (the same digest from two parsers means the same signatures).
 * Usage: npm run --silent bench:repomap -- [--files 10000] [--tokens 2048] [--seed 1] [--parse 1000] [--keep]
 * Exit code 1 when the cold build misses the goal (scaled to the number of files).
 */
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { buildRepoMap, clearRepoMapCache, type RepoMapInput } from "../services/architect/src/repo/map.js";
import { readSymbols } from "../services/architect/src/repo/symbols.js";

const { values: opts } = parseArgs({
  options: {
    files: { type: "string", default: "10000" },
    tokens: { type: "string", default: "2048" },
    seed: { type: "string", default: "1" },
    parse: { type: "string", default: "1000" },
    keep: { type: "boolean", default: false },
  },
});
const FILES = Number(opts.files);
const GOAL_MS = 5000 * (FILES / 10_000);

/** mulberry32: a small seeded generator, so the tree is the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(Number(opts.seed));
const int = (lo: number, hi: number): number => lo + Math.floor(rand() * (hi - lo + 1));
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
const WORDS = [
  "order",
  "invoice",
  "user",
  "record",
  "token",
  "report",
  "cache",
  "route",
  "batch",
  "price",
  "stock",
  "event",
];
const VERBS = ["load", "parse", "compute", "render", "validate", "merge", "fetch", "store", "apply", "build"];
const cap = (w: string): string => w[0]?.toUpperCase() + w.slice(1);

type Kind = "py" | "ts" | "other";
interface Planned {
  path: string;
  kind: Kind;
  /** The module's public names: [class, functions…]. */
  names: string[];
}

function plan(n: number): Planned[] {
  const files: Planned[] = [];
  for (let i = 0; i < n; i++) {
    const r = rand();
    const kind: Kind = r < 0.7 ? "py" : r < 0.95 ? "ts" : "other";
    const dir = `pkg${i % 40}/sub${Math.floor(i / 40) % 25}`;
    const w = pick(WORDS);
    if (kind === "py") {
      const test = i % 10 === 0;
      const path = test ? `tests/${dir}/test_${w}_${i}.py` : `src/${dir}/${w}_${i}.py`;
      files.push({ path, kind, names: [`${cap(w)}Model${i}`, ...VERBS.slice(0, 4).map((v) => `${v}_${w}_${i}`)] });
    } else if (kind === "ts") {
      files.push({
        path: `web/${dir}/${w}${i}.ts`,
        kind,
        names: [`${cap(w)}Service${i}`, ...VERBS.slice(4, 8).map((v) => `${v}${cap(w)}${i}`)],
      });
    } else {
      files.push({ path: `docs/${dir}/${w}_${i}.${pick(["md", "json", "yaml", "txt"])}`, kind, names: [] });
    }
  }
  return files;
}

/** A callee elsewhere in the tree: skewed toward low indices, so a few modules are hubs. */
function callee(files: Planned[], kind: Kind): string {
  for (;;) {
    const f = files[Math.floor(files.length * rand() ** 2.5)];
    if (f?.kind === kind) return pick(f.names.slice(1));
  }
}

function python(files: Planned[], f: Planned, lines: number): string {
  const [cls = "Model", ...fns] = f.names;
  const out = [`"""${f.path}: generated for bench/repomap."""`, "import os", "from typing import Any", ""];
  out.push(
    `class ${cls}:`,
    `    """A ${cls} record."""`,
    "",
    "    def __init__(self, name: str, size: int = 0) -> None:",
    "        self.name = name",
    "        self.size = size",
    "",
  );
  let m = 0;
  while (out.length < lines * 0.5) {
    out.push(`    def step_${m}(self, value: int, *args: Any) -> int:`, `        # step ${m} of ${cls}`);
    out.push(
      `        result = ${callee(files, "py")}(value, self.size)`,
      "        if result > 10:",
      `            return ${callee(files, "py")}(result) + len(args)`,
      "        return result",
      "",
    );
    m++;
  }
  for (const fn of fns) {
    if (out.length >= lines) break;
    out.push(`def ${fn}(data: dict, strict: bool = False) -> int:`, `    total = ${callee(files, "py")}(len(data))`);
    out.push(
      "    for key, value in data.items():",
      `        total += ${cls}(str(key), int(value)).step_0(total)`,
      "    return total",
      "",
      "",
    );
  }
  while (out.length < lines) out.push(`# padding: see ${callee(files, "py")} for details`);
  return out.slice(0, Math.max(lines, 20)).join("\n") + "\n";
}

function typescript(files: Planned[], f: Planned, lines: number): string {
  const [cls = "Service", ...fns] = f.names;
  const out = [
    `// ${f.path}: generated for bench/repomap.`,
    `import { ${callee(files, "ts")} } from "../util.js";`,
    "",
  ];
  out.push(`export interface ${cls}Options {`, "  size: number;", "  name?: string;", "}", "");
  out.push(`export class ${cls} {`, `  constructor(private readonly opts: ${cls}Options) {}`, "");
  let m = 0;
  while (out.length < lines * 0.5) {
    out.push(
      `  async step${m}(value: number, ...rest: string[]): Promise<number> {`,
      `    const result = ${callee(files, "ts")}(value, this.opts.size);`,
    );
    out.push(`    return result > 10 ? ${callee(files, "ts")}(result) + rest.length : result;`, "  }", "");
    m++;
  }
  out.push("}", "");
  for (const fn of fns) {
    if (out.length >= lines) break;
    out.push(
      `export function ${fn}(data: Record<string, number>, strict = false): number {`,
      `  let total = ${callee(files, "ts")}(Object.keys(data).length);`,
    );
    out.push(
      `  for (const [k, v] of Object.entries(data)) total += new ${cls}({ size: v, name: k }).step0(total) as unknown as number;`,
      "  return strict ? total : total + 1;",
      "}",
      "",
    );
  }
  while (out.length < lines) out.push(`// padding: see ${callee(files, "ts")} for details`);
  return out.slice(0, Math.max(lines, 20)).join("\n") + "\n";
}

function generate(root: string, files: Planned[]): number {
  let bytes = 0;
  for (const f of files) {
    const lines = int(20, 200);
    const text =
      f.kind === "py"
        ? python(files, f, lines)
        : f.kind === "ts"
          ? typescript(files, f, lines)
          : `# ${f.path}\n\n${"Notes about the project.\n".repeat(lines)}`;
    mkdirSync(dirname(join(root, f.path)), { recursive: true });
    writeFileSync(join(root, f.path), text);
    bytes += text.length;
  }
  return bytes;
}

const root = mkdtempSync(join(tmpdir(), "loopsmith-repomap-"));
const cacheDir = mkdtempSync(join(tmpdir(), "loopsmith-repomap-cache-"));
try {
  const planned = plan(FILES);
  const t0 = performance.now();
  const bytes = generate(root, planned);
  console.log(
    `tree: ${FILES} files, ${(bytes / 1e6).toFixed(1)} MB, generated in ${(performance.now() - t0).toFixed(0)} ms (${root})`,
  );
  const target = planned.find((f, i) => f.kind === "py" && i > FILES / 2 && !f.path.startsWith("tests/")) ?? planned[0];
  const test = planned.find((f) => f.path.startsWith("tests/"));
  const input: RepoMapInput = {
    root,
    commit: "0123456789abcdef0123456789abcdef01234567",
    goal: `${target?.names[2] ?? "it"} returns the wrong total for an empty record; fix it.`,
    focusFiles: test ? [test.path] : [],
    maxTokens: Number(opts.tokens),
  };
  console.log(`goal: ${input.goal}  (defined in ${target?.path}); focus: ${input.focusFiles?.join(", ")}`);

  const load = loadavg()
    .map((l) => l.toFixed(1))
    .join(" ");
  let cpu = process.cpuUsage();
  const cold = await buildRepoMap({ ...input, cacheDir });
  const coldCpu = process.cpuUsage(cpu);
  cpu = process.cpuUsage();
  const [stored = ""] = readdirSync(cacheDir);
  const parsed = (JSON.parse(readFileSync(join(cacheDir, stored), "utf8")) as { tags: unknown[] }).tags.length;
  const warm = await buildRepoMap(input);
  const warmCpu = process.cpuUsage(cpu);
  clearRepoMapCache();
  const disk = await buildRepoMap({ ...input, cacheDir });
  const same = cold.text === warm.text && warm.text === disk.text;

  const ms = (u: NodeJS.CpuUsage): string => ((u.user + u.system) / 1000).toFixed(0);
  console.log(
    `load average before: ${load} (${availableParallelism()} cores; CPU ms count every thread of this process)`,
  );
  console.log(
    `cold build:   ${cold.ms.toFixed(0)} ms wall, ${ms(coldCpu)} ms CPU  (${cold.files} files, fromCache ${cold.fromCache}; writes the disk cache)`,
  );
  console.log(`              lezer signatures parsed for ${parsed} of ${cold.files} files (the rest only indexed)`);
  console.log(
    `cached build: ${warm.ms.toFixed(0)} ms wall, ${ms(warmCpu)} ms CPU  (memory, fromCache ${warm.fromCache})`,
  );
  console.log(`disk cache:   ${disk.ms.toFixed(0)} ms  (memory emptied, fromCache ${disk.fromCache})`);
  const mapDigest = createHash("sha256").update(cold.text).digest("hex").slice(0, 12);
  console.log(
    `map: ${cold.tokens} tokens of ${input.maxTokens}, digest ${mapDigest}; identical across the three builds: ${same}`,
  );
  console.log(
    `top files: ${cold.ranked
      .slice(0, 3)
      .map((r) => `${r.path} (${r.score.toFixed(4)})`)
      .join(", ")}`,
  );
  console.log(cold.text.split("\n").slice(0, 12).join("\n"));
  const code = planned.filter((f) => f.kind !== "other").slice(0, Number(opts.parse));
  const digest = createHash("sha256");
  let [defs, codeBytes] = [0, 0];
  const [t1, cpu1] = [performance.now(), process.cpuUsage()];
  for (const f of code) {
    const s = readSymbols(root, f.path);
    defs += s?.defs.length ?? 0;
    digest.update(JSON.stringify(s?.defs ?? null));
  }
  const [parseMs, parseCpu] = [performance.now() - t1, process.cpuUsage(cpu1)];
  for (const f of code) codeBytes += statSync(join(root, f.path)).size;
  const perMb = (parseCpu.user + parseCpu.system) / 1000 / (codeBytes / 1e6);
  console.log(
    `parser:       ${code.length} code files (${(codeBytes / 1e6).toFixed(1)} MB) read and parsed in ${parseMs.toFixed(0)} ms wall, ${ms(parseCpu)} ms CPU (${perMb.toFixed(0)} CPU ms/MB)`,
  );
  console.log(`              ${defs} definitions, digest ${digest.digest("hex").slice(0, 12)}`);
  const ratio = cold.ms / GOAL_MS;
  console.log(
    `cold / goal: ${cold.ms.toFixed(0)} / ${GOAL_MS.toFixed(0)} ms = ${ratio.toFixed(2)} (goal ≤ 5 s for 10,000 files on 2 cores: ${ratio <= 1 ? "met" : "MISSED"})`,
  );
  if (ratio > 1 || !same) process.exitCode = 1;
} finally {
  if (!opts.keep) rmSync(root, { recursive: true, force: true });
  rmSync(cacheDir, { recursive: true, force: true });
}
