import { describe, expect, it } from "vitest";
import { blockers, checkOne, src } from "./testing.js";

const py = (...lines: string[]) => checkOne("solution.py", src(...lines));

describe("gate precision: eval/exec of strings the program builds itself", () => {
  it("passes an arithmetic expression assembled from the function's own arguments (HumanEval/160's pattern)", () => {
    const r = py(
      "def evaluate(ops: list, nums: list) -> int:",
      '    """Join the numbers with the operators and evaluate the expression."""',
      "    text = str(nums[0])",
      "    for op, n in zip(ops, nums[1:]):",
      "        text += op + str(n)",
      "    return eval(text)",
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });

  it("passes exec of code built from a template and the caller's names, and compile of a computed string", () => {
    const r = py(
      "def make_getter(field):",
      "    ns = {}",
      "    exec(f'def get(obj):\\n    return obj.{field}\\n', ns)",
      "    return ns['get']",
      "getter = make_getter('size')",
      "code = compile(source_text, '<ast>', 'exec', flags=1024)",
      "parts = ['1', '+', '2']",
      "total = eval(' '.join(parts))",
      "dotted = '.'.join(reversed(names))",
      "value = eval(dotted, namespace)",
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });

  it("follows a parameter to the literal its call site passes, and blocks when that names a way out", () => {
    const r = py("def run(snippet):", "    return eval(snippet)", "run(\"__import__('os').getcwd()\")");
    expect(blockers(r)).toEqual(["dynamic-eval@2"]);
    expect(r.findings[0]?.message).toMatch(/assembled from pieces that name `__import__`/);
  });

  it("blocks a string assembled to name a way out, even split across variables and list pieces", () => {
    const r = py(
      "a = '__imp'",
      "b = 'ort__'",
      'exec(a + b + \'("o" "s").getcwd()\')',
      "pieces = []",
      "pieces.append('().__class__.__bases__[0]')",
      "pieces.append('.__subclasses__()')",
      "eval(''.join(pieces))",
    );
    expect(blockers(r)).toEqual(["dynamic-eval@3", "dynamic-eval@7"]);
  });

  it.each([
    ["base64", "import base64", "exec(base64.b64decode(payload))"],
    ["codecs rot13", "import codecs", "exec(codecs.decode(payload, 'rot13'))"],
    ["a rot13 .encode", "", "exec(payload.encode('rot_13'))"],
    ["zlib", "import zlib", "exec(zlib.decompress(blob))"],
    ["hex", "", "exec(bytes.fromhex(blob).decode())"],
    ["character codes", "", "exec(''.join(chr(c) for c in [112, 114, 105, 110, 116]))"],
    ["character codes through map", "", "exec(''.join(map(chr, codes)))"],
    ["a bytes list", "", "exec(bytes([112, 114, 105, 110, 116]).decode())"],
    ["reversal by slice", "s = ')(dmetsys.so'", "exec(s[::-1])"],
    ["reversal by reversed()", "s = ')(dmetsys.so'", "exec(''.join(reversed(s)))"],
  ])("blocks exec of a string decoded with %s", (_name, setup, call) => {
    const r = py(setup, call);
    expect(blockers(r)).toEqual(["dynamic-eval@2"]);
    expect(r.findings.find((f) => f.rule === "dynamic-eval")?.message).toMatch(/decoded with/);
  });

  it.each([
    ["a file", "exec(open('plugin.py').read())"],
    ["a file through a with block", "with open(path) as f:\n    exec(f.read())"],
    ["standard input", "import sys\nexec(sys.stdin.read())"],
    ["the command line", "import sys\neval(sys.argv[1])"],
    ["the environment", "import os\nexec(os.environ['CODE'])"],
    ["the environment through getenv", "import os\nexec(os.getenv('CODE'))"],
    ["another program", "import subprocess\nexec(subprocess.check_output(['cat', 'x.py']))"],
    ["the network", "import urllib.request\nexec(urllib.request.urlopen(url).read())"],
  ])("blocks exec of a string read from %s", (_name, code) => {
    const r = checkOne("solution.py", `${code}\n`);
    expect(r.findings.filter((f) => f.rule === "dynamic-eval").map((f) => f.message)).toEqual([
      expect.stringMatching(/read from outside the program/),
    ]);
    expect(r.blocked).toBe(true);
  });

  it("analyses constant concatenations as code, so a split name still resolves", () => {
    const r = py("exec(\"__import__('o' + 's').sy\" + \"stem('id')\")", "__import__('o' + 's').system('id')");
    expect(blockers(r)).toEqual(["os-command@1", "os-command@2"]);
  });

  it("keeps blocking eval handed on as a value, since the string it will run cannot be traced", () => {
    expect(blockers(py("results = list(map(eval, lines))", "run = exec"))).toEqual([
      "dynamic-eval@1",
      "dynamic-eval@2",
    ]);
    // compile only makes a code object: passing it around is not running anything.
    expect(blockers(py("build = compile"))).toEqual([]);
  });
});

describe("gate precision: dynamic imports and attributes", () => {
  it("passes imports and attributes by names built from ordinary values", () => {
    const r = py(
      "import importlib, os",
      "def plugin(name):",
      "    return importlib.import_module(f'plugins.{name}')",
      "def path_op(fn, *parts):",
      "    return getattr(os.path, fn)(*parts)",
      "plugin('csv_reader')",
      "path_op('join', 'a', 'b')",
      "mod = __import__(module_name)",
    );
    expect(r).toEqual({ blocked: false, findings: [] });
  });

  it("blocks an import or attribute whose name is assembled to reach a watched module or function", () => {
    const r = py(
      "import os",
      "def load(name):",
      "    return __import__(name)",
      "load('sub' + 'process')",
      "def call(fn, arg):",
      "    return getattr(os, fn)(arg)",
      "call('sys' + 'tem', 'id')",
    );
    expect(blockers(r)).toEqual(["dynamic-import@3", "dynamic-attribute@6"]);
    expect(r.findings[1]?.message).toBe("`getattr(os, …)` with a name assembled from pieces that name `system`");
  });
});

describe("gate precision: deserialisation and sockets", () => {
  it("passes a pickle round trip of the program's own objects, and blocks any other loads", () => {
    const ok = py(
      "import pickle",
      "copy = pickle.loads(pickle.dumps(data))",
      "blob = pickle.dumps(data)",
      "again = pickle.loads(blob)",
    );
    expect(ok).toEqual({ blocked: false, findings: [] });
    const bad = py(
      "import pickle, base64",
      "pickle.loads(base64.b64decode(s))",
      "pickle.loads(b'cos\\nsystem\\n')",
      "pickle.loads(blob)",
    );
    expect(blockers(bad)).toEqual(["unsafe-deserialization@2", "unsafe-deserialization@3", "unsafe-deserialization@4"]);
  });

  it("passes socket used for the host name, constants and exceptions, and blocks its connecting calls", () => {
    const ok = py(
      "import socket",
      "host = socket.gethostname()",
      "family = socket.AF_INET",
      "try:",
      "    pass",
      "except socket.timeout:",
      "    pass",
      "left, right = socket.socketpair()",
      "local = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)",
      "ok = isinstance(local, socket.socket)",
    );
    expect(ok).toEqual({ blocked: false, findings: [] });
    const bad = py(
      "import socket",
      "from socket import create_connection as connect",
      "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)",
      "connect(('example.com', 80))",
      "socket.getaddrinfo('example.com', 80)",
      "resolve = socket.gethostbyname",
      "class Conn(socket.socket):",
      "    pass",
    );
    expect(blockers(bad)).toEqual(["network@3", "network@4", "network@5", "network@6", "network@7"]);
    expect(blockers(py("from socket import *", "create_server(('', 8080))"))).toEqual(["network@2"]);
  });
});
