/**
 * Mutation operators with names, for the transfer benchmark: each mutant says which mistake
 * made it, so a failure's root cause is known from how it was made, not read from its text.
 *
 * Two sources:
 * - the project's mutants ({@link mutantsOf}, `evals/src/mutants.ts`: the scripted demo's and
 *   bench:recall's), each named by the change it made (`==` to `!=` is `negated-equality`);
 * - operators that module lacks, written here: an off-by-one in a `range` bound, a flipped
 *   comparison, a wrong initial value, swapped arguments, a missing `return`, a mutable
 *   default argument, and `/` where `//` was meant.
 * A literal changed in an initialising assignment (`total = 0`) counts as a wrong initial
 * value whichever source made it (the project's mutant of that line is left out), and a
 * constant changed in a `range(…)` call's arguments as an off-by-one in a bound, so that one
 * kind of mistake carries one name.
 */
import { mutantsOf, type HumanEvalRecord, type Mutant } from "@loopsmith/evals";

/** Every operator, in the order a task's candidates are tried. */
export const OPERATORS = [
  "off-by-one-bound",
  "flipped-comparison",
  "wrong-initial-value",
  "swapped-arguments",
  "missing-return",
  "mutable-default",
  "true-division",
  "negated-equality",
  "comparison-strictness",
  "and-or-swapped",
  "boolean-constant",
  "constant-plus-one",
  "arithmetic-operator",
  "min-max-swapped",
  "ceil-floor-swapped",
  "letter-case",
  "prefix-suffix-swapped",
  "sort-dropped",
  "negated-condition",
  "string-literal",
] as const;
export type Operator = (typeof OPERATORS)[number];

/** One mutant of a task: the completion (and the prompt, which `mutable-default` changes). */
export interface NamedMutant {
  operator: Operator;
  /** The prompt the completion follows (the record's, unless the signature was changed). */
  prompt: string;
  /** The function body. */
  body: string;
  description: string;
}

/** Where a line's comment starts (a `#` outside strings), or the line's length. */
function commentAt(line: string): number {
  const at = mask(line, true).indexOf("#");
  return at < 0 ? line.length : at;
}

/** The code part of a line: strings and a trailing comment blanked, positions kept (with `keepHash`, the `#` stays). */
function mask(line: string, keepHash = false): string {
  let out = "";
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (quote) {
      if (c === "\\") {
        out += line[i + 1] === undefined ? " " : "  ";
        i++;
      } else {
        if (c === quote) quote = null;
        out += " ";
      }
    } else if (c === "#") {
      return out + (keepHash ? "#" : " ") + " ".repeat(line.length - i - 1);
    } else if (c === '"' || c === "'") {
      quote = c;
      out += " ";
    } else out += c;
  }
  return out;
}

/** Which lines belong to a docstring (or hold a triple quote): never mutated. */
function docstringLines(lines: readonly string[]): boolean[] {
  let inside = false;
  return lines.map((l) => {
    const triples = (l.match(/"""|'''/g) ?? []).length;
    const was = inside;
    if (triples % 2 === 1) inside = !inside;
    return was || triples > 0;
  });
}

/** The index of the bracket closing the one at `open` in a masked line, or -1. */
function closing(masked: string, open: number): number {
  let depth = 0;
  for (let i = open; i < masked.length; i++) {
    const c = masked[i];
    if (c === "(" || c === "[" || c === "{") depth++;
    else if (c === ")" || c === "]" || c === "}") {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}

/** Top-level comma-separated spans `[start, end)` of `masked` between `from` and `to`. */
function argSpans(masked: string, from: number, to: number): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  let depth = 0;
  let start = from;
  for (let i = from; i < to; i++) {
    const c = masked[i];
    if (c === "(" || c === "[" || c === "{") depth++;
    else if (c === ")" || c === "]" || c === "}") depth--;
    else if (c === "," && depth === 0) {
      spans.push([start, i]);
      start = i + 1;
    }
  }
  spans.push([start, to]);
  return spans;
}

/** A span with the whitespace around it left out. */
function trimmed(line: string, [s, e]: [number, number]): [number, number] {
  while (s < e && /\s/.test(line[s] as string)) s++;
  while (e > s && /\s/.test(line[e - 1] as string)) e--;
  return [s, e];
}

interface Site {
  lines: string[];
  idx: number;
}

function replaced({ lines, idx }: Site, line: string): string {
  const copy = [...lines];
  copy[idx] = line;
  return copy.join("\n");
}

type Local = Omit<NamedMutant, "prompt"> & { prompt?: string };

/** `range(stop)` and `range(start, stop[, step])`: the stop one lower, then one higher. */
function offByOneBound(site: Site, line: string, masked: string, out: Local[]): void {
  for (const m of masked.matchAll(/\brange\(/g)) {
    const open = (m.index ?? 0) + m[0].length - 1;
    const close = closing(masked, open);
    if (close < 0) continue;
    const spans = argSpans(masked, open + 1, close);
    const stop = spans.length === 1 ? spans[0] : spans[1];
    if (!stop) continue;
    const [s, e] = trimmed(line, stop);
    if (s >= e) continue;
    const text = line.slice(s, e);
    // `n + 1` one lower is `n`, `n - 1` one higher is `n`; anything else gains ` - 1` or ` + 1`.
    const lower = / \+ 1$/.test(text) ? text.slice(0, -4) : `${text} - 1`;
    const higher = / - 1$/.test(text) ? text.slice(0, -4) : `${text} + 1`;
    for (const to of [lower, higher]) {
      out.push({
        operator: "off-by-one-bound",
        body: replaced(site, line.slice(0, s) + to + line.slice(e)),
        description: `line ${site.idx + 1}: range stop \`${text}\` changed to \`${to}\``,
      });
    }
  }
}

/** `<` and `>` swapped, `<=` and `>=` swapped (not `<<`, `>>`, `->`). */
function flippedComparison(site: Site, line: string, masked: string, out: Local[]): void {
  const rules: Array<[RegExp, string]> = [
    [/(?<![<>=!-])<(?![<=])/g, ">"],
    [/(?<![<>=!-])>(?![>=])/g, "<"],
    [/(?<![<>=!])<=/g, ">="],
    [/(?<![<>=!])>=/g, "<="],
  ];
  for (const [pattern, to] of rules) {
    for (const m of masked.matchAll(pattern)) {
      const at = m.index ?? 0;
      out.push({
        operator: "flipped-comparison",
        body: replaced(site, line.slice(0, at) + to + line.slice(at + m[0].length)),
        description: `line ${site.idx + 1}: \`${m[0]}\` changed to \`${to}\``,
      });
    }
  }
}

/** `name = <literal>` as a line of its own. */
const INIT = /^(\s*)([A-Za-z_]\w*)(\s*=\s*)(-?\d+(?:\.\d+)?|True|False|None|''|""|float\((['"])-?inf\5\))\s*$/;

/** The value a wrong initialisation starts from instead of `literal`. */
function wrongValue(literal: string): string {
  if (literal === "True") return "False";
  if (literal === "False") return "True";
  if (literal === "None" || literal.startsWith("float(")) return "0";
  if (literal === "''" || literal === '""') return `${literal[0]} ${literal[0]}`;
  if (literal.includes(".")) return String(Number(literal) + 1);
  const n = Number(literal);
  return String(n === 1 ? 0 : n + 1);
}

/** Lines that first assign a literal to a name (its initial value), by index. */
function initialisations(lines: readonly string[], doc: readonly boolean[]): Map<number, RegExpExecArray> {
  const seen = new Set<string>();
  const out = new Map<number, RegExpExecArray>();
  lines.forEach((line, idx) => {
    if (doc[idx]) return;
    const code = line.slice(0, commentAt(line));
    const m = INIT.exec(code);
    const assigned = /^\s*([A-Za-z_]\w*)\s*(?:[-+*/%]|\/\/)?=(?!=)/.exec(mask(line))?.[1];
    if (m && assigned && !seen.has(assigned)) out.set(idx, m);
    if (assigned) seen.add(assigned);
  });
  return out;
}

function wrongInitialValue(site: Site, m: RegExpExecArray, out: Local[]): void {
  const [, indent = "", name = "", eq = "", literal = ""] = m;
  const to = wrongValue(literal);
  out.push({
    operator: "wrong-initial-value",
    body: replaced(site, `${indent}${name}${eq}${to}`),
    description: `line ${site.idx + 1}: \`${name} = ${literal}\` changed to \`${name} = ${to}\``,
  });
}

const NOT_CALLS = new Set(["if", "elif", "while", "for", "return", "and", "or", "not", "in", "is", "lambda", "yield"]);

/** A call with exactly two positional arguments, `f(a, b)`, becomes `f(b, a)`. */
function swappedArguments(site: Site, line: string, masked: string, out: Local[]): void {
  for (const m of masked.matchAll(/(?<![\w.])([A-Za-z_][\w.]*)\(/g)) {
    const name = m[1] as string;
    const at = m.index ?? 0;
    if (NOT_CALLS.has(name) || /\bdef\s+$/.test(masked.slice(0, at))) continue;
    const open = at + m[0].length - 1;
    const close = closing(masked, open);
    if (close < 0) continue;
    const spans = argSpans(masked, open + 1, close).map((sp) => trimmed(line, sp));
    if (spans.length !== 2) continue;
    const [a, b] = spans as [[number, number], [number, number]];
    const ta = line.slice(a[0], a[1]);
    const tb = line.slice(b[0], b[1]);
    const positional = (t: string, sp: [number, number]): boolean =>
      t !== "" && !t.startsWith("*") && !/^\w+\s*=(?!=)/.test(masked.slice(sp[0], sp[1])) && !/\bfor\b/.test(t);
    if (!positional(ta, a) || !positional(tb, b) || ta === tb) continue;
    out.push({
      operator: "swapped-arguments",
      body: replaced(site, line.slice(0, a[0]) + tb + line.slice(a[1], b[0]) + ta + line.slice(b[1])),
      description: `line ${site.idx + 1}: \`${name}(${ta}, ${tb})\` changed to \`${name}(${tb}, ${ta})\``,
    });
  }
}

/** `return <value>` becomes the bare expression `<value>`: computed, never returned. */
function missingReturn(site: Site, line: string, masked: string, out: Local[]): void {
  const m = /^(\s*)return\s+(?=\S)/.exec(masked);
  if (!m) return;
  const value = line.slice(m[0].length);
  out.push({
    operator: "missing-return",
    body: replaced(site, `${m[1] ?? ""}${value}`),
    description: `line ${site.idx + 1}: \`return ${value.trim()}\` changed to \`${value.trim()}\``,
  });
}

/** `//` becomes `/` (true division where floor division was meant). */
function trueDivision(site: Site, line: string, masked: string, out: Local[]): void {
  for (const m of masked.matchAll(/\/\//g)) {
    const at = m.index ?? 0;
    out.push({
      operator: "true-division",
      body: replaced(site, line.slice(0, at) + "/" + line.slice(at + 2)),
      description: `line ${site.idx + 1}: \`//\` changed to \`/\``,
    });
  }
}

/**
 * The function's first empty container (`result = []` at the top of the body) becomes a
 * default argument of its signature (`def f(xs, result=[])`): shared by every call.
 */
function mutableDefault(rec: HumanEvalRecord, lines: string[], doc: readonly boolean[]): Local | null {
  const first = lines.findIndex((l, i) => !doc[i] && l.trim() !== "");
  const base = /^\s*/.exec(lines[first] ?? "")?.[0] ?? "";
  const idx = lines.findIndex(
    (l, i) =>
      !doc[i] &&
      new RegExp(`^${base}[A-Za-z_]\\w*\\s*=\\s*(?:\\[\\]|\\{\\}|list\\(\\)|dict\\(\\)|set\\(\\))\\s*$`).test(l),
  );
  if (idx < 0) return null;
  const [name, value] = (lines[idx] as string).split("=").map((s) => s.trim()) as [string, string];
  const def = new RegExp(`\\bdef\\s+${rec.entry_point}\\s*\\(`).exec(rec.prompt);
  if (!def) return null;
  const open = def.index + def[0].length - 1;
  const close = closing(rec.prompt.replace(/\n/g, " "), open);
  if (close < 0) return null;
  const params = rec.prompt.slice(open + 1, close);
  if (params.includes("**") || new RegExp(`\\b${name}\\b`).test(params)) return null;
  const glue = params.trim() === "" ? "" : params.trimEnd().endsWith(",") ? " " : ", ";
  const prompt = `${rec.prompt.slice(0, open + 1)}${params.trimEnd()}${glue}${name}=${value}${rec.prompt.slice(close)}`;
  return {
    operator: "mutable-default",
    prompt,
    body: lines.filter((_, i) => i !== idx).join("\n"),
    description: `line ${idx + 1}: \`${name} = ${value}\` moved into the signature as the default \`${name}=${value}\``,
  };
}

/** Whether a constant the project's mutant changed sits in a `range(…)` call's arguments (a bound). */
function inRangeCall(line: string, m: Mutant): boolean {
  if (!/^\d+$/.test(m.from)) return false;
  const after = m.text.split("\n")[m.line - 1] ?? "";
  let col = 0;
  while (col < line.length && line[col] === after[col]) col++;
  const masked = mask(line);
  for (const call of masked.matchAll(/\brange\(/g)) {
    const open = (call.index ?? 0) + call[0].length - 1;
    const close = closing(masked, open);
    if (col > open && (close < 0 || col < close)) return true;
  }
  return false;
}

/** The operator of one of the project's mutants, from the change it made. */
function nameOf(m: Mutant): Operator {
  const { from, to } = m;
  if ((from === "==" && to === "!=") || (from === "!=" && to === "==")) return "negated-equality";
  if (/^[<>]=?$/.test(from)) return "comparison-strictness";
  if (from === "and" || from === "or") return "and-or-swapped";
  if (from === "True" || from === "False") return "boolean-constant";
  if (/^\d+(?:\.\d+)?$/.test(from)) return "constant-plus-one";
  if (/^(?:max|min)\($/.test(from)) return "min-max-swapped";
  if (/^(?:ceil|floor)\($/.test(from)) return "ceil-floor-swapped";
  if (/^\.(?:upper|lower|swapcase)\(\)$/.test(from)) return "letter-case";
  if (/^\.(?:startswith|endswith)\($/.test(from)) return "prefix-suffix-swapped";
  if (from === "sorted(") return "sort-dropped";
  if (from === "if" || from === "not" || from === "return not") return "negated-condition";
  if (from.startsWith("return ")) return "missing-return";
  if (/^['"]/.test(from)) return "string-literal";
  return "arithmetic-operator";
}

/**
 * Every named mutant of a record's canonical solution, grouped by operator in
 * {@link OPERATORS} order; within an operator, the new operators' candidates come first
 * (for `missing-return`, the last `return` first), then the project's, in its order. A body
 * that two operators make is kept once, under the first.
 */
export function namedMutants(rec: HumanEvalRecord): NamedMutant[] {
  const lines = rec.canonical_solution.split("\n");
  const doc = docstringLines(lines);
  const inits = initialisations(lines, doc);
  const local: Local[] = [];
  lines.forEach((line, idx) => {
    if (doc[idx]) return;
    const site = { lines, idx };
    const masked = mask(line);
    offByOneBound(site, line, masked, local);
    flippedComparison(site, line, masked, local);
    const init = inits.get(idx);
    if (init) wrongInitialValue(site, init, local);
    swappedArguments(site, line, masked, local);
    trueDivision(site, line, masked, local);
  });
  for (let idx = lines.length - 1; idx >= 0; idx--) {
    if (!doc[idx]) missingReturn({ lines, idx }, lines[idx] as string, mask(lines[idx] as string), local);
  }
  const mutable = mutableDefault(rec, lines, doc);
  if (mutable) local.push(mutable);
  const theirs: Local[] = mutantsOf(rec.canonical_solution)
    .filter((m) => !(inits.has(m.line - 1) && (/^[\d'"]/.test(m.from) || /^(?:True|False)$/.test(m.from))))
    .map((m) => ({
      operator: inRangeCall(lines[m.line - 1] ?? "", m) ? "off-by-one-bound" : nameOf(m),
      body: m.text,
      description: m.description,
    }));
  const seen = new Set<string>();
  const out: NamedMutant[] = [];
  for (const op of OPERATORS) {
    for (const m of [...local, ...theirs]) {
      if (m.operator !== op) continue;
      const prompt = m.prompt ?? rec.prompt;
      const key = `${prompt}\u0000${m.body}`;
      if (seen.has(key) || key === `${rec.prompt}\u0000${rec.canonical_solution}`) continue;
      seen.add(key);
      out.push({ ...m, prompt });
    }
  }
  return out;
}
