/**
 * The shape of code, without the task's names and values: each line's tokens with its own
 * identifiers, numbers and strings abstracted (`total += xs[i]` is `V += V [ V ]`), Python's
 * keywords, built-ins and common methods kept (`range`, `len`, `sorted`, `append`: they are
 * the language, not the task), then every run of three tokens as one word. Two tasks that
 * make the same kind of mistake write lines of the same shape (`for V in range ( len ( V )
 * - N )`, `def V ( V , V = [ ] )`) under different names.
 */

/** Tokens kept as they are: Python's keywords, and built-ins and methods common in any task. */
const KEPT = new Set(
  (
    "False None True and as assert async await break class continue def del elif else except finally for from " +
    "global if import in is lambda nonlocal not or pass raise return try while with yield " +
    "abs all any bin bool chr dict divmod enumerate filter float hex int isinstance len list map max min ord pow " +
    "range reversed round set sorted str sum tuple zip append extend insert pop remove sort split join strip " +
    "lower upper isupper islower isdigit isalpha startswith endswith replace count index find keys values items " +
    "get math sqrt floor ceil swapcase"
  ).split(" "),
);

/** One line's tokens with the task's names (`V`), numbers (`N`) and strings (`S`) abstracted. */
export function shapeTokens(line: string): string[] {
  const toks =
    line.match(/[A-Za-z_]\w*|\d+(?:\.\d+)?|'[^']*'|"[^"]*"|==|!=|<=|>=|\/\/|\*\*|[-+*/%<>=!&|^~()[\]{}:,.]/g) ?? [];
  return toks.map((t) => {
    if (/^[A-Za-z_]/.test(t)) return KEPT.has(t) ? t : "V";
    if (/^\d/.test(t)) return "N";
    if (/^['"]/.test(t)) return "S";
    return t;
  });
}

/** FNV-1a, 32 bits, in base 36. */
function fnv(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(36);
}

/**
 * The shape words of code (comments already stripped): for each non-empty line, each run of
 * three abstracted tokens as the word `sh<hash>`, in order. Pure; never throws.
 * @example shapeWords("for i in range(n - 1):") // five `sh…` words, the same as for "for k in range(m - 2):"
 */
export function shapeWords(code: string): string {
  const out: string[] = [];
  for (const line of code.split("\n")) {
    const t = shapeTokens(line.trim());
    for (let i = 0; i + 2 < t.length; i++) out.push(`sh${fnv(t.slice(i, i + 3).join(" "))}`);
  }
  return out.join(" ");
}
