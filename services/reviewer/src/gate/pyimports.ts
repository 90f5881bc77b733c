/**
 * Python imports as the gate reads them: which local name stands for which module or
 * member, and which imports bring a network module.
 */
import type { SyntaxNode } from "@lezer/common";
import { PY_MODULE_ALIASES, PY_NETWORK_MODULES } from "./rules.js";
import { children, type SourceFile } from "./source.js";

/** Imports in scope: local name → qualified name, and modules imported with `*`. */
export interface Scope {
  aliases: Map<string, string>;
  starModules: string[];
}

/** `posix.system` → `os.system`: a module's other names are read as the module. */
export function normaliseModule(name: string): string {
  const [head, ...rest] = name.split(".");
  const canonical = PY_MODULE_ALIASES[head ?? ""] ?? head ?? "";
  return [canonical, ...rest].join(".");
}

/** True for a module of {@link PY_NETWORK_MODULES} or one of its members. */
export function isNetworkName(q: string): boolean {
  return PY_NETWORK_MODULES.some((m) => q === m || q.startsWith(`${m}.`));
}

/**
 * Records the names an import statement binds in `scope` (`import os as o` → `o` is `os`,
 * `from os import system as s` → `s` is `os.system`, `from os import *` → `os` is searched
 * for names) and reports importing a network module (rule `network`) on `src`. Relative
 * imports are the task's own modules and bind nothing here.
 */
export function readImport(node: SyntaxNode, src: SourceFile, scope: Scope): void {
  const tokens = children(node).map((c) => ({ name: c.name, text: src.textOf(c), from: c.from }));
  const fromIdx = tokens.findIndex((t) => t.name === "from");
  const importIdx = tokens.findIndex((t) => t.name === "import");
  if (importIdx < 0) return;
  // Groups of `a.b.c [as d]` separated by commas.
  const groups: { dotted: string; alias?: string }[] = [];
  let current: { dotted: string; alias?: string } | undefined;
  for (const t of tokens.slice(importIdx + 1)) {
    if (t.name === "," || t.name === "(" || t.name === ")") {
      current = undefined;
    } else if (t.name === "*") {
      groups.push({ dotted: "*" });
    } else if (t.name === "as") {
      if (current) current.alias = "";
    } else if (t.name === "VariableName" && current?.alias === "") {
      current.alias = t.text;
    } else if (t.name === "VariableName" && current && current.dotted.endsWith(".")) {
      current.dotted += t.text;
    } else if (t.name === "VariableName") {
      current = { dotted: t.text };
      groups.push(current);
    } else if (t.name === "." && current) {
      current.dotted += ".";
    }
  }
  if (fromIdx >= 0) {
    const moduleTokens = tokens.slice(fromIdx + 1, importIdx);
    if (moduleTokens[0]?.name === ".") return; // a relative import: the task's own modules
    const mod = normaliseModule(moduleTokens.map((t) => t.text).join(""));
    for (const g of groups) {
      if (g.dotted === "*") {
        scope.starModules.push(mod);
        if (isNetworkName(mod)) src.report("network", node.from, `\`from ${mod} import *\` imports a network module`);
        continue;
      }
      const qualified = `${mod}.${g.dotted}`;
      scope.aliases.set(g.alias || g.dotted, qualified);
      if (isNetworkName(mod) || isNetworkName(qualified)) {
        src.report("network", node.from, `\`${isNetworkName(mod) ? mod : qualified}\` opens network connections`);
      }
    }
    return;
  }
  for (const g of groups) {
    const mod = normaliseModule(g.dotted);
    if (g.alias) scope.aliases.set(g.alias, mod);
    else {
      const head = g.dotted.split(".")[0]!;
      scope.aliases.set(head, normaliseModule(head));
    }
    if (isNetworkName(mod))
      src.report("network", node.from, `\`import ${g.dotted}\`: \`${mod}\` opens network connections`);
  }
}
