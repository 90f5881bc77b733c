import { describe, expect, it } from "vitest";
import { blockers, checkOne, src } from "./testing.js";

const js = (...lines: string[]) => checkOne("solution.js", src(...lines));
const ts = (...lines: string[]) => checkOne("solution.ts", src(...lines));

describe("gate: JavaScript/TypeScript rules that block", () => {
  it("blocks network and process modules however they are loaded", () => {
    const r = js(
      'import net from "node:net";',
      'import * as cp from "child_process";',
      'import { request } from "https";',
      'const http = require("http");',
      'const { spawn: sp } = require("node:child_process");',
      'const dgram = await import("dgram");',
      'export * from "tls";',
      'import axios from "axios";',
    );
    expect(blockers(r)).toEqual([
      "network@1",
      "child-process@2",
      "network@3",
      "network@4",
      "child-process@5",
      "network@6",
      "network@7",
      "network@8",
    ]);
  });

  it("blocks fetch and other network globals, also through globalThis and aliases", () => {
    const r = js("fetch(url);", "globalThis.fetch(url);", "const f = window.fetch;", "f(url);", "new WebSocket(url);");
    expect(blockers(r)).toEqual(["network@1", "network@2", "network@3", "network@4", "network@5"]);
  });

  it("lets a parameter named fetch shadow the global only inside its function", () => {
    const r = js(
      "function get(fetch, key) {",
      "  return fetch(key);",
      "}",
      "get(fetch, 'k');",
      "const load = (u) => fetch(u);",
    );
    expect(blockers(r)).toEqual(["network@4", "network@5"]);
  });

  it("blocks eval and Function on computed strings and analyses literal ones", () => {
    const r = js(
      "eval(code);",
      'new Function("a", body);',
      'Function("return " + expr)();',
      'eval("1 + 2");',
      "eval(\"require('net')\");",
      "const e = eval;",
    );
    expect(blockers(r)).toEqual(["dynamic-eval@1", "dynamic-eval@2", "dynamic-eval@3", "network@5", "dynamic-eval@6"]);
  });

  it("blocks require and import() with computed names", () => {
    expect(blockers(js("const m = require(name);", "const n = await import(`./${x}.js`);"))).toEqual([
      "dynamic-import@1",
      "dynamic-import@2",
    ]);
  });

  it("blocks fs.rm on / or the home directory, with aliases", () => {
    const r = js(
      'import fs from "node:fs";',
      'import { rmSync as r } from "fs";',
      'import os from "node:os";',
      'const { rm } = require("fs/promises");',
      'fs.rmSync("/", { recursive: true, force: true });',
      "r(os.homedir(), { recursive: true });",
      'await rm("~", { recursive: true });',
      'fs.rmSync("./dist", { recursive: true });',
      "r(tmpDir, { recursive: true });",
    );
    expect(blockers(r)).toEqual(["destructive-delete@5", "destructive-delete@6", "destructive-delete@7"]);
  });

  it("blocks process.binding and destructive shell commands in strings and templates", () => {
    const r = js(
      'process.binding("spawn_sync");',
      'const a = "rm -rf /";',
      "const b = `sudo rm -rf / && echo ${x}`;",
      'const c = "rm -rf " + "~";',
      'const d = ":(){ :|:& };:";',
    );
    expect(blockers(r)).toEqual([
      "native-binding@1",
      "destructive-shell@2",
      "destructive-shell@3",
      "destructive-shell@4",
      "destructive-shell@5",
    ]);
  });

  it("checks TypeScript with the ts dialect, and *.test.ts files too", () => {
    const r = checkOne(
      "src/solution.test.ts",
      src('import { exec } from "node:child_process";', "const run = (cmd: string): void => { exec(cmd); };"),
    );
    expect(blockers(r)).toEqual(["child-process@1"]);
  });
});

describe("gate: ordinary JavaScript/TypeScript is not blocked", () => {
  it("passes a node:test file", () => {
    const r = checkOne(
      "solution.test.js",
      src(
        'import { test, describe } from "node:test";',
        'import assert from "node:assert/strict";',
        'import { readFileSync } from "node:fs";',
        'import path from "node:path";',
        'import { add } from "./solution.js";',
        "",
        'describe("add", () => {',
        '  test("adds", async (t) => {',
        "    assert.equal(add(1, 2), 3);",
        '    await t.test("nested", () => assert.deepStrictEqual([...new Set([1, 1])], [1]));',
        "  });",
        '  test("reads a fixture", () => {',
        '    const text = readFileSync(path.join(import.meta.dirname, "fixture.txt"), "utf8");',
        "    assert.match(text, /a\\/b[/]c/u);",
        "  });",
        "});",
      ),
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });

  it("passes TypeScript with types, generics, enums and classes", () => {
    const r = ts(
      'import type { Socket } from "node:net";',
      'import { type Agent } from "node:https";',
      'export interface Shape { kind: "circle" | "square"; size?: number }',
      "type Keys<T> = { [K in keyof T]: T[K] extends string ? K : never }[keyof T];",
      "enum Color { Red = 1, Green }",
      "export class Cache<K, V> {",
      "  private readonly items = new Map<K, V>();",
      "  constructor(private readonly limit: number = 10) {}",
      "  fetch(key: K): V | undefined { return this.items.get(key); }",
      "}",
      "export function first<T>(xs: readonly T[]): T | undefined {",
      "  const cfg = { a: 1 } as const satisfies Record<string, number>;",
      "  return xs.length > cfg.a - 1 ? xs[0] : undefined;",
      "}",
      "export const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);",
      "const msg = `value: ${sum([1, 2])}`;",
      "function fetch(url: string): string { return url; }",
      'fetch("local-cache-key");',
      'const literal = eval("2 + 2");',
      "let s: Socket | undefined; let g: Agent | undefined;",
      "let late!: number;",
      "try { late = 1; } catch (err: unknown) { console.error(err); }",
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });
});

describe("gate: JavaScript/TypeScript syntax errors", () => {
  it("reports a syntax error with its line, as a non-blocking error", () => {
    const r = js("function ok() { return 1; }", "", "const broken = ;", "let fine = 2;");
    expect(r.blocked).toBe(false);
    expect(r.findings).toHaveLength(1);
    expect(r.findings[0]).toMatchObject({ severity: "error", rule: "syntax", line: 3, path: "solution.js" });
  });
});
