/**
 * The measuring script of a JavaScript/TypeScript repository's quality metrics,
 * run in the sandbox by `node` at the workspace root; the same contract as
 * `measure-python.ts` (one JSON argument, one `LOOPSMITH_METRICS <json>` line; it removes
 * itself first).
 *
 * Tools: `node --test` with its `junit` and `lcov` reporters (tests, coverage: only when the
 * repository's `npm test` is node's runner, or it has none), the repository's own eslint
 * (`node_modules/.bin/eslint`, when it has one and a configuration), `tsc --noEmit` (the
 * repository's, else the image's, when a tsconfig.json exists; plus each `@ts-ignore`,
 * `@ts-expect-error` and `@ts-nocheck`), TSDoc share of exported declarations and the import
 * check (the script's own). Complexity and the security scan have no tool here: unavailable.
 */

/** Where the script is laid in the workspace (it deletes itself first thing). */
export const MEASURE_NODE_PATH = ".loopsmith-measure.cjs";

/** The script's source (CommonJS, Node.js 20+; no dependency). */
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
const pkg = (() => { try { return JSON.parse(fs.readFileSync("package.json", "utf8")); } catch { return {}; } })();
const nodeVersion = "node " + process.versions.node;

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
// TypeScript runs through the image's type-stripping hook; plain JavaScript without it, since
// node's coverage records nothing for a run with the hook loaded.
const TS = ALL.some((p) => /\.[cm]?tsx?$/.test(p));
const hook = () => (TS && fs.existsSync(HOOK) ? ["--import", HOOK] : []);

function testsAndCoverage() {
  const script = (pkg.scripts && pkg.scripts.test) || "";
  if (script && !/node\s+(--[\w-]+(=\S+)?\s+)*--test/.test(script)) {
    const reason = "the repository's tests run with " + JSON.stringify(script.slice(0, 80)) + "; only node --test is measured";
    return { tests: { status: "unavailable", tool: nodeVersion, reason }, coverage: { status: "unavailable", tool: nodeVersion, reason } };
  }
  const junit = path.join(TMP, "junit.xml");
  const lcov = path.join(TMP, "lcov.info");
  const args = [...hook(), "--test", "--experimental-test-coverage", "--test-reporter=junit", "--test-reporter-destination=" + junit, "--test-reporter=lcov", "--test-reporter-destination=" + lcov];
  const r = run(process.execPath, args, "tests");
  const xml = fs.existsSync(junit) ? fs.readFileSync(junit, "utf8") : "";
  const pairs = [];
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const attr = (n) => { const a = new RegExp("\\b" + n + "=\"([^\"]*)\"").exec(m[1]); return a ? a[1] : ""; };
    const body = m[3] || "";
    if (/<skipped/.test(body)) continue;
    pairs.push([attr("classname") + "::" + attr("name"), !/<(failure|error)\b/.test(body)]);
  }
  const out = {};
  if (!pairs.length) out.tests = { status: "unavailable", tool: nodeVersion, reason: "node --test ran no test (exit code " + r.status + "): " + tail(r.stdout + r.stderr) };
  else { const c = keyed(pairs); out.tests = { status: "ok", tool: nodeVersion, value: share(c), cases: c }; }
  if (!pairs.length) out.coverage = { status: "unavailable", tool: nodeVersion, reason: "no test ran, so nothing was measured" };
  else if (hook().length) out.coverage = { status: "unavailable", tool: nodeVersion, reason: "node's test coverage records nothing for TypeScript run through the type-stripping hook" };
  else if (!fs.existsSync(lcov)) out.coverage = { status: "unavailable", tool: nodeVersion, reason: "node wrote no lcov coverage (node 20.11+ needed)" };
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
    if (!cov.length) out.coverage = { status: "unavailable", tool: nodeVersion, reason: "no source line was measured" };
    else { const c = keyed(cov); out.coverage = { status: "ok", tool: nodeVersion, value: share(c), cases: c }; }
  }
  return out;
}

function lint() {
  const eslint = bin("eslint");
  if (!eslint) return { status: "unavailable", reason: "the repository has no eslint (node_modules/.bin/eslint)" };
  const v = run(eslint, ["--version"], "lint");
  const tool = "eslint " + String(v.stdout || "").trim().replace(/^v/, "");
  const r = run(eslint, ["-f", "json", "."], "lint");
  let results;
  try { results = JSON.parse(r.stdout); } catch { return { status: "unavailable", tool, reason: "eslint failed (exit code " + r.status + "): " + tail(r.stderr || r.stdout) }; }
  const pairs = [];
  for (const f of results) for (const m of f.messages || []) pairs.push([path.relative(".", f.filePath) + ":" + (m.ruleId || "parse") + ":" + m.message, false]);
  return { status: "ok", tool, value: pairs.length, cases: keyed(pairs) };
}

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
const table = { lint, type_errors: typeErrors, doc_coverage: docCoverage, imports };
for (const name of ENABLED) {
  if (table[name]) metrics[name] = guard(name, table[name]);
  else if (name === "complexity") metrics[name] = { status: "unavailable", reason: "no cyclomatic complexity tool for JavaScript/TypeScript in the sandbox" };
  else if (name === "security") metrics[name] = { status: "unavailable", reason: "no security scanner for JavaScript/TypeScript in the sandbox" };
}
process.stdout.write("\nLOOPSMITH_METRICS " + JSON.stringify({ metrics }) + "\n");
`;
