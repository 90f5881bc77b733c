/**
 * One parsed source file as the gate's analysers see it: its text, a line index, its
 * syntax tree, and the findings collected so far.
 */
import type { SyntaxNode, Tree } from "@lezer/common";
import type { Finding } from "@loopsmith/shared/contracts";
import { RULES, type RuleId } from "./rules.js";
import { scanShell } from "./shell.js";

/** One file being analysed. `lineOffset` shifts lines when the text is a string inside another file. */
export class SourceFile {
  readonly findings: Finding[] = [];
  private readonly lineStarts: number[];

  /**
   * @param path - the workspace-relative path reported in findings
   * @param text - the file's text
   * @param tree - its lezer syntax tree
   * @param lineOffset - added to every line (0 for a real file; for a string literal that
   *   is analysed as code, the line of the literal minus 1)
   * @param depth - how many string literals deep this analysis is (0 for a real file)
   * @param oneLine - every finding gets line `lineOffset + 1` (a one-line literal whose
   *   escaped newlines do not match the file's lines)
   */
  constructor(
    readonly path: string,
    readonly text: string,
    readonly tree: Tree,
    readonly lineOffset = 0,
    readonly depth = 0,
    readonly oneLine = false,
  ) {
    const starts = [0];
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1);
    this.lineStarts = starts;
  }

  /** 1-based line of a character offset in {@link text}, with {@link lineOffset} applied. */
  lineAt(pos: number): number {
    if (this.oneLine) return this.lineOffset + 1;
    let lo = 0;
    let hi = this.lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((this.lineStarts[mid] ?? 0) <= pos) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1 + this.lineOffset;
  }

  /** The source text of a node. */
  textOf(node: SyntaxNode): string {
    return this.text.slice(node.from, node.to);
  }

  /**
   * Records a finding of `rule` at `pos` with the rule's default severity (or `severity`).
   * Inside an analysed string literal the message says so.
   */
  report(rule: RuleId, pos: number, message: string, severity?: Finding["severity"]): void {
    const prefix = this.depth > 0 ? "inside a string that is evaluated as code: " : "";
    this.findings.push({
      severity: severity ?? RULES[rule].severity,
      message: `${prefix}${message}`.slice(0, 2_000),
      path: this.path,
      line: this.lineAt(pos),
      rule,
    });
  }

  /**
   * Scans the content of a string for destructive or network shell commands and reports
   * each hit. `posOf` maps an index in `content` to an offset in {@link text} (for the line).
   */
  scanString(content: string, posOf: (index: number) => number): void {
    for (const hit of scanShell(content)) this.report(hit.rule, posOf(hit.index), hit.message);
  }

  /**
   * Reports the first syntax error of the tree, if any, as one `syntax` finding (severity
   * `error`, not blocking). lezer recovers from errors, so the rest of the tree is still
   * analysed and a dangerous call after a syntax error is still found.
   */
  reportSyntaxError(): void {
    let first: SyntaxNode | undefined;
    this.tree.iterate({
      enter: (n) => {
        if (first) return false;
        if (n.type.isError) {
          first = n.node;
          return false;
        }
        return undefined;
      },
    });
    if (!first) return;
    const near = nearToken(this.text, first.from, first.to);
    this.report(
      "syntax",
      first.from,
      near
        ? `syntax error at line ${this.lineAt(first.from)} near \`${near}\``
        : `syntax error at line ${this.lineAt(first.from)}: unexpected end of input`,
    );
  }
}

/** The token at or after an error node, for a readable message; empty at end of input. */
function nearToken(text: string, from: number, to: number): string {
  const inside = text.slice(from, to).trim();
  if (inside) return inside.split(/\s+/)[0]!.slice(0, 40);
  const after = text.slice(from).trimStart();
  if (!after) return "";
  return (after.split(/\s+/)[0] ?? "").slice(0, 40);
}

/** The children of a node, in order. */
/**
 * Names a file binds (by `def`/`function`, class, parameter or assignment), per scope: the
 * scope's start offset, or -1 for the module.
 */
export type Bindings = Map<number, Set<string>>;

/**
 * True when `name` is bound in a scope that encloses `node` (the innermost function outward,
 * then the module). `enclosing` finds a node's enclosing function scope in its language.
 */
export function isBound(
  bound: Bindings,
  name: string,
  node: SyntaxNode,
  enclosing: (n: SyntaxNode) => SyntaxNode | null,
): boolean {
  for (let scope = enclosing(node); scope; scope = enclosing(scope)) {
    if (bound.get(scope.from)?.has(name)) return true;
  }
  return bound.get(-1)?.has(name) ?? false;
}

export function children(node: SyntaxNode): SyntaxNode[] {
  const out: SyntaxNode[] = [];
  for (let c = node.firstChild; c; c = c.nextSibling) out.push(c);
  return out;
}

/** Visits every node of a tree, depth first, parents before children. */
export function walk(tree: Tree, visit: (node: SyntaxNode) => void): void {
  tree.iterate({ enter: (n) => void visit(n.node) });
}
