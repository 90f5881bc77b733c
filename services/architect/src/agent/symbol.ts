/**
 * The `symbol` tool: where a name is defined and where it is used, over the candidate's tree
 * (the base tree with the loop's changes over it). Definitions come from the repo map's lezer
 * extraction (`extractSymbols`: classes, functions, methods, top-level variables, TypeScript
 * interfaces, types and enums); references are the other lines where the name occurs as a
 * whole identifier, in the files with a parser.
 */
import { extractSymbols, languageOf } from "../repo/symbols.js";

/** Definitions and references listed at most. */
export const MAX_DEFINITIONS = 30;
export const MAX_REFERENCES = 60;

/**
 * The observation of `symbol`: `definitions of <name> (n):` then `path:line: signature [kind]`
 * lines, and `references (n):` then `path:line: text` lines, each list cut at its maximum
 * (the total still said).
 * @param files - every path of the candidate's tree
 * @param read - a file's current text (undefined when it is gone)
 */
export function findSymbol(name: string, files: readonly string[], read: (path: string) => string | undefined): string {
  const word = new RegExp(`(?<![\\w$])${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![\\w$])`);
  const defs: string[] = [];
  const refs: string[] = [];
  for (const path of files) {
    if (!languageOf(path)) continue;
    const text = read(path);
    if (text === undefined || !text.includes(name)) continue;
    const found = extractSymbols(path, text).defs.filter((d) => d.name === name);
    const defLines = new Set(found.map((d) => d.line));
    for (const d of found) defs.push(`${path}:${d.line}: ${d.signature} [${d.kind}]`);
    text.split("\n").forEach((line, i) => {
      if (!defLines.has(i + 1) && word.test(line)) refs.push(`${path}:${i + 1}: ${line.trim().slice(0, 200)}`);
    });
  }
  const list = (label: string, items: string[], max: number): string =>
    `${label} (${items.length}${items.length > max ? `, the first ${max} shown` : ""}):\n${items.slice(0, max).join("\n") || "(none)"}`;
  return `${list(`definitions of ${name}`, defs, MAX_DEFINITIONS)}\n${list("references", refs, MAX_REFERENCES)}`;
}
