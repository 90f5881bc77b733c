// loopsmith sandbox: module hooks that transpile .ts/.mts/.tsx files with TypeScript's
// transpileModule (types are erased, not checked), as ES modules. Imports written the
// TypeScript way ("./math.js" for math.ts, or "./math" with no extension) resolve to .ts.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const ts = require(process.env.LOOPSMITH_TYPESCRIPT ?? "/usr/share/nodejs/typescript/lib/typescript.js");
const TS = /\.(m?ts|tsx)$/;

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (err) {
    const relative = specifier.startsWith("./") || specifier.startsWith("../") || specifier.startsWith("/");
    if (!relative || err?.code !== "ERR_MODULE_NOT_FOUND") throw err;
    const tries = specifier.endsWith(".js")
      ? [specifier.slice(0, -3) + ".ts", specifier.slice(0, -3) + ".tsx"]
      : specifier.endsWith(".mjs")
        ? [specifier.slice(0, -4) + ".mts"]
        : [specifier + ".ts", specifier + ".tsx", specifier + "/index.ts"];
    for (const candidate of tries) {
      try {
        return await nextResolve(candidate, context);
      } catch {
        // next candidate
      }
    }
    throw err;
  }
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith("file:") || !TS.test(new URL(url).pathname)) return nextLoad(url, context);
  const fileName = fileURLToPath(url);
  const source = await readFile(fileName, "utf8");
  const out = ts.transpileModule(source, {
    fileName,
    reportDiagnostics: true,
    compilerOptions: {
      module: ts.ModuleKind.ESNext,
      target: ts.ScriptTarget.ES2022,
      jsx: ts.JsxEmit.ReactJSX,
      esModuleInterop: true,
      verbatimModuleSyntax: false,
      isolatedModules: true,
      inlineSourceMap: true,
      inlineSources: true,
    },
  });
  const errors = (out.diagnostics ?? []).filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length) {
    const text = errors
      .map((d) => {
        const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
        const msg = ts.flattenDiagnosticMessageText(d.messageText, "\n");
        return where ? `${fileName}:${where.line + 1}:${where.character + 1} - error TS${d.code}: ${msg}` : `error TS${d.code}: ${msg}`;
      })
      .join("\n");
    const err = new SyntaxError(text);
    err.code = "ERR_TS_SYNTAX";
    throw err;
  }
  return { format: "module", source: out.outputText, shortCircuit: true };
}
