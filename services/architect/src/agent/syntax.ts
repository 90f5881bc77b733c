/**
 * Whether a Python, JavaScript or TypeScript file parses, with the lezer parsers the repo map
 * uses (`repo/symbols.ts`: `@lezer/python`; `@lezer/javascript` in its `jsx`, `ts` and
 * `ts jsx` dialects). Lezer recovers from syntax errors by putting error nodes (`⚠`) in the
 * tree: a tree with one is a file that does not parse, and the first one is the message.
 */
import { parser as javascript } from "@lezer/javascript";
import { parser as python } from "@lezer/python";
import { languageOf, type SourceLanguage } from "../repo/symbols.js";

/** The parser of each language, configured as in `repo/symbols.ts`. */
const PARSERS: Record<SourceLanguage, typeof python> = {
  python,
  javascript: javascript.configure({ dialect: "jsx" }),
  typescript: javascript.configure({ dialect: "ts" }),
  tsx: javascript.configure({ dialect: "ts jsx" }),
};

/** Files larger than this (characters) are not checked: the check would cost more than it tells. */
export const MAX_CHECKED_CHARS = 512 * 1024;

/**
 * The first syntax error of a file, as one line: `path:line:column: syntax error at "…"`
 * (`unexpected end of file` at the end), with the line's text under it. Undefined when the
 * file parses, has no parser (by extension), or is longer than {@link MAX_CHECKED_CHARS}.
 */
export function syntaxError(path: string, text: string): string | undefined {
  const lang = languageOf(path);
  if (!lang || text.length > MAX_CHECKED_CHARS) return undefined;
  const tree = PARSERS[lang].parse(text);
  let at = -1;
  tree.iterate({
    enter: (n) => {
      if (at >= 0) return false;
      if (n.type.isError) {
        at = n.from;
        return false;
      }
      return undefined;
    },
  });
  if (at < 0) return undefined;
  const lineStart = text.lastIndexOf("\n", at - 1) + 1;
  const lineEnd = text.indexOf("\n", at);
  const line = text.slice(lineStart, lineEnd < 0 ? text.length : lineEnd);
  const lineNo = text.slice(0, lineStart).split("\n").length;
  const near = text.slice(at, at + 20).split("\n")[0] ?? "";
  const what = at >= text.trimEnd().length ? "unexpected end of file" : `syntax error at "${near}"`;
  return `${path}:${lineNo}:${at - lineStart + 1}: ${what}\n${String(lineNo).padStart(5)}: ${line}`;
}
