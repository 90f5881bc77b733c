/**
 * The measuring script of a JavaScript/TypeScript repository's quality metrics,
 * run in the sandbox by `node` at the workspace root; the same contract as
 * `measure-python.ts` (one JSON argument, one `LOOPSMITH_METRICS <json>` line; it removes
 * itself first).
 *
 * Tools:
 * - tests and coverage: the repository's own runner, found from its `npm test` script (and the
 *   scripts it runs with `npm run …`), else from its dependencies: vitest (`vitest run`, its
 *   JUnit reporter; coverage with `@vitest/coverage-v8` or `-istanbul` when the repository has
 *   one), jest (its `--json` result and its built-in istanbul coverage), or `node --test` (its
 *   `junit` and `lcov` reporters). Coverage is read from the runner's istanbul reports: the value
 *   is `coverage-summary.json`'s line percentage, the cases each line of `coverage-final.json`;
 * - lint: the repository's eslint (`node_modules/.bin/eslint`) when it has one and a
 *   configuration, else loopsmith's ESLint with the recommended rules (below);
 * - complexity and security: loopsmith's ESLint, installed in the sandbox-node image under
 *   {@link METRICS_TOOLS} with its own flat configuration (deploy/rootfs/sandbox-node/metrics):
 *   ESLint's `complexity` rule (mean cyclomatic complexity per function) and
 *   eslint-plugin-security's recommended rules, one run for the three;
 * - `tsc --noEmit` (the repository's, else the image's, when a tsconfig.json exists; plus each
 *   `@ts-ignore`, `@ts-expect-error` and `@ts-nocheck`), the TSDoc share of exported
 *   declarations and the import check (the script's own).
 *
 * The analysers run in the sandbox, not in the architect, although parsing runs no code of the
 * repository: the tree they read is the one every other metric reads (the parent's snapshot, its
 * setup and the candidate's files, as the sandbox lays them), under the same time limits, and the
 * architect never holds or parses a candidate's tree.
 */

/** Where the sandbox-node image keeps loopsmith's own analysers (deploy/build-images.sh). */
export const METRICS_TOOLS = "/opt/loopsmith/metrics";

/** Where the script is laid in the workspace (it deletes itself first thing). */
export const MEASURE_NODE_PATH = ".loopsmith-measure.cjs";

/** The script's source (CommonJS, Node.js 20+; it requires nothing beyond node's own modules). */
export const MEASURE_NODE = String.raw`
"use strict";
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const cp = require("node:child_process");
fs.rmSync(__filename, { force: true });
const CONF = JSON.parse(process.argv[2] || "{}");
const ENABLED = CONF.enabled || [];
const TIMEOUTS = CONF.timeouts || {};
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), "loopsmith-measure-"));
const SKIP = new Set(["node_modules", "dist", "build", "coverage", "out"]);
const EXT = /\.(c|m)?(j|t)sx?$/;
const HOOK = "/opt/loopsmith/ts-register.mjs";
const TOOLS = "${METRICS_TOOLS}";

function walk(dir, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (e.name.startsWith(".") || SKIP.has(e.name)) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (EXT.test(e.name) && !e.name.endsWith(".d.ts")) out.push(path.relative(".", p));
  }
  return out;
}
const ALL = walk(".", []);
const isTest = (p) => /(^|\/)(tests?|__tests__)\//.test(p) || /\.(test|spec)\.[cm]?[jt]sx?$/.test(p);
const SOURCE = ALL.filter((p) => !isTest(p));
const readJson = (p) => { try { return JSON.parse(fs.readFileSync(p, "utf8")); } catch { return null; } };
const pkg = readJson("package.json") || {};
const nodeVersion = "node " + process.versions.node;
/** "name version" of an installed package (the repository's, or one under root), or null. */
const versionOf = (name, root) => { const j = readJson(path.join(root || "node_modules", name, "package.json")); return j && j.version ? name + " " + j.version : null; };
// Test runners without colours or watch modes, whatever the terminal says.
const RUNNER_ENV = Object.assign({}, process.env, { CI: "true", NO_COLOR: "1", FORCE_COLOR: "0" });

function run(cmd, args, metric, env) {
  const r = cp.spawnSync(cmd, args, { encoding: "utf8", timeout: (TIMEOUTS[metric] || 120) * 1000, env: env || process.env, maxBuffer: 64 * 1024 * 1024 });
  if (r.error && r.error.code === "ETIMEDOUT") throw new Error(metric + " passed its time limit of " + (TIMEOUTS[metric] || 120) + "s");
  return r;
}
const tail = (s) => String(s || "").trim().slice(-300);
function keyed(pairs) {
  const seen = {};
  const cases = {};
  for (const [key, ok] of pairs) {
    seen[key] = (seen[key] || 0) + 1;
    cases[key + "#" + seen[key]] = ok;
  }
  return cases;
}
const lines = (p) => { try { return fs.readFileSync(p, "utf8").split("\n"); } catch { return []; } };
const share = (c) => { const v = Object.values(c); return (100 * v.filter(Boolean).length) / v.length; };
const bin = (name) => (fs.existsSync(path.join("node_modules", ".bin", name)) ? path.join("node_modules", ".bin", name) : null);
const unavailable = (tool, reason) => (tool ? { status: "unavailable", tool, reason } : { status: "unavailable", reason });
// TypeScript runs through the image's type-stripping hook; plain JavaScript without it, since
// node's coverage records nothing for a run with the hook loaded.
const TS = ALL.some((p) => /\.[cm]?tsx?$/.test(p));
const hook = () => (TS && fs.existsSync(HOOK) ? ["--import", HOOK] : []);

// ---- tests and coverage: the repository's runner ----

/** The text of an npm script and of the scripts it runs (npm/pnpm/yarn/bun [run] NAME). */
function scriptText(name, seen) {
  const s = (pkg.scripts || {})[name];
  if (typeof s !== "string" || seen.has(name)) return "";
  seen.add(name);
  let out = s;
  for (const m of s.matchAll(/\b(?:npm|pnpm|yarn|bun)\s+(?:run(?:-script)?\s+)?([\w:.-]+)/g)) out += "\n" + scriptText(m[1] === "t" ? "test" : m[1], seen);
  return out;
}

/** Which runner the repository's tests use: {runner} or {reason} when it is none measured here. */
function testRunner() {
  const own = pkg.scripts && typeof pkg.scripts.test === "string" && !/no test specified/.test(pkg.scripts.test) ? pkg.scripts.test : "";
  const text = own ? scriptText("test", new Set()) : "";
  if (/\bvitest\b/.test(text)) return { runner: "vitest" };
  if (/\bjest\b/.test(text)) return { runner: "jest" };
  if (/\bnode\s+(--[\w-]+(=\S+)?\s+)*--test\b/.test(text)) return { runner: "node" };
  if (own) return { reason: "the repository's tests run with " + JSON.stringify(own.slice(0, 80)) + "; vitest, jest and node --test are measured" };
  const deps = Object.assign({}, pkg.dependencies, pkg.devDependencies);
  return { runner: deps.vitest ? "vitest" : deps.jest ? "jest" : "node" };
}

const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
const unxml = (s) => s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e) => (e[0] !== "#" ? (ENTITIES[e] !== undefined ? ENTITIES[e] : m) : String.fromCodePoint(e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10))));

/** [classname::name, passed] of each test case of a JUnit file that ran (skipped ones left out). */
function junitCases(file) {
  const xml = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "";
  const pairs = [];
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const attr = (n) => { const a = new RegExp("\\b" + n + "=\"([^\"]*)\"").exec(m[1]); return a ? unxml(a[1]) : ""; };
    const body = m[3] || "";
    if (/<skipped/.test(body)) continue;
    pairs.push([attr("classname") + "::" + attr("name"), !/<(failure|error)\b/.test(body)]);
  }
  return pairs;
}

/** [file::describe > test, passed] of each test jest ran (its --json result); a file that failed to run is one failing case. */
function jestCases(file) {
  const j = readJson(file);
  const pairs = [];
  for (const t of (j && j.testResults) || []) {
    const rel = path.relative(".", t.name || "");
    const results = t.assertionResults || [];
    if (!results.length && t.status === "failed") pairs.push([rel + "::" + rel, false]);
    for (const a of results)
      if (a.status === "passed" || a.status === "failed") pairs.push([rel + "::" + (a.ancestorTitles || []).concat([a.title]).join(" > "), a.status === "passed"]);
  }
  return pairs;
}

/**
 * Line coverage from an istanbul report directory (vitest's providers and jest write the same
 * format): the value is coverage-summary.json's line percentage, the cases each line of
 * coverage-final.json (a line is covered when a statement starting on it ran, as istanbul counts).
 */
function istanbulCoverage(dir, tool) {
  const final = readJson(path.join(dir, "coverage-final.json"));
  const summary = readJson(path.join(dir, "coverage-summary.json"));
  if (!final || !summary) return unavailable(tool, "the runner wrote no istanbul report (coverage-final.json and coverage-summary.json)");
  const pairs = [];
  for (const key of Object.keys(final).sort()) {
    const data = final[key].data || final[key];
    const file = path.relative(".", data.path || key);
    const text = lines(file);
    const hits = new Map();
    for (const [id, count] of Object.entries(data.s || {})) {
      const loc = (data.statementMap || {})[id];
      if (loc && loc.start) hits.set(loc.start.line, Math.max(hits.get(loc.start.line) || 0, count));
    }
    for (const n of [...hits.keys()].sort((a, b) => a - b)) pairs.push([file + ":" + (text[n - 1] ?? String(n)).trim(), hits.get(n) > 0]);
  }
  if (!pairs.length) return unavailable(tool, "no source line was measured");
  const c = keyed(pairs);
  const pct = summary.total && summary.total.lines && summary.total.lines.pct;
  return { status: "ok", tool, value: typeof pct === "number" ? pct : share(c), cases: c };
}

/** The outcome of a runner's cases: the tests metric, or why none ran. */
function testsOf(pairs, tool, r, what) {
  if (!pairs.length) return unavailable(tool, what + " ran no test (exit code " + r.status + "): " + tail(r.stdout + r.stderr));
  const c = keyed(pairs);
  return { status: "ok", tool, value: share(c), cases: c };
}
const NOT_INSTALLED = " is not installed (node_modules/.bin): the setup command installs the repository's dependencies";

function vitest(wantCoverage) {
  const exe = bin("vitest");
  if (!exe) return { tests: unavailable(null, "vitest" + NOT_INSTALLED), coverage: unavailable(null, "vitest" + NOT_INSTALLED) };
  const tool = versionOf("vitest") || "vitest";
  const junit = path.join(TMP, "junit.xml");
  const dir = path.join(TMP, "coverage");
  const provider = ["@vitest/coverage-v8", "@vitest/coverage-istanbul"].find((p) => versionOf(p));
  const args = ["run", "--reporter=junit", "--outputFile.junit=" + junit];
  if (wantCoverage && provider)
    args.push("--coverage.enabled=true", "--coverage.provider=" + provider.split("-").pop(), "--coverage.reporter=json", "--coverage.reporter=json-summary", "--coverage.reportsDirectory=" + dir, "--coverage.reportOnFailure=true");
  const r = run(exe, args, "tests", RUNNER_ENV);
  const tests = testsOf(junitCases(junit), tool, r, "vitest");
  const coverage =
    tests.status !== "ok" ? unavailable(tool, "no test ran, so nothing was measured")
    : !provider ? unavailable(tool, "the repository has no vitest coverage provider (@vitest/coverage-v8 or @vitest/coverage-istanbul)")
    : istanbulCoverage(dir, versionOf(provider));
  return { tests, coverage };
}

function jest(wantCoverage) {
  const exe = bin("jest");
  if (!exe) return { tests: unavailable(null, "jest" + NOT_INSTALLED), coverage: unavailable(null, "jest" + NOT_INSTALLED) };
  const tool = versionOf("jest") || versionOf("jest-cli") || "jest";
  const out = path.join(TMP, "jest.json");
  const dir = path.join(TMP, "coverage");
  const args = ["--ci", "--json", "--outputFile=" + out, "--watchAll=false"];
  if (wantCoverage) args.push("--coverage", "--coverageReporters=json", "--coverageReporters=json-summary", "--coverageDirectory=" + dir);
  const r = run(exe, args, "tests", RUNNER_ENV);
  const tests = testsOf(jestCases(out), tool, r, "jest");
  return { tests, coverage: tests.status !== "ok" ? unavailable(tool, "no test ran, so nothing was measured") : istanbulCoverage(dir, tool) };
}

function nodeTest() {
  const junit = path.join(TMP, "junit.xml");
  const lcov = path.join(TMP, "lcov.info");
  const args = [...hook(), "--test", "--experimental-test-coverage", "--test-reporter=junit", "--test-reporter-destination=" + junit, "--test-reporter=lcov", "--test-reporter-destination=" + lcov];
  const r = run(process.execPath, args, "tests");
  const tests = testsOf(junitCases(junit), nodeVersion, r, "node --test");
  let coverage;
  if (tests.status !== "ok") coverage = unavailable(nodeVersion, "no test ran, so nothing was measured");
  else if (hook().length) coverage = unavailable(nodeVersion, "node's test coverage records nothing for TypeScript run through the type-stripping hook");
  else if (!fs.existsSync(lcov)) coverage = unavailable(nodeVersion, "node wrote no lcov coverage (node 20.11+ needed)");
  else {
    const cov = [];
    let file = null;
    for (const l of fs.readFileSync(lcov, "utf8").split("\n")) {
      if (l.startsWith("SF:")) file = path.relative(".", l.slice(3));
      else if (l.startsWith("DA:") && file && !isTest(file) && !file.startsWith("..")) {
        const [n, hits] = l.slice(3).split(",").map(Number);
        const text = (lines(file)[n - 1] ?? String(n)).trim();
        cov.push([file + ":" + text, hits > 0]);
      }
    }
    if (!cov.length) coverage = unavailable(nodeVersion, "no source line was measured");
    else { const c = keyed(cov); coverage = { status: "ok", tool: nodeVersion, value: share(c), cases: c }; }
  }
  return { tests, coverage };
}

function testsAndCoverage() {
  const t = testRunner();
  if (t.reason) return { tests: unavailable(null, t.reason), coverage: unavailable(null, t.reason) };
  const wantCoverage = ENABLED.includes("coverage");
  return t.runner === "vitest" ? vitest(wantCoverage) : t.runner === "jest" ? jest(wantCoverage) : nodeTest();
}

// ---- loopsmith's ESLint: complexity, security, and lint without the repository's eslint ----

let OURS = null;
/** One run of loopsmith's ESLint over the tree: {eslint, security, results: [{file, messages}]} or {reason}. */
function ours() {
  if (OURS) return OURS;
  const main = path.join(TOOLS, "node_modules", "eslint", "bin", "eslint.js");
  if (!fs.existsSync(main)) return (OURS = { reason: "loopsmith's ESLint is not in this sandbox image (" + TOOLS + "): rebuild the sandbox-node image (deploy/build-images.sh node)" });
  const eslint = versionOf("eslint", path.join(TOOLS, "node_modules"));
  const security = versionOf("eslint-plugin-security", path.join(TOOLS, "node_modules"));
  const metric = ["lint", "complexity", "security"].filter((m) => ENABLED.includes(m)).sort((a, b) => (TIMEOUTS[b] || 120) - (TIMEOUTS[a] || 120))[0];
  try {
    const args = [main, "--config", path.join(TOOLS, "eslint.config.mjs"), "--no-inline-config", "--no-warn-ignored", "--no-error-on-unmatched-pattern", "--format", "json", "."];
    const r = run(process.execPath, args, metric);
    let results;
    try { results = JSON.parse(r.stdout); } catch { return (OURS = { reason: eslint + " failed (exit code " + r.status + "): " + tail(r.stderr || r.stdout) }); }
    return (OURS = { eslint, security, results: results.map((f) => ({ file: path.relative(".", f.filePath), messages: f.messages || [] })) });
  } catch (e) {
    return (OURS = { reason: String(e && e.message) });
  }
}
const ALL_SET = new Set(ALL);
const SOURCE_SET = new Set(SOURCE);
const ownRule = (id) => id === "complexity" || /^security\//.test(id || "");
const ESLINT_CONFIGS = ["eslint.config.js", "eslint.config.mjs", "eslint.config.cjs", "eslint.config.ts", "eslint.config.mts", "eslint.config.cts", ".eslintrc", ".eslintrc.js", ".eslintrc.cjs", ".eslintrc.json", ".eslintrc.yml", ".eslintrc.yaml"];

function lint() {
  const eslint = bin("eslint");
  const config = ESLINT_CONFIGS.find((f) => fs.existsSync(f)) || (pkg.eslintConfig ? "package.json" : null);
  if (eslint && config) {
    // The repository's own eslint and rules; each eslint-disable comment counts as a finding,
    // as each @ts-ignore does for the type errors, so a comment cannot fix one.
    const v = run(eslint, ["--version"], "lint");
    const tool = "eslint " + String(v.stdout || "").trim().replace(/^v/, "");
    const r = run(eslint, ["-f", "json", "."], "lint");
    let results;
    try { results = JSON.parse(r.stdout); } catch { return unavailable(tool, "eslint failed (exit code " + r.status + "): " + tail(r.stderr || r.stdout)); }
    const pairs = [];
    for (const f of results) for (const m of f.messages || []) pairs.push([path.relative(".", f.filePath) + ":" + (m.ruleId || "parse") + ":" + m.message, false]);
    for (const p of ALL) for (const l of lines(p)) if (/\/[/*]\s*eslint-disable/.test(l)) pairs.push([p + ":suppressed:" + l.trim(), false]);
    return { status: "ok", tool, value: pairs.length, cases: keyed(pairs) };
  }
  if (!ALL.length) return unavailable(null, "no JavaScript or TypeScript file");
  const o = ours();
  if (o.reason) return unavailable(null, o.reason);
  const pairs = [];
  for (const f of o.results) if (ALL_SET.has(f.file)) for (const m of f.messages) if (!ownRule(m.ruleId)) pairs.push([f.file + ":" + (m.ruleId || "parse") + ":" + m.message, false]);
  return { status: "ok", tool: o.eslint.replace(/^eslint /, "eslint recommended "), value: pairs.length, cases: keyed(pairs) };
}

function complexity() {
  if (!SOURCE.length) return unavailable(null, "no non-test JavaScript or TypeScript file");
  const o = ours();
  if (o.reason) return unavailable(null, o.reason);
  const cc = [];
  for (const f of o.results)
    if (SOURCE_SET.has(f.file))
      for (const m of f.messages) {
        const k = m.ruleId === "complexity" && /complexity of (\d+)/.exec(m.message);
        if (k) cc.push(Number(k[1]));
      }
  if (!cc.length) return unavailable(o.eslint, "no function to measure");
  return { status: "ok", tool: o.eslint, value: cc.reduce((a, b) => a + b, 0) / cc.length };
}

function security() {
  if (!SOURCE.length) return unavailable(null, "no non-test JavaScript or TypeScript file");
  const o = ours();
  if (o.reason) return unavailable(null, o.reason);
  const pairs = [];
  for (const f of o.results) if (SOURCE_SET.has(f.file)) for (const m of f.messages) if (/^security\//.test(m.ruleId || "")) pairs.push([f.file + ":" + m.ruleId + ":" + m.message, false]);
  return { status: "ok", tool: o.security, value: pairs.length, cases: keyed(pairs) };
}

// ---- the rest: tsc, TSDoc, imports ----
function typeErrors() {
  if (!fs.existsSync("tsconfig.json")) return { status: "unavailable", reason: "no tsconfig.json" };
  const tsc = bin("tsc") || "tsc";
  const v = run(tsc, ["--version"], "type_errors");
  if (v.error || v.status !== 0) return { status: "unavailable", reason: "tsc is not installed in the sandbox" };
  const tool = String(v.stdout).trim().replace(/^Version /, "tsc ");
  const r = run(tsc, ["--noEmit", "-p", ".", "--pretty", "false"], "type_errors");
  const pairs = [];
  for (const l of String(r.stdout).split("\n")) {
    const m = /^(.+?)\(\d+,\d+\): error (TS\d+): (.*)$/.exec(l);
    if (m) pairs.push([m[1] + ":" + m[2] + ":" + m[3].trim(), false]);
  }
  if (r.status !== 0 && !pairs.length) return { status: "unavailable", tool, reason: "tsc failed (exit code " + r.status + "): " + tail(r.stdout + r.stderr) };
  for (const p of ALL) for (const l of lines(p)) if (/@ts-(ignore|expect-error|nocheck)/.test(l)) pairs.push([p + ":suppressed:" + l.trim(), false]);
  return { status: "ok", tool, value: pairs.length, cases: keyed(pairs) };
}

function docCoverage() {
  const pairs = [];
  for (const p of SOURCE) {
    const ls = lines(p);
    ls.forEach((l, i) => {
      const m = /^export\s+(?:default\s+)?(?:async\s+)?(?:function\*?|class|const|let|interface|type|enum)\s+([A-Za-z_$][\w$]*)/.exec(l);
      if (!m) return;
      let j = i - 1;
      while (j >= 0 && /^\s*(@\w|$)/.test(ls[j]) && ls[j].trim() !== "") j--;
      pairs.push([p + ":" + m[1], j >= 0 && /\*\/\s*$/.test(ls[j]) && ls.slice(0, j + 1).join("\n").lastIndexOf("/**") > -1]);
    });
  }
  const tool = "TSDoc scan (" + nodeVersion + ")";
  if (!pairs.length) return { status: "unavailable", tool, reason: "no exported declaration" };
  const c = keyed(pairs);
  return { status: "ok", tool, value: share(c), cases: c };
}

function imports() {
  const mods = SOURCE.filter((p) => /\.(m?js|cjs|m?ts)$/.test(p));
  const tool = "import() (" + nodeVersion + ")";
  if (!mods.length) return { status: "unavailable", tool, reason: "no module" };
  const code = "const out={};(async()=>{for(const m of process.argv.slice(1)){try{await import(require('node:url').pathToFileURL(m).href);out[m]=true}catch{out[m]=false}}process.stdout.write('\\nIMPORTS '+JSON.stringify(out)+'\\n');process.exit(0)})()";
  const r = run(process.execPath, [...hook(), "-e", code, ...mods], "imports");
  const m = /^IMPORTS (.*)$/m.exec(String(r.stdout));
  if (!m) return { status: "unavailable", tool, reason: "the import check did not finish: " + tail(r.stderr) };
  const c = JSON.parse(m[1]);
  return { status: "ok", tool, value: share(c), cases: c };
}

function guard(name, fn) {
  try { return fn(); } catch (e) { return { status: "unavailable", reason: name + " failed: " + (e && e.message) }; }
}
const metrics = {};
if (ENABLED.includes("tests") || ENABLED.includes("coverage")) {
  const both = guard("tests", testsAndCoverage);
  for (const k of ["tests", "coverage"]) if (ENABLED.includes(k)) metrics[k] = both[k] || both;
}
const table = { lint, type_errors: typeErrors, complexity, doc_coverage: docCoverage, imports, security };
for (const name of ENABLED) if (table[name]) metrics[name] = guard(name, table[name]);
process.stdout.write("\nLOOPSMITH_METRICS " + JSON.stringify({ metrics }) + "\n");
`;
