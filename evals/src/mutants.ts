/**
 * Mutants of a Python function body: one operator or constant changed at one place, the
 * classic mutation-testing operators (relational, arithmetic, boolean, constant). Used to
 * make a first candidate that fails its tests, for the scripted demo and the oracle bench.
 */

/** One mutant: the mutated text and what was changed. */
export interface Mutant {
  text: string;
  /** 1-based line of the change. */
  line: number;
  from: string;
  to: string;
  description: string;
}

/**
 * Replacement rules over the code part of a line (strings and comments masked), tried in
 * this order: relational, boolean, constants, arithmetic, calls, negated conditions, and
 * last the null-return mutator (PIT's NULL_RETURNS, mutmut's return-value mutation).
 */
const RULES: ReadonlyArray<{ pattern: RegExp; to: (m: string) => string }> = [
  { pattern: /==/g, to: () => "!=" },
  { pattern: /!=/g, to: () => "==" },
  { pattern: /<=/g, to: () => "<" },
  { pattern: />=/g, to: () => ">" },
  { pattern: /(?<![<>=!-])<(?![<=])/g, to: () => "<=" },
  { pattern: /(?<![<>=!-])>(?![>=])/g, to: () => ">=" },
  { pattern: /\band\b/g, to: () => "or" },
  { pattern: /\bor\b/g, to: () => "and" },
  { pattern: /\bTrue\b/g, to: () => "False" },
  { pattern: /\bFalse\b/g, to: () => "True" },
  { pattern: /(?<![\w.])\d+(?![\w.])/g, to: (m) => String(Number(m) + 1) },
  { pattern: /(?<=[\w)\]]) ?\+ ?(?=[\w([])/g, to: (m) => m.replace("+", "-") },
  { pattern: /(?<=[\w)\]]) ?-(?!=) ?(?=[\w([])/g, to: (m) => m.replace("-", "+") },
  { pattern: /(?<=[\w)\]]) ?\*(?!\*) ?(?=[\w([])/g, to: (m) => m.replace("*", "+") },
  { pattern: /\/\//g, to: () => "%" },
  { pattern: /(?<=[\w)\]]) ?% ?(?=[\w([])/g, to: (m) => m.replace("%", "//") },
  { pattern: /(?<=[\w)\]]) ?\/(?!\/) ?(?=[\w([])/g, to: (m) => m.replace("/", "*") },
  { pattern: / \+= /g, to: () => " -= " },
  { pattern: / -= /g, to: () => " += " },
  { pattern: /(?<![\w.])\d+\.\d+(?![\w.])/g, to: (m) => String(Number(m) + 1) },
  { pattern: /\bmax\(/g, to: () => "min(" },
  { pattern: /\bmin\(/g, to: () => "max(" },
  { pattern: /\bceil\(/g, to: () => "floor(" },
  { pattern: /\bfloor\(/g, to: () => "ceil(" },
  { pattern: /\.upper\(\)/g, to: () => ".lower()" },
  { pattern: /\.lower\(\)/g, to: () => ".upper()" },
  { pattern: /\.swapcase\(\)/g, to: () => ".lower()" },
  { pattern: /\.startswith\(/g, to: () => ".endswith(" },
  { pattern: /\.endswith\(/g, to: () => ".startswith(" },
  { pattern: /\bsorted\(/g, to: () => "list(" },
  { pattern: /\bif (?!not\b)/g, to: () => "if not " },
  { pattern: /\breturn not\b/g, to: () => "return" },
  { pattern: /\bnot (?=\w)/g, to: () => "" },
  { pattern: /\breturn (?!None\b)\S.*$/g, to: () => "return None" },
];

/** String-literal rules over the raw line: an empty string gains a character, a one-space separator loses it. */
const STRING_RULES: ReadonlyArray<{ literal: string; to: string }> = [
  { literal: "''", to: "'x'" },
  { literal: '""', to: '"x"' },
  { literal: "' '", to: "''" },
  { literal: '" "', to: '""' },
];

/** The code part of a line: what precedes a `#` comment, with string literals blanked. */
function codeMask(line: string): string {
  let out = "";
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (quote) {
      if (c === "\\") {
        out += "  ";
        i++;
        continue;
      }
      if (c === quote) quote = null;
      out += " ";
      continue;
    }
    if (c === "#") return out + " ".repeat(line.length - i);
    if (c === '"' || c === "'") {
      quote = c;
      out += " ";
      continue;
    }
    out += c;
  }
  return out;
}

function mutant(lines: string[], idx: number, mutated: string, from: string, to: string): Mutant {
  const copy = [...lines];
  copy[idx] = mutated;
  return {
    text: copy.join("\n"),
    line: idx + 1,
    from: from.trim(),
    to: to.trim(),
    description: `line ${idx + 1}: \`${from.trim()}\` changed to \`${to.trim()}\``,
  };
}

/**
 * Every single-site mutant of `body`, in rule order then position order. Changes inside
 * string literals, comments and docstring lines are never made.
 */
export function mutantsOf(body: string): Mutant[] {
  const lines = body.split("\n");
  const out: Mutant[] = [];
  let inDocstring = false;
  const docLines = lines.map((l) => {
    const triples = (l.match(/"""|'''/g) ?? []).length;
    const was = inDocstring;
    if (triples % 2 === 1) inDocstring = !inDocstring;
    return was || triples > 0;
  });
  for (const rule of RULES) {
    lines.forEach((line, idx) => {
      if (docLines[idx]) return;
      const mask = codeMask(line);
      for (const m of mask.matchAll(rule.pattern)) {
        const at = m.index ?? 0;
        const from = m[0];
        const to = rule.to(from);
        const mutated = line.slice(0, at) + to + line.slice(at + from.length);
        out.push(mutant(lines, idx, mutated, from, to));
      }
    });
  }
  for (const rule of STRING_RULES) {
    lines.forEach((line, idx) => {
      if (docLines[idx]) return;
      const mask = codeMask(line);
      for (let at = line.indexOf(rule.literal); at >= 0; at = line.indexOf(rule.literal, at + 1)) {
        // A literal's quotes are masked; a `#` before it in the code part means a comment.
        if (mask.slice(0, at).includes("#") || mask.slice(at, at + rule.literal.length).trim() !== "") continue;
        out.push(
          mutant(lines, idx, line.slice(0, at) + rule.to + line.slice(at + rule.literal.length), rule.literal, rule.to),
        );
      }
    });
  }
  return out;
}
