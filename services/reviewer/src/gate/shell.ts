/**
 * Destructive and network shell commands inside a string (a string literal of the code, an
 * argv list joined with spaces, or a whole shell script). This is the one place where the
 * gate reads text rather than a syntax tree: the string's content is shell, not the
 * language being parsed.
 */
import { isRootOrHomePath, type RuleId } from "./rules.js";

/** One command found in a string; `index` is the character offset of the match in it. */
export interface ShellHit {
  rule: Extract<RuleId, "destructive-shell" | "network">;
  message: string;
  index: number;
}

/** Characters that end one simple command. */
const COMMAND_END = /[;&|\n`)]/;

/** The tokens of the simple command that starts at `from` (up to `;`, `&`, `|`, newline). */
function commandTokens(text: string, from: number): string[] {
  const rest = text.slice(from);
  const end = rest.search(COMMAND_END);
  const command = end < 0 ? rest : rest.slice(0, end);
  return command
    .split(/\s+/)
    .filter(Boolean)
    .map((t) => t.replace(/^['"]+|['"]+$/g, ""));
}

/** `rm`/`chmod`/`chown`/`chgrp` with a recursive flag on `/`, `~` or a system directory. */
function recursiveOnRoot(text: string, hits: ShellHit[]): void {
  for (const m of text.matchAll(/(?<![\w.-])(rm|chmod|chown|chgrp)(?=\s)/g)) {
    const [, ...args] = commandTokens(text, m.index);
    const flags = args.filter((a) => a.startsWith("-"));
    const targets = args.filter((a) => !a.startsWith("-"));
    const recursive = flags.some((f) => /^-[a-zA-Z]*[rR]/.test(f) || f === "--recursive");
    const noPreserve = flags.includes("--no-preserve-root");
    const target = targets.find(isRootOrHomePath);
    if (noPreserve || (recursive && target !== undefined)) {
      hits.push({
        rule: "destructive-shell",
        message: `destructive shell command: \`${`${m[1]} ${args.join(" ")}`.slice(0, 120)}\``,
        index: m.index,
      });
    }
  }
}

/** Device names that `dd` may write to harmlessly. */
const HARMLESS_DEVICES = /^\/dev\/(null|zero|stdout|stderr|fd\/\d+)$/;

function diskWrites(text: string, hits: ShellHit[]): void {
  for (const m of text.matchAll(/(?<![\w.-])(mkfs(\.[a-z0-9]+)?|mke2fs|mkswap|wipefs)(?=\s)/g)) {
    if (commandTokens(text, m.index).some((t) => t.startsWith("/dev/"))) {
      hits.push({
        rule: "destructive-shell",
        message: `destructive shell command: \`${m[1]}\` formats a device`,
        index: m.index,
      });
    }
  }
  for (const m of text.matchAll(/(?<![\w.-])dd(?=\s)/g)) {
    const target = commandTokens(text, m.index).find((t) => t.startsWith("of=/dev/"));
    if (target && !HARMLESS_DEVICES.test(target.slice(3))) {
      hits.push({
        rule: "destructive-shell",
        message: `destructive shell command: \`dd ${target}\` overwrites a device`,
        index: m.index,
      });
    }
  }
  for (const m of text.matchAll(/>\s*\/dev\/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d)/g)) {
    hits.push({
      rule: "destructive-shell",
      message: "destructive shell command: a redirect overwrites a disk device",
      index: m.index,
    });
  }
}

/** `:(){ :|:& };:` and the same shape with any function name. */
function forkBomb(text: string, hits: ShellHit[]): void {
  const squeezed = text.replace(/\s+/g, "");
  if (/([\w:]+)\(\)\{\1\|\1&\};?\1/.test(squeezed)) {
    const at = text.indexOf("(");
    hits.push({
      rule: "destructive-shell",
      message: "a fork bomb (a shell function that pipes into itself in the background)",
      index: Math.max(0, at),
    });
  }
}

function networkCommands(text: string, hits: ShellHit[]): void {
  for (const m of text.matchAll(/(?<![\w.-])(curl|wget)\s+(?:-\S+\s+)*['"]?(https?|ftp):\/\//g)) {
    hits.push({ rule: "network", message: `network shell command: \`${m[1]}\` fetches a URL`, index: m.index });
  }
  for (const m of text.matchAll(/\/dev\/(tcp|udp)\//g)) {
    hits.push({
      rule: "network",
      message: `network shell command: a redirect to /dev/${m[1]}/ opens a connection`,
      index: m.index,
    });
  }
  for (const m of text.matchAll(/(?<![\w.-])(nc|ncat|netcat|socat)(?=\s)[^;&|\n]*?(\s-[a-z]*e\s|\s-c\s|TCP|tcp:)/g)) {
    hits.push({ rule: "network", message: `network shell command: \`${m[1]}\` opens a connection`, index: m.index });
  }
}

/**
 * Finds destructive and network shell commands in `text`.
 * Rules (docs/GATE.md, "The rules": `destructive-shell`, `network`): recursive
 * `rm`/`chmod`/`chown` on `/`, `~`, `$HOME` or a top-level system directory, or with `--no-preserve-root`; `mkfs*`, `mke2fs`, `mkswap`,
 * `wipefs` on a `/dev/` device; `dd of=/dev/…` (except `/dev/null` and the like); a redirect onto a disk device;
 * fork bombs; `curl`/`wget` of a URL; `/dev/tcp/`; `nc -e` and relatives.
 * @returns the hits in text order; empty for ordinary strings.
 */
export function scanShell(text: string): ShellHit[] {
  if (text.length < 4) return [];
  const hits: ShellHit[] = [];
  recursiveOnRoot(text, hits);
  diskWrites(text, hits);
  forkBomb(text, hits);
  networkCommands(text, hits);
  return hits.sort((a, b) => a.index - b.index);
}
