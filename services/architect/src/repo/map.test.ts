import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { approxTokens } from "@loopsmith/shared/llm";
import { buildRepoMap, clearRepoMapCache, type RepoMapInput } from "./map.js";
import { MAX_FILE_BYTES, extractSymbols, indexText, readSymbols, type FileSymbols } from "./symbols.js";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function tree(files: Record<string, string | Buffer>): string {
  const root = mkdtempSync(join(tmpdir(), "loopsmith-map-test-"));
  dirs.push(root);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

const short = (s: FileSymbols): string[] =>
  s.defs.map((d) => `${d.line} ${d.kind} ${d.depth} ${d.name} | ${d.signature}`);

/** A small repository: headers ← client ← server/tests, a util everyone calls, a web part. */
const REPO: Record<string, string | Buffer> = {
  "pkg/headers.py":
    'class Header:\n    def __init__(self, name: str, value: str) -> None:\n        self.name = name\n\n\ndef parse_header(line: str) -> Header:\n    """Split `name: value`."""\n    name, _, value = line.partition(":")\n    return Header(normalize_text(name), value)\n',
  "pkg/util.py": "def normalize_text(s: str) -> str:\n    return s.strip().lower()\n",
  "pkg/client.py":
    "from pkg.headers import parse_header\nfrom pkg.util import normalize_text\n\n\nclass Client:\n    def fetch(self, url: str) -> list:\n        return [parse_header(normalize_text(url))]\n",
  "pkg/server.py":
    "from pkg.client import Client\nfrom pkg.util import normalize_text\n\n\ndef serve(port: int) -> None:\n    Client().fetch(normalize_text(str(port)))\n",
  "tests/test_client.py": "from pkg.client import Client\n\n\ndef test_fetch():\n    assert Client().fetch('a: b')\n",
  "web/api.ts":
    "export interface ApiOptions { base: string }\nexport async function fetchJson(url: string, opts?: ApiOptions): Promise<unknown> {\n  return (await fetch(url)).json();\n}\n",
  "web/view.ts":
    'import { fetchJson } from "./api.js";\nexport class View {\n  render(): Promise<unknown> {\n    return fetchJson("/x");\n  }\n}\n',
  "README.md": "# demo\n",
  "logo.png": Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]),
};
const input = (root: string, extra: Partial<RepoMapInput> = {}): RepoMapInput => ({
  root,
  commit: `c-${root}`,
  goal: "make it faster",
  maxTokens: 1000,
  ...extra,
});

describe("symbols", () => {
  it("finds Python classes, methods, functions and module variables, not nested functions", () => {
    const s = extractSymbols(
      "m.py",
      'LIMIT = 3\n\nclass Node(Base):\n    @property\n    def size(self) -> int:  # cached\n        def inner():\n            pass\n        return helper(self)\n\ndef parse(text: str,\n          strict: bool = False) -> "Node":\n    return Node()\n',
    );
    expect(short(s)).toEqual([
      "1 variable 0 LIMIT | LIMIT = 3",
      "3 class 0 Node | class Node(Base):",
      "5 method 1 size | def size(self) -> int:",
      '10 function 0 parse | def parse(text: str, strict: bool = False) -> "Node":',
    ]);
    expect(new Map(s.refs).get("helper")).toBe(1);
    expect(new Map(s.refs).has("def")).toBe(false); // keywords are not references
  });

  it("finds JavaScript functions, classes, methods, arrow functions and exports", () => {
    const s = extractSymbols(
      "a.mjs",
      "function foo(a, b) { return bar(a); }\nexport const MAX = 10;\nexport const twice = (x) => x * 2;\nclass K {\n  m(y) { function hidden() {} return y; }\n}\nmodule.exports.bar = function (x) { return x; };\nconst o = { notMe() {} };\n",
    );
    expect(short(s)).toEqual([
      "1 function 0 foo | function foo(a, b)",
      "2 variable 0 MAX | export const MAX = 10",
      "3 function 0 twice | export const twice = (x) =>",
      "4 class 0 K | class K",
      "5 method 1 m | m(y)",
      "7 function 0 bar | module.exports.bar = function (x)",
    ]);
  });

  it("finds TypeScript interfaces, types, enums, classes and functions", () => {
    const s = extractSymbols(
      "a.ts",
      '// "run" in a comment\nexport interface Opts { size: number; run(a: string): void }\nexport type Kind = "a" | "b";\nenum Color { Red }\nexport default class Store<T> extends Base {\n  constructor(private readonly opts: Opts) { super(); }\n  async get(key: string): Promise<T | undefined> { return undefined; }\n}\nexport function make(opts: Opts): Store<number> {\n  return new Store(opts);\n}\n',
    );
    expect(short(s)).toEqual([
      "2 interface 0 Opts | export interface Opts",
      "2 method 1 run | run(a: string): void",
      '3 type 0 Kind | export type Kind = "a" | "b";',
      "4 enum 0 Color | enum Color",
      "5 class 0 Store | export default class Store<T> extends Base",
      "6 method 1 constructor | constructor(private readonly opts: Opts)",
      "7 method 1 get | async get(key: string): Promise<T | undefined>",
      "9 function 0 make | export function make(opts: Opts): Store<number>",
    ]);
    expect(new Map(s.refs).get("Opts")).toBe(3);
  });

  it("parses JSX in .js and .tsx files, and keeps whole heads across comments and type predicates", () => {
    const jsx = extractSymbols(
      "App.js",
      'export function App() {\n  return <div className="a">{x}</div>;\n}\nexport const Row = ({ a }) => <li>{a}</li>;\n',
    );
    expect(short(jsx)).toEqual([
      "1 function 0 App | export function App()",
      "4 function 0 Row | export const Row = ({ a }) =>",
    ]);
    const tsx = extractSymbols(
      "v.tsx",
      'export const isRow = (v: unknown): v is Row => typeof v === "object";\nexport const LIMIT = /* @__PURE__ */ make(3);\nexport class List<T> implements Iterable<T> {\n  [Symbol.iterator](): Iterator<T> { return [].values(); }\n  render(): JSX.Element { return <ul />; }\n}\nexport const Anon = class implements Runner {\n  run(): void {}\n};\n',
    );
    expect(short(tsx)).toEqual([
      "1 function 0 isRow | export const isRow = (v: unknown): v is Row =>",
      "2 variable 0 LIMIT | export const LIMIT = /* @__PURE__ */ make(3)",
      "3 class 0 List | export class List<T> implements Iterable<T>",
      "4 method 1 [Symbol.iterator] | [Symbol.iterator](): Iterator<T>",
      "5 method 1 render | render(): JSX.Element",
      "7 variable 0 Anon | export const Anon = class implements Runner", // no class named "implements", no method of an unnamed class
    ]);
  });

  it("indexes the names a file seems to define and the identifiers it uses, without parsing", () => {
    const table = { tokens: [] as string[], ids: new Map<string, number>() };
    const py = indexText(
      "a.py",
      "LIMIT = 3\nclass Node:\n    def walk(self):\n        return visit(visit(self))\n",
      table,
    );
    expect(py.names).toEqual(["LIMIT", "Node", "walk"]);
    expect(table.tokens).toEqual(["LIMIT", "Node", "walk", "visit"]);
    expect(py.refs).toEqual([0, 1, 1, 1, 2, 1, 3, 2]);
    const ts = indexText(
      "a.ts",
      'export const MAX = 1;\nexport interface Opts {}\nclass K {\n  async get(key: string): Promise<void> {\n    if (key) {\n      describe("x", () => {});\n    }\n  }\n}\n',
      table,
    );
    expect(ts.names).toEqual(["K", "MAX", "Opts", "get"]);
    expect(indexText("README.md", "see parse_header", table).names).toEqual([]);
  });

  it("still yields the definitions it can from a file with a syntax error", () => {
    const s = extractSymbols(
      "b.py",
      "def before(a):\n    return a\n\ndef broken(:\n    pass\n\nclass After:\n    def method(self):\n        return 1\n",
    );
    const names = s.defs.map((d) => d.name);
    expect(names).toContain("before");
    expect(names).toContain("After");
    expect(names).toContain("method");
  });

  it("skips binary and huge files, symbolic links and paths outside the root, without throwing", () => {
    const root = tree({
      "bin.py": Buffer.from([0x64, 0x65, 0x66, 0, 0, 1]),
      "big.py": "x = 1\n".repeat(MAX_FILE_BYTES / 4),
      "ok.py": "def f(): pass\n",
    });
    symlinkSync("/etc/hostname", join(root, "link.py"));
    expect(readSymbols(root, "bin.py")).toBeNull();
    expect(readSymbols(root, "big.py")).toEqual({ defs: [], refs: [], skipped: "too-large" });
    expect(readSymbols(root, "link.py")).toBeNull();
    expect(readSymbols(root, "../outside.py")).toBeNull();
    expect(readSymbols(root, "missing.py")).toBeNull();
    expect(readSymbols(root, "ok.py")?.defs.map((d) => d.name)).toEqual(["f"]);
  });
});

describe("buildRepoMap", () => {
  it("ranks first the file defining a symbol the goal names, and shows signatures, not bodies", async () => {
    const root = tree(REPO);
    const map = await buildRepoMap(input(root, { goal: "parse_header drops everything after a second colon" }));
    expect(map.ranked[0]?.path).toBe("pkg/headers.py");
    expect(map.text.startsWith("pkg/headers.py:\n")).toBe(true);
    expect(map.text).toContain("   6│ def parse_header(line: str) -> Header:");
    expect(map.text).toContain("   2│     def __init__(self, name: str, value: str) -> None:");
    expect(map.text).not.toContain("partition");
    expect(map.ranked.map((r) => r.path)).not.toContain("logo.png");
    expect(map.files).toBe(8);
  });

  it("ranks focus files and focus symbols up", async () => {
    const root = tree(REPO);
    const plain = await buildRepoMap(input(root));
    expect(plain.ranked[0]?.path).toBe("pkg/util.py"); // called from three files
    const pos = (m: typeof plain, p: string): number => m.ranked.findIndex((r) => r.path === p);
    const focused = await buildRepoMap(input(root, { focusFiles: ["web/view.ts"] }));
    expect(pos(focused, "web/view.ts")).toBe(0);
    expect(pos(focused, "web/api.ts")).toBeLessThan(pos(plain, "web/api.ts")); // what the focus file calls
    const bySymbol = await buildRepoMap(input(root, { focusSymbols: ["tests/test_x.py::TestApi::fetchJson"] }));
    expect(bySymbol.ranked[0]?.path).toBe("web/api.ts");
  });

  it("keeps to the token budget", async () => {
    const root = tree(REPO);
    let previous = -1;
    for (const maxTokens of [0, 5, 20, 60, 150, 10_000]) {
      const map = await buildRepoMap(input(root, { maxTokens }));
      expect(map.tokens).toBe(approxTokens(map.text));
      expect(map.tokens).toBeLessThanOrEqual(maxTokens);
      expect(map.tokens).toBeGreaterThanOrEqual(previous);
      previous = map.tokens;
    }
    const all = await buildRepoMap(input(root, { maxTokens: 10_000 }));
    for (const path of ["pkg/util.py", "web/view.ts", "README.md"]) expect(all.text).toContain(path);
  });

  it("maps a huge file as a bare path and leaves binary files out", async () => {
    const root = tree({
      ...REPO,
      "gen/big.py": "x = 1\n".repeat(MAX_FILE_BYTES / 4),
      "pkg/blob.py": Buffer.from([1, 0, 2]),
    });
    const map = await buildRepoMap(input(root, { maxTokens: 10_000 }));
    expect(map.text).toMatch(/^gen\/big\.py$/m);
    expect(map.ranked.map((r) => r.path)).not.toContain("pkg/blob.py");
  });

  it("does not parse again for the same commit, from memory or from the cache directory", async () => {
    const root = tree(REPO);
    const cacheDir = join(root, ".cache");
    const files = Object.keys(REPO);
    const ask = { ...input(root, { goal: "parse_header is slow" }), files, cacheDir, commit: "a".repeat(40) };
    const first = await buildRepoMap(ask);
    expect(first.fromCache).toBe(false);
    rmSync(join(root, "pkg/headers.py")); // a re-parse could not see it any more
    const second = await buildRepoMap(ask);
    expect(second.fromCache).toBe(true);
    expect(second.text).toBe(first.text);
    clearRepoMapCache();
    const third = await buildRepoMap(ask);
    expect(third.fromCache).toBe(true);
    expect(third.text).toBe(first.text);
    const otherCommit = await buildRepoMap({ ...ask, commit: "b".repeat(40) });
    expect(otherCommit.fromCache).toBe(false);
    expect(otherCommit.ranked.map((r) => r.path)).not.toContain("pkg/headers.py");
  });

  it("parses only files that can reach the map, and the text does not depend on what was parsed before", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 120; i++)
      files[`m/mod${i}.py`] =
        `class Thing${i}:\n    def run(self, x: int) -> int:\n        return helper_${(i * 7) % 120}(x)\n\ndef helper_${i}(x: int) -> int:\n    return x + ${i}\n`;
    const root = tree(files);
    const cacheDir = tree({}); // not inside the walked tree
    const small = {
      ...input(root, { goal: "helper_17 is off by one", maxTokens: 60 }),
      cacheDir,
      commit: "c".repeat(40),
    };
    const fresh = await buildRepoMap(small);
    const stored = JSON.parse(readFileSync(join(cacheDir, `repomap-v2-${"c".repeat(40)}.json`), "utf8")) as {
      tags: unknown[];
    };
    expect(stored.tags.length).toBeLessThan(30); // of 120
    expect(fresh.text).toContain("helper_17(x: int) -> int:");
    await buildRepoMap({ ...small, commit: "d".repeat(40), maxTokens: 100_000 }); // parses every file
    const afterAll = await buildRepoMap({ ...small, commit: "d".repeat(40) });
    expect(afterAll.text).toBe(fresh.text);
    expect(afterAll.ranked).toEqual(fresh.ranked);
  });

  it("is deterministic and the same from a walk as from a file list", async () => {
    const root = tree(REPO);
    const a = await buildRepoMap(input(root, { commit: "x1", goal: "Client.fetch fails" }));
    clearRepoMapCache();
    const b = await buildRepoMap(
      input(root, { commit: "x2", goal: "Client.fetch fails", files: Object.keys(REPO).reverse() }),
    );
    expect(b.text).toBe(a.text);
    expect(b.ranked).toEqual(a.ranked);
  });

  it("throws workspace_invalid for a root that is not a directory", async () => {
    await expect(buildRepoMap(input("/nonexistent/loopsmith-tree"))).rejects.toMatchObject({
      code: "workspace_invalid",
    });
  });
});
