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

/** Replacement rules, tried in this order; each is a regex over code tokens and its replacement. */
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
  { pattern: /(?<![\w.])0(?![\w.])/g, to: () => "1" },
  { pattern: /(?<![\w.])1(?![\w.])/g, to: () => "2" },
  { pattern: /(?<![\w.])2(?![\w.])/g, to: () => "3" },
  { pattern: /(?<=\w|\)|\]) \+ (?=\w|\(|\[)/g, to: () => " - " },
  { pattern: /(?<=\w|\)|\]) - (?=\w|\(|\[)/g, to: () => " + " },
  { pattern: /(?<=\w|\)|\]) \* (?=\w|\(|\[)/g, to: () => " + " },
  { pattern: /\/\//g, to: () => "%" },
  { pattern: / % /g, to: () => " // " },
  { pattern: /(?<=\w|\)|\]) \/ (?=\w|\(|\[)/g, to: () => " * " },
  { pattern: / \+= /g, to: () => " -= " },
  { pattern: / -= /g, to: () => " += " },
  { pattern: /(?<![\w.])\d+\.\d+(?![\w.])/g, to: (m) => String(Number(m) + 1) },
  { pattern: /\bmax\(/g, to: () => "min(" },
  { pattern: /\bmin\(/g, to: () => "max(" },
  { pattern: /\.upper\(\)/g, to: () => ".lower()" },
  { pattern: /\.lower\(\)/g, to: () => ".upper()" },
  { pattern: /\breturn not\b/g, to: () => "return" },
  { pattern: /\bnot (?=\w)/g, to: () => "" },
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
        const copy = [...lines];
        copy[idx] = mutated;
        out.push({
          text: copy.join("\n"),
          line: idx + 1,
          from: from.trim(),
          to: to.trim(),
          description: `line ${idx + 1}: \`${from.trim()}\` changed to \`${to.trim()}\``,
        });
      }
    });
  }
  return out;
}
