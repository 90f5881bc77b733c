/**
 * The deterministic static safety gate (docs/GATE.md): parses every file of a
 * candidate and blocks dangerous code before anything runs. A blocked candidate is a
 * failure with findings, fed back to the builder, never executed.
 */
import { Tree } from "@lezer/common";
import type { Finding, GateRequest, GateResult } from "@loopsmith/shared/contracts";
import { analyseJavaScriptNames, type JsDialect } from "./javascript.js";
import { tamperJavaScript } from "./jstamper.js";
import { analysePythonNames } from "./python.js";
import { tamperPython } from "./pytamper.js";
import { SourceFile } from "./source.js";
import { EvaluationNames, isTestCode, isTestSupport, shadowFinding, type TamperContext } from "./tampering.js";

/** At most this many findings are returned; the rest are counted in one last `info` finding. */
export const MAX_FINDINGS = 200;

/** How a file is analysed. */
type Kind = { lang: "python" } | { lang: "js"; dialect: JsDialect } | { lang: "shell" } | { lang: "none" };

const BY_EXTENSION: Readonly<Record<string, Kind>> = {
  py: { lang: "python" },
  pyw: { lang: "python" },
  js: { lang: "js", dialect: "" },
  mjs: { lang: "js", dialect: "" },
  cjs: { lang: "js", dialect: "" },
  jsx: { lang: "js", dialect: "jsx" },
  ts: { lang: "js", dialect: "ts" },
  mts: { lang: "js", dialect: "ts" },
  cts: { lang: "js", dialect: "ts" },
  tsx: { lang: "js", dialect: "ts jsx" },
  sh: { lang: "shell" },
  bash: { lang: "shell" },
  zsh: { lang: "shell" },
};

/** The interpreter a `#!` line names (`#!/usr/bin/env -S python3 -u` → `python3`); empty without one. */
function interpreterOf(content: string): string {
  if (!content.startsWith("#!")) return "";
  const words = (content.slice(2).split("\n")[0] ?? "").trim().split(/\s+/);
  const first = words[0] ?? "";
  if (!first.endsWith("/env")) return first;
  return words.slice(1).find((w) => !w.startsWith("-")) ?? "";
}

/**
 * How a file is analysed: by extension (`.py`; `.js`/`.mjs`/`.cjs`/`.jsx`;
 * `.ts`/`.mts`/`.cts`/`.tsx`; `.sh`/`.bash`/`.zsh`), else by a `#!` line naming python,
 * node or a shell. Other files (data, docs) are not code and are not analysed.
 */
function kindOf(path: string, content: string): Kind {
  const name = path.slice(path.lastIndexOf("/") + 1);
  const dot = name.lastIndexOf(".");
  const ext = dot > 0 ? name.slice(dot + 1).toLowerCase() : "";
  const known = BY_EXTENSION[ext];
  if (known) return known;
  const shebang = interpreterOf(content);
  if (/python/.test(shebang)) return { lang: "python" };
  if (/node|tsx|deno|bun/.test(shebang)) return { lang: "js", dialect: /tsx|deno|bun/.test(shebang) ? "ts" : "" };
  if (/(^|\/)(ba|z|da|k)?sh$/.test(shebang)) return { lang: "shell" };
  return { lang: "none" };
}

/** A shell script is all shell: every line is scanned for destructive and network commands. */
function analyseShell(path: string, text: string): Finding[] {
  const src = new SourceFile(path, text, Tree.empty);
  src.scanString(text, (i) => i);
  return src.findings;
}

/**
 * The findings of one file: the safety rules on every file; the tampering rules on files
 * that are not tests ({@link isTestCode}), and `tampering.shadow` on every path.
 */
function analyseFile(path: string, content: string, evaluation: EvaluationNames): Finding[] {
  const kind = kindOf(path, content);
  const ctx: TamperContext | undefined = isTestCode(path)
    ? undefined
    : {
        evaluation,
        testSupport: isTestSupport(path),
        script: content.startsWith("#!"),
        main: /(^|\/)__main__\.py$/.test(path),
      };
  const shadow = shadowFinding(path);
  const findings: Finding[] = shadow ? [shadow] : [];
  switch (kind.lang) {
    case "python": {
      const { src, names } = analysePythonNames(path, content);
      if (ctx) tamperPython(src, names, ctx);
      return [...findings, ...src.findings];
    }
    case "js": {
      const { src, names } = analyseJavaScriptNames(path, content, kind.dialect);
      if (ctx) tamperJavaScript(src, names, ctx);
      return [...findings, ...src.findings];
    }
    case "shell":
      return [...findings, ...analyseShell(path, content)];
    case "none":
      return findings;
  }
}

/**
 * Checks every file of a request (sources and tests alike) and returns the verdict.
 *
 * The gate is a first filter tuned for precision; the sandbox is the security boundary
 * (docs/GATE.md, docs/SANDBOX.md). Each blocking rule says why a call is dangerous where it
 * is (`RULES[rule].why` in `rules.ts`; the table in docs/GATE.md, "The rules"):
 * `os.system`, `os.popen`, `os.exec*`, `os.spawn*`, `pty.spawn`; `subprocess.*(…,
 * shell=<not False>)`, `subprocess.getoutput`; `pickle`/`marshal` loads (except a round
 * trip of the program's own `dumps`), `shelve.open`, unsafe `yaml.load`; network modules
 * (`urllib.request`, `http.client`, `requests`, `smtplib`, …; Node `net`, `http`, `fetch`,
 * …) and `socket` calls that connect, serve or resolve; Node's `child_process`;
 * `shutil.rmtree`/`fs.rmSync` on `/` or `~`; destructive or network shell commands in any
 * string (`rm -rf /`, `mkfs`, `dd of=/dev/…`, fork bombs, `curl URL`). Python's
 * `eval`/`exec` (and `__import__`, `importlib.import_module`, `getattr` on a sensitive
 * module) block a computed string only when its origin, traced within the file, says why:
 * it comes from outside the program, is decoded, or is assembled from pieces that name a
 * way out; a constant string is analysed as code. JavaScript's `eval`/`Function`/`vm.*`,
 * `require` and `import()` still block any computed string. Names are resolved through
 * aliases (`import os as o`, `from os import system as s`).
 *
 * A syntax error is one finding (severity `error`, rule `syntax`, with its line) and does
 * not block: the executor will report the interpreter's own message (status `error`),
 * which is more useful to the builder than the gate parser's. The rest of the file is still
 * analysed, so a dangerous call next to a syntax error still blocks.
 *
 * `request.language` does not choose the parser: each file is parsed by its extension, so a
 * Python task's helper script in JavaScript is checked as JavaScript.
 *
 * Evaluation tampering (rules `tampering.*`, docs/GATE.md "Evaluation tampering"): in files
 * that are not tests, exits when a module is imported, writing the verdict's files or
 * variables, patching the test framework, and code that branches on the runner or on
 * `request.evaluation`'s names; on every path, files that shadow the framework. A clear case
 * blocks; an uncertain one is a `warning`, which the architect sends to review.
 *
 * Pure: no I/O, no clock; the same request always gives the same result.
 * @returns `blocked` is true exactly when a finding has severity `blocker`; findings are in
 *   file order, then line order, without duplicates.
 */
export function gate(request: GateRequest): GateResult {
  const all: Finding[] = [];
  const evaluation = new EvaluationNames(request.evaluation ?? []);
  for (const file of request.files) {
    const seen = new Set<string>();
    const findings = analyseFile(file.path, file.content, evaluation)
      .filter((f) => {
        const key = `${f.line}\u0000${f.rule}\u0000${f.message}`;
        if (seen.has(key)) return false;
        seen.add(key);
        return true;
      })
      .sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
    all.push(...findings);
  }
  const blocked = all.some((f) => f.severity === "blocker");
  if (all.length <= MAX_FINDINGS) return { blocked, findings: all };
  // Keep blockers first so a cut never hides why the candidate was blocked.
  const ordered = [...all.filter((f) => f.severity === "blocker"), ...all.filter((f) => f.severity !== "blocker")];
  const kept = ordered.slice(0, MAX_FINDINGS - 1);
  kept.push({
    severity: "info",
    message: `${all.length - kept.length} more findings were left out`,
    rule: "truncated",
  });
  return { blocked, findings: kept };
}
