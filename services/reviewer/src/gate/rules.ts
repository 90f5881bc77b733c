/**
 * The gate's rules and the names they watch. The rule set (docs/GATE.md, "The rules"):
 * block `eval`/`exec` on dynamic strings, shell commands, unsafe deserialisation, network
 * access and destructive shell commands before anything runs. The gate is a first filter,
 * tuned for precision; the sandbox (docs/SANDBOX.md) is the security boundary. So a rule
 * blocks a call only where it can say why that call is dangerous there (docs/GATE.md).
 * The module lists are the standard-library and common third-party modules that do those
 * things.
 */
import type { Finding } from "@loopsmith/shared/contracts";

/**
 * Every rule id a finding can carry, with its severity and why it blocks. Only `blocker`
 * findings block. Every finding the gate returns carries its rule id in `Finding.rule`.
 */
export const RULES = {
  syntax: {
    severity: "error",
    why: "the gate's parser found a syntax error; not blocking: the run reports the interpreter's own, better message",
  },
  "dynamic-eval": {
    severity: "blocker",
    why:
      "`eval`/`exec`/`compile` of a string the gate cannot read: one that comes from outside the program (input, files, " +
      "environment, argv, pipes, network), one decoded from another form (base64, hex, codecs, compression, `chr`, reversal), " +
      "or one assembled from pieces that name a way out (`__import__`, `os`, `open`, `__subclasses__`, …); and an evaluator " +
      "handed on as a value. A string literal is analysed as code instead; a string built from the program's own values " +
      "(HumanEval/160's arithmetic) is not blocked",
  },
  "dynamic-import": {
    severity: "blocker",
    why: "`__import__`/`importlib.import_module`/`require`/`import()` of a module name that comes from outside, is decoded, or is assembled from pieces that name a dangerous module: a way to reach `os` without writing `import os`",
  },
  "dynamic-attribute": {
    severity: "blocker",
    why: "`getattr` on a sensitive module (`os`, `subprocess`, `builtins`, …) with a name that comes from outside, is decoded, or is assembled from pieces that name a watched function: a way to call `os.system` without writing it",
  },
  "os-command": {
    severity: "blocker",
    why: "`os.system`, `os.popen`, `os.exec*`, `os.spawn*`, `posix_spawn`, `pty.spawn`: the process primitives that run a shell or another program",
  },
  "subprocess-shell": {
    severity: "blocker",
    why: "`subprocess` through a shell (`shell=True`, `getoutput`, `create_subprocess_shell`): the shell interprets the string, so what runs is not what the code shows",
  },
  "child-process": { severity: "blocker", why: "Node's `child_process` and `cluster`: spawning programs" },
  "unsafe-deserialization": {
    severity: "blocker",
    why: "`pickle`/`marshal`/`shelve` loads, unsafe `yaml.load`: loading such bytes runs code hidden in the data; a round trip of the program's own `pickle.dumps` is not blocked",
  },
  network: {
    severity: "blocker",
    why: "a module whose purpose is the network (`urllib.request`, `http.client`, `requests`, `smtplib`, …), a `socket` call that connects, serves or resolves a name, a network command in a string (`curl URL`, `/dev/tcp/`): exfiltration and fetching code; importing `socket` for a constant or the host name is not blocked",
  },
  "destructive-delete": {
    severity: "blocker",
    why: "recursive deletion of `/`, the home directory or a system directory through the language (`shutil.rmtree`, `fs.rmSync`)",
  },
  "destructive-shell": {
    severity: "blocker",
    why: "a destructive shell command in any string (`rm -rf /`, `mkfs /dev/…`, `dd of=/dev/…`, fork bombs): it does harm wherever it ends up being run",
  },
  "native-binding": {
    severity: "blocker",
    why: "Node's native bindings (`process.binding`, `process.dlopen`): a way around `child_process`",
  },
  /*
   * Evaluation tampering (docs/GATE.md "Evaluation tampering"): code,
   * outside the test files, that could forge the verdict from inside the test process. The
   * severity is the clear case's; where a rule cannot be sure the finding is a `warning`,
   * which does not block but sends the candidate to the review (even with review off).
   */
  "tampering.result_file": {
    severity: "blocker",
    why: "names where the verdict is written or how it is configured (`LOOPSMITH_JUNIT`, `LOOPSMITH_VERDICT*`, `LOOPSMITH_TRIPWIRE*`, `PYTEST_ADDOPTS`, `/tmp/.loopsmith…`, `--junitxml`, `--test-reporter`): code under test has no business there. A JUnit or result XML file name or a benchmark case record (`{case, pass}`) goes to review",
  },
  "tampering.exit": {
    severity: "blocker",
    why: "ends the process when the module is imported (`os._exit`, `sys.exit`, `exit()`, `raise SystemExit`, `os.kill(os.getpid(), …)`, `process.exit`, `process.abort`, `process.kill(process.pid)`), directly, in a function the module calls, a callback it schedules or an exit handler it registers: the test run ends before the tests report. Exits under `if __name__ == '__main__'` or `require.main === module` are a script's, not flagged; a hard exit inside a function goes to review",
  },
  "tampering.framework": {
    severity: "blocker",
    why: "reaches into the test framework from code under test: imports `_pytest`, `xdist`, `execnet`, `node:test`, `loopsmith_verdict`; defines pytest's reporting hooks; assigns into `unittest`, `doctest`, `pytest`, `builtins` or `sys.modules[<framework>]`; reassigns `assert`'s functions or the module loader; sets `process.exitCode` at import. `pluggy`, other pytest hooks, `sys.modules[…]`, `sys.excepthook` and `atexit.register` at import go to review",
  },
  "tampering.branch_on_runner": {
    severity: "blocker",
    why: "behaves differently under the test runner or the benchmark: `'pytest' in sys.modules`, `PYTEST_CURRENT_TEST`, `NODE_TEST_CONTEXT`, the command line compared with the runner's name, `sys.argv`/`process.argv` tested at import, a condition on the benchmark's or the check's file names. `sys.argv`/`process.argv` tested inside a function (a command-line tool's `main`) goes to review",
  },
  "tampering.shadow": {
    severity: "blocker",
    why: "a file that Python would import instead of the test framework or at start-up (`pytest.py`, `_pytest/`, `unittest.py`, `xdist/`, `pluggy/`, `loopsmith_verdict.py`, `sitecustomize.py`, `usercustomize.py`, `*.pth`) where it shadows: at the root, under `src/` or `lib/`, or in a test directory; deeper in a package it goes to review",
  },
  "tampering.code_swap": {
    severity: "blocker",
    why: "replaces what a test runs from outside it: Python writes to a function's internals (`f.__code__ = …`, `f.__globals__[…] = …`, `f.__closure__[…].cell_contents = …`, `setattr(f, '__code__', …)`, also with the name built from strings), so a failing test runs another function's body; JavaScript assignments into a test module's exports (`require('./x.test.js').t = …`) or the importing module's (`module.parent`, `require.main`). Writes to `__defaults__`/`__kwdefaults__` go to review",
  },
  "tampering.hidden_name": {
    severity: "blocker",
    why: "an import or attribute whose name is not written but assembled (`importlib.import_module('s' + 'ys')`, `getattr(x, 'mod' + 'ules')`, `__import__` of a name built from pieces) and spells what tampering reaches for: `sys` and `sys.modules` (every loaded module, the tests included), `gc`, `inspect`, `threading`, a function's internals, frame walks. A name assembled from string constants that spells nothing watched goes to review",
  },
  "tampering.import_thread": {
    severity: "warning",
    why: "a thread or timer started when the module is imported (`threading.Thread(…).start()`, `threading.Timer(…).start()`, `_thread.start_new_thread`, a `Thread` subclass started at module level): it keeps running beside the tests and can change them after they are collected. Always review: libraries do start background threads; a thread started inside a function is not flagged",
  },
  "tampering.object_walk": {
    severity: "blocker",
    why: "walks objects that are not the module's own: `gc.get_objects`/`get_referrers`/`get_referents` and trace or profile hooks (`sys.settrace`, `sys.setprofile`, `threading.settrace`) when the module is imported (in a function they go to review); frame walks (`sys._getframe`, `sys._current_frames`, `inspect.currentframe`, `inspect.stack`, `inspect.getouterframes`, `inspect.trace`) always go to review: from a frame, code reaches its caller's globals, the test's included",
  },
} as const satisfies Record<string, { severity: Finding["severity"]; why: string }>;
export type RuleId = keyof typeof RULES;

/**
 * Python modules whose purpose is to open network connections or to serve. A qualified
 * name is a network name when it equals one of these or starts with one followed by `.`.
 * `socket` is not one: it is also where the host name, address constants and socket
 * exceptions live; its connecting calls are {@link PY_NETWORK_CALLS}.
 */
export const PY_NETWORK_MODULES = [
  "socketserver",
  "urllib.request",
  "urllib2",
  "http.client",
  "http.server",
  "httplib",
  "requests",
  "httpx",
  "urllib3",
  "aiohttp",
  "ftplib",
  "smtplib",
  "poplib",
  "imaplib",
  "nntplib",
  "telnetlib",
  "xmlrpc.client",
  "xmlrpc.server",
  "paramiko",
  "websocket",
  "websockets",
  "webbrowser",
  "asyncio.open_connection",
  "asyncio.start_server",
  "asyncio.open_unix_connection",
] as const;

/** `socket` calls that open a connection, serve, or resolve a name over the network (blocked where called). */
export const PY_NETWORK_CALLS =
  /^_?socket\.(socket|SocketType|create_connection|create_server|getaddrinfo|gethostbyname(_ex)?|gethostbyaddr|getfqdn|getnameinfo)$/;

/** Python callables that run a command (always blocked, called or passed as a value). */
export const PY_OS_COMMAND =
  /^(os\.(system|popen[234]?|exec[a-z]*|spawn[a-z]*|posix_spawnp?)|pty\.spawn|platform\.popen|commands\.[a-z_]+)$/;

/** Python callables that always go through a shell. */
export const PY_SHELL_ALWAYS = /^(subprocess\.(getoutput|getstatusoutput)|asyncio\.create_subprocess_shell)$/;

/** Python callables that load objects which can run code when loaded. */
export const PY_UNSAFE_LOAD =
  /^((pickle|_pickle|cPickle|dill|cloudpickle)\.(loads?|Unpickler)|marshal\.loads?|shelve\.open|yaml\.unsafe_load(_all)?|jsonpickle\.decode|pandas\.read_pickle)$/;

/** Modules whose attributes may not be fetched with a computed name (`getattr(os, name)`). */
export const PY_SENSITIVE_MODULES = new Set([
  "os",
  "subprocess",
  "pickle",
  "marshal",
  "shelve",
  "socket",
  "builtins",
  "importlib",
  "pty",
  "shutil",
  "ctypes",
]);

/** Module names that are other names of a watched module. */
export const PY_MODULE_ALIASES: Readonly<Record<string, string>> = { posix: "os", nt: "os", __builtins__: "builtins" };

/** Python builtins the gate watches when they are not shadowed by the file. */
export const PY_WATCHED_BUILTINS = new Set(["eval", "exec", "compile", "__import__", "getattr"]);

/*
 * Where a computed string comes from (pyflow.ts). These lists say what makes a string that
 * reaches `exec`, `__import__` or `getattr` dangerous there.
 */

/** Calls that bring data from outside the program: the console, files, the environment, pipes, other programs. */
export const PY_EXTERNAL_CALLS =
  /^(builtins\.(input|open)|io\.open|codecs\.open|os\.(read|getenv|getenvb|environ\.get|environb\.get)|sys\.stdin\.\w+|fileinput\.\w+|subprocess\.(check_output|getoutput|getstatusoutput|run|Popen)|urllib\.request\.\w+)$/;

/** Names whose value comes from outside the program: the command line, standard input, the environment. */
export const PY_EXTERNAL_NAMES = /^(sys\.(argv|orig_argv|stdin)|os\.(environ|environb))$/;

/** Methods that read from a file, a socket or a pipe, whatever the object. */
export const PY_READ_METHODS = new Set([
  "read",
  "readline",
  "readlines",
  "readall",
  "read_text",
  "read_bytes",
  "recv",
  "recvfrom",
  "recv_into",
  "communicate",
]);

/**
 * Calls that turn one form of text into another, hiding what it says: encodings,
 * compression, character codes. (`bytes([...])`/`bytearray([...])` of numbers count too;
 * the trace checks their argument.)
 */
export const PY_DECODERS = /^((base64|binascii|codecs|zlib|gzip|bz2|lzma|quopri|uu|marshal)\.\w+|builtins\.chr)$/;

/** Methods that decode or rewrite text, whatever the object (`.translate`, `bytes.fromhex`, `.decompress`). */
export const PY_DECODER_METHODS = new Set([
  "fromhex",
  "translate",
  "maketrans",
  "decompress",
  "unhexlify",
  "b64decode",
  "b32decode",
  "b85decode",
  "a85decode",
  "urlsafe_b64decode",
]);

/** A codec name passed to `.decode`/`.encode`/`codecs.decode` that hides text (`rot13`, `base64`, `hex`, …). */
export const PY_HIDING_CODECS = /rot|base64|hex|zip|bz2|uu|quopri|punycode|unicode.escape|idna/i;

/** Calls whose result is bytes the program serialised itself (a `pickle.loads` of them is a round trip). */
export const PY_SERIALISERS = /^(pickle|_pickle|cPickle|dill|cloudpickle|marshal)\.dumps$/;

/**
 * Names that, written in code given to `exec`/`eval`, reach beyond computation: the OS and
 * the modules that reach it, files, the interpreter's internals (the way out of a
 * restricted namespace), and evaluation itself. (`import` itself is not one: `import os`
 * names `os`, `import bdb` is harmless.)
 */
export const PY_CODE_ESCAPES = new Set([
  "__import__",
  "__builtins__",
  "__globals__",
  "__subclasses__",
  "__bases__",
  "__base__",
  "__mro__",
  "__code__",
  "__loader__",
  "os",
  "posix",
  "sys",
  "subprocess",
  "socket",
  "shutil",
  "pty",
  "ctypes",
  "pickle",
  "marshal",
  "builtins",
  "importlib",
  "open",
  "exec",
  "eval",
  "compile",
  "getattr",
  "setattr",
  "globals",
  "breakpoint",
  "input",
  "system",
  "popen",
]);

/** Node modules that reach the network (after removing `node:`). */
export const JS_NETWORK_MODULES = new Set([
  "net",
  "http",
  "https",
  "http2",
  "dgram",
  "tls",
  "dns",
  "undici",
  "axios",
  "node-fetch",
  "got",
  "ws",
  "request",
  "superagent",
  "socket.io-client",
]);

/** Node modules that spawn programs (after removing `node:`). */
export const JS_PROCESS_MODULES = new Set(["child_process", "cluster"]);

/** Browser-style network globals available in Node 18+. */
export const JS_NETWORK_GLOBALS = new Set(["fetch", "WebSocket", "XMLHttpRequest", "EventSource"]);

/**
 * True when a path written in code is `/`, the home directory or a top-level system
 * directory, as a recursive delete target (`/`, `/*`, `~`, `~/`, `$HOME`, `/usr`, `C:\`).
 */
export function isRootOrHomePath(path: string): boolean {
  return /^(\/+\*?|~\/?\*?|\$\{?HOME\}?\/?\*?|\/(bin|boot|dev|etc|home|lib|lib64|opt|root|sbin|srv|usr|var)\/?\*?|[A-Za-z]:[\\/]*)$/.test(
    path.trim(),
  );
}
