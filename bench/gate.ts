/**
 * bench/gate: the static safety gate's false positives on a large body of real, benign code,
 * through the same `gate()` the reviewer service calls. Two corpora, every file one request:
 *   humaneval  every canonical solution of a HumanEval JSONL file (prompt + canonical_solution,
 *              as `solution.py`, what `script:humaneval` would submit)
 *   stdlib     every `.py` file of the Python standard library inside the sandbox image, read
 *              out of the image with dockerode (a container is created, never started, and the
 *              library directory is copied out with getArchive); the host's Python is not used;
 *              symbolic links are not followed (Debian's python3.13 has two: one to a file
 *              already scanned, one into /etc)
 * Every file in both corpora is benign, so every blocked file is a false positive of some rule.
 * Prints per corpus: files scanned, files blocked, false-positive rate, files the
 * evaluation-tampering rules would send to review (a non-blocking `tampering.*` finding), and
 * files and findings by rule id; then each blocked standard-library file with its rules and lines.
 * With `--baseline <git-rev>` the gate's source at that revision is checked out into
 * `node_modules/.cache/` and run over the same files in the same process, side by side.
 * Usage: npm run --silent bench:gate -- --dataset <humaneval.jsonl> [--image <ref>] [--baseline <rev>]
 * Exit code 1 when a HumanEval canonical solution is blocked (the goal is none).
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Command } from "commander";
import Docker from "dockerode";
import { loadConfig } from "@loopsmith/shared/runtime";
import { readTar } from "@loopsmith/shared/workspace";
import { type FileChange, type GateRequest, type GateResult } from "@loopsmith/shared/contracts";
import { gate } from "@loopsmith/reviewer";
import { loadHumanEval, solutionFile } from "@loopsmith/evals";
import { formatTable } from "@loopsmith/cli/ui";

const program = new Command()
  .requiredOption("--dataset <path>", "HumanEval JSONL file")
  .option("--image <ref>", "sandbox image whose standard library is scanned (default: images.python)")
  .option("--baseline <rev>", "also run the gate as it was at this git revision")
  .parse(process.argv);
const opts = program.opts<{ dataset: string; image?: string; baseline?: string }>();
const image = opts.image ?? loadConfig({ env: { ...process.env, NATS_URL: "" } }).images.python;

type GateFn = (request: GateRequest) => GateResult;

/** One corpus: a name and its files (path relative to the corpus root, content). */
interface Corpus {
  name: string;
  files: FileChange[];
}

/** What one gate did with one corpus. */
interface Tally {
  scanned: number;
  blocked: { path: string; hits: { rule: string; line: number }[] }[];
  /** Files blocked by each rule (a file blocked by two rules counts under both). */
  filesByRule: Map<string, number>;
  /** Blocker findings by rule. */
  findingsByRule: Map<string, number>;
  /** Files with a non-blocking `tampering.*` finding (the architect would send them to review), by rule. */
  review: Map<string, number>;
  reviewFiles: number;
  ms: number;
}

function run(fn: GateFn, corpus: Corpus): Tally {
  const tally: Tally = {
    scanned: 0,
    blocked: [],
    filesByRule: new Map(),
    findingsByRule: new Map(),
    review: new Map(),
    reviewFiles: 0,
    ms: 0,
  };
  const t0 = performance.now();
  for (const file of corpus.files) {
    const r = fn({
      v: 1,
      taskId: "bench",
      iteration: 1,
      idempotencyKey: "bench/1/gate",
      language: "python",
      files: [file],
    });
    tally.scanned++;
    const concerns = new Set(
      r.findings.filter((f) => f.rule?.startsWith("tampering.") && f.severity !== "blocker").map((f) => f.rule ?? "?"),
    );
    if (concerns.size > 0 && !r.blocked) tally.reviewFiles++;
    for (const rule of concerns) tally.review.set(rule, (tally.review.get(rule) ?? 0) + 1);
    if (!r.blocked) continue;
    const hits = r.findings
      .filter((f) => f.severity === "blocker")
      .map((f) => ({ rule: f.rule ?? "?", line: f.line ?? 0 }));
    tally.blocked.push({ path: file.path, hits });
    for (const rule of new Set(hits.map((h) => h.rule)))
      tally.filesByRule.set(rule, (tally.filesByRule.get(rule) ?? 0) + 1);
    for (const h of hits) tally.findingsByRule.set(h.rule, (tally.findingsByRule.get(h.rule) ?? 0) + 1);
  }
  tally.ms = performance.now() - t0;
  return tally;
}

/** The HumanEval corpus: `solution.py` = prompt + canonical solution, one file per record. */
function humanevalCorpus(dataset: string): Corpus {
  return {
    name: "humaneval",
    files: loadHumanEval(dataset).map((r) => ({
      ...solutionFile(r, r.canonical_solution),
      path: `${r.task_id}/solution.py`,
    })),
  };
}

/**
 * Reads every `.py` file under `<dir>/python3.<minor>/` out of an image, without starting a
 * container. The library directory is the `python3.N` folder that holds `os.py`, looked for
 * under `/usr/lib` (Debian) and then `/usr/local/lib` (the official python images).
 * `site-packages`/`dist-packages` are not the standard library and are left out.
 * @throws Error when the image has no standard library in either place
 */
async function stdlibCorpus(docker: Docker, ref: string): Promise<{ corpus: Corpus; root: string }> {
  const container = await docker.createContainer({
    Image: ref,
    Cmd: ["true"],
    NetworkDisabled: true,
    Labels: { "org.loopsmith.bench": "gate" },
  });
  try {
    for (const base of ["/usr/lib", "/usr/local/lib"]) {
      const files = await pythonFilesUnder(container, base);
      const lib = [...new Set(files.map((f) => f.path.split("/")[0] ?? ""))].find((d) =>
        files.some((f) => f.path === `${d}/os.py`),
      );
      if (!lib) continue;
      const mine = files
        .filter((f) => f.path.startsWith(`${lib}/`) && !/\/(site|dist)-packages\//.test(f.path))
        .map((f) => ({ path: f.path.slice(lib.length + 1), content: f.content }))
        .sort((a, b) => a.path.localeCompare(b.path));
      return { corpus: { name: "stdlib", files: mine }, root: `${base}/${lib}` };
    }
    throw new Error(`no Python standard library (python3.N/os.py) under /usr/lib or /usr/local/lib in ${ref}`);
  } finally {
    await container.remove({ force: true });
  }
}

/** The `.py` files of the `python3.*` folders under `base` in a container, paths relative to `base`. */
async function pythonFilesUnder(container: Docker.Container, base: string): Promise<FileChange[]> {
  let archive: NodeJS.ReadableStream;
  try {
    archive = await container.getArchive({ path: base });
  } catch {
    return [];
  }
  const prefix = `${base.split("/").at(-1)}/`;
  const rel = (path: string): string => (path.startsWith(prefix) ? path.slice(prefix.length) : path);
  const entries = await readTar(archive, {
    select: (m) => m.type === "file" && /^python3\.\d+\/.*\.py$/.test(rel(m.path)),
  });
  return entries.map((e) => ({ path: rel(e.path), content: e.content.toString("utf8") }));
}

/**
 * The gate as it was at a git revision: its source files are written under
 * `node_modules/.cache/loopsmith-bench-gate/<rev>/` (so its imports resolve against this
 * repository's packages) and imported.
 * @throws Error when the revision or its gate cannot be read
 */
async function gateAt(rev: string): Promise<{ fn: GateFn; commit: string }> {
  const git = (...args: string[]) => execFileSync("git", args, { encoding: "utf8", maxBuffer: 64 << 20 });
  const commit = git("rev-parse", "--short", `${rev}^{commit}`).trim();
  const dir = resolve("node_modules/.cache/loopsmith-bench-gate", commit);
  mkdirSync(dir, { recursive: true });
  const names = git("ls-tree", "--name-only", `${commit}:services/reviewer/src/gate/`).split("\n");
  for (const name of names.filter((n) => n.endsWith(".ts") && !n.endsWith(".test.ts"))) {
    writeFileSync(join(dir, name), git("show", `${commit}:services/reviewer/src/gate/${name}`));
  }
  const mod = (await import(join(dir, "gate.ts"))) as { gate: GateFn };
  return { fn: mod.gate, commit };
}

const pct = (n: number, d: number): string => `${d ? ((100 * n) / d).toFixed(2) : "0.00"}%`;
const byRule = (t: Tally): string =>
  [...t.filesByRule.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([rule, files]) => `${rule} ${files} (${t.findingsByRule.get(rule) ?? 0})`)
    .join(", ") || "-";

const docker = new Docker();
const corpora: Corpus[] = [humanevalCorpus(opts.dataset)];
const stdlib = await stdlibCorpus(docker, image);
corpora.push(stdlib.corpus);
const gates: { name: string; fn: GateFn }[] = [];
if (opts.baseline) {
  const base = await gateAt(opts.baseline);
  gates.push({ name: `before (${base.commit})`, fn: base.fn });
}
gates.push({ name: "now", fn: gate });

const results = corpora.map((c) => ({ corpus: c, tallies: gates.map((g) => ({ gate: g.name, tally: run(g.fn, c) })) }));
const out: string[] = [
  `bench/gate: the static gate over benign code; humaneval from ${opts.dataset}, stdlib from ${image}:${stdlib.root}`,
  "every file is benign, so a blocked file is a false positive; by rule: files (blocker findings)",
  "",
  ...formatTable(
    [
      ["corpus", "gate", "files", "blocked", "FP rate", "review", "ms/file", "by rule"],
      ...results.flatMap(({ corpus, tallies }) =>
        tallies.map(({ gate: name, tally }) => [
          corpus.name,
          name,
          String(tally.scanned),
          String(tally.blocked.length),
          pct(tally.blocked.length, tally.scanned),
          String(tally.reviewFiles),
          (tally.ms / Math.max(1, tally.scanned)).toFixed(2),
          byRule(tally),
        ]),
      ),
    ],
    { align: ["left", "left", "right", "right", "right", "right", "right", "left"] },
  ),
];
for (const { corpus, tallies } of results) {
  const now = tallies.at(-1)?.tally;
  if (now && now.review.size > 0) {
    out.push(
      "",
      `${corpus.name}: files sent to review by a tampering warning, by rule: ${[...now.review]
        .sort((a, b) => b[1] - a[1])
        .map(([r, n]) => `${r} ${n}`)
        .join(", ")}`,
    );
  }
  if (!now || now.blocked.length === 0) continue;
  out.push("", `${corpus.name}: files still blocked (${now.blocked.length}), rule@lines`);
  const blocked = now.blocked.map((b) => {
    const lines = new Map<string, number[]>();
    for (const h of b.hits) lines.set(h.rule, [...new Set([...(lines.get(h.rule) ?? []), h.line])]);
    const hits = [...lines].map(
      ([rule, at]) => `${rule}@${at.slice(0, 5).join(",")}${at.length > 5 ? ` (+${at.length - 5} more)` : ""}`,
    );
    return [b.path, hits.join("  ")];
  });
  out.push(...formatTable(blocked, { indent: "  " }));
}
process.stdout.write(`${out.join("\n")}\n`);
const humaneval = results[0]?.tallies.at(-1)?.tally;
process.exitCode = humaneval && humaneval.blocked.length === 0 ? 0 : 1;
