/**
 * The gate's rules and the names they watch. The rule set comes from DESIGN.md §2 (GATE):
 * block `eval`/`exec` on dynamic strings, shell commands, unsafe deserialisation, network
 * access and destructive shell commands before anything runs. The module lists are the
 * standard-library and common third-party modules that do those things.
 */
import type { Finding } from "@loopsmith/shared";

/** Every rule id a finding can carry, with its severity. Only `blocker` findings block. */
export const RULES = {
  /** The gate's parser found a syntax error. Not blocking: the run reports the interpreter's own message. */
  syntax: { severity: "error" },
  /** `eval`/`exec`/`compile`/`Function`/`vm.run*` on something that is not a string literal. */
  "dynamic-eval": { severity: "blocker" },
  /** `__import__`/`importlib.import_module`/`require`/`import()` with a computed module name. */
  "dynamic-import": { severity: "blocker" },
  /** `getattr` on a sensitive module with a computed attribute name. */
  "dynamic-attribute": { severity: "blocker" },
  /** Running a shell or a program: `os.system`, `os.popen`, `os.exec*`, `os.spawn*`, `pty.spawn`. */
  "os-command": { severity: "blocker" },
  /** `subprocess` through a shell (`shell=True`, `getoutput`, `create_subprocess_shell`). */
  "subprocess-shell": { severity: "blocker" },
  /** Node's `child_process` and `cluster`: spawning programs. */
  "child-process": { severity: "blocker" },
  /** `pickle`/`marshal`/`shelve` loads and their relatives: running code hidden in data. */
  "unsafe-deserialization": { severity: "blocker" },
  /** Network modules and calls; network commands in strings (`curl URL`, `/dev/tcp/`). */
  network: { severity: "blocker" },
  /** Recursive deletion of `/` or the home directory through the language (`shutil.rmtree`, `fs.rmSync`). */
  "destructive-delete": { severity: "blocker" },
  /** Destructive shell commands in any string (`rm -rf /`, `mkfs`, `dd of=/dev/…`, fork bombs). */
  "destructive-shell": { severity: "blocker" },
  /** Node's native bindings (`process.binding`, `process.dlopen`): a way around `child_process`. */
  "native-binding": { severity: "blocker" },
} as const satisfies Record<string, { severity: Finding["severity"] }>;
export type RuleId = keyof typeof RULES;

/**
 * Python modules that open network connections or serve. A qualified name is a network
 * name when it equals one of these or starts with one followed by `.`.
 */
export const PY_NETWORK_MODULES = [
  "socket",
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

/** Python callables that run a command (always blocked, called or passed as a value). */
export const PY_OS_COMMAND = /^(os\.(system|popen[234]?|exec[a-z]*|spawn[a-z]*|posix_spawnp?)|pty\.spawn|platform\.popen|commands\.[a-z_]+)$/;

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
