/**
 * Shell completion for `loopsmith` (`loopsmith completion bash|zsh|fish`): a static script made
 * from the commander program itself (its visible commands and options, as `--help` lists
 * them), so it never drifts from the commands and costs no process start per Tab.
 *
 * Every script finds the command being typed the same way: it walks the words typed so far,
 * descending into a subcommand whenever the next word names one (`config` then `show`), and
 * offers that command's subcommands and options; anything else falls back to file names.
 */
import type { Command } from "commander";

/** The shells a script is made for. */
export const SHELLS = ["bash", "zsh", "fish"] as const;
export type Shell = (typeof SHELLS)[number];

/**
 * One command of the tree: its path from the root (`/config/show`; the root is ``), what it
 * offers: subcommands (and an argument's fixed choices) and option flags.
 */
export interface CompletionNode {
  path: string;
  subcommands: Array<{ name: string; description: string }>;
  options: Array<{ flag: string; description: string }>;
}

/**
 * The program's commands, depth first, each with its visible subcommands and option flags
 * (long and short), as commander's help shows them (hidden ones left out).
 */
export function completionTree(program: Command): CompletionNode[] {
  const help = program.createHelp();
  const out: CompletionNode[] = [];
  const walk = (cmd: Command, path: string): void => {
    const subs = help.visibleCommands(cmd).filter((c) => c.name() !== "help");
    out.push({
      path,
      subcommands: [
        ...subs.map((c) => ({ name: c.name(), description: firstLine(c.description()) })),
        // An argument with fixed choices (`completion <shell>`) completes like a subcommand.
        ...cmd.registeredArguments.flatMap((a) =>
          (a.argChoices ?? []).map((choice) => ({ name: choice, description: firstLine(a.description) })),
        ),
      ],
      options: help
        .visibleOptions(cmd)
        .flatMap((o) =>
          [o.long, o.short]
            .filter((f): f is string => !!f)
            .map((flag) => ({ flag, description: firstLine(o.description) })),
        ),
    });
    for (const sub of subs) walk(sub, `${path}/${sub.name()}`);
  };
  walk(program, "");
  return out;
}

const firstLine = (text: string): string => (text.split("\n")[0] ?? "").trim();

/** A POSIX shell (bash, zsh) single-quoted word. */
const sq = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
/** A fish single-quoted word (fish reads `\\'` and `\\\\` inside single quotes). */
const fq = (s: string): string => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

/** The completion script of `shell` for `program` (named by `program.name()`). */
export function completionScript(program: Command, shell: Shell): string {
  const tree = completionTree(program);
  const name = program.name();
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, "_")}`;
  if (shell === "bash") return bashScript(tree, name, fn);
  if (shell === "zsh") return zshScript(tree, name, fn);
  return fishScript(tree, name, fn);
}

function bashScript(tree: CompletionNode[], name: string, fn: string): string {
  const nodes = tree.map((n) => sq(n.path)).join(" | ");
  const cases = tree
    .map((n) => {
      const words = [...n.subcommands.map((s) => s.name), ...n.options.map((o) => o.flag)].join(" ");
      return `    ${sq(n.path)}) words=${sq(words)} ;;`;
    })
    .join("\n");
  return `# ${name} completion for bash: eval "$(${name} completion bash)" in ~/.bashrc
${fn}_node() {
  case "$1" in
    ${nodes}) return 0 ;;
  esac
  return 1
}
${fn}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" node="" words="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    if ${fn}_node "$node/\${COMP_WORDS[i]}"; then node="$node/\${COMP_WORDS[i]}"; fi
  done
  case "$node" in
${cases}
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F ${fn} ${name}
`;
}

function zshScript(tree: CompletionNode[], name: string, fn: string): string {
  const entry = (word: string, description: string): string => sq(`${word.replace(/:/g, "\\:")}:${description}`);
  const cases = tree
    .map(
      (n) =>
        `    ${sq(n.path)})\n      subs=(${n.subcommands.map((s) => entry(s.name, s.description)).join(" ")})\n` +
        `      opts=(${n.options.map((o) => entry(o.flag, o.description)).join(" ")}) ;;`,
    )
    .join("\n");
  const nodes = tree.map((n) => sq(n.path)).join(" ");
  return `#compdef ${name}
# ${name} completion for zsh: eval "$(${name} completion zsh)" in ~/.zshrc (after compinit),
# or save it as _${name} in a directory of $fpath.
${fn}() {
  local node="" i
  local -a nodes subs opts
  nodes=(${nodes})
  for ((i = 2; i < CURRENT; i++)); do
    if (( \${nodes[(Ie)$node/\${words[i]}]} )); then node="$node/\${words[i]}"; fi
  done
  case "$node" in
${cases}
  esac
  if [[ $PREFIX == -* ]]; then
    _describe -t options option opts
  else
    _describe -t commands command subs || _files
  fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  ${fn} "$@"
else
  compdef ${fn} ${name}
fi
`;
}

function fishScript(tree: CompletionNode[], name: string, fn: string): string {
  const nodes = tree.map((n) => fq(n.path)).join(" ");
  const lines: string[] = [];
  for (const n of tree) {
    const when = `-n ${fq(`test (${fn}_node) = ${fq(n.path)}`)}`;
    for (const s of n.subcommands)
      lines.push(`complete -c ${name} ${when} -f -a ${fq(s.name)} -d ${fq(s.description)}`);
    for (const o of n.options) {
      const flag = o.flag.startsWith("--") ? `-l ${fq(o.flag.slice(2))}` : `-s ${fq(o.flag.slice(1))}`;
      lines.push(`complete -c ${name} ${when} ${flag} -d ${fq(o.description)}`);
    }
  }
  return `# ${name} completion for fish: ${name} completion fish > ~/.config/fish/completions/${name}.fish
function ${fn}_node
  set -l nodes ${nodes}
  set -l node ""
  for w in (commandline -opc)[2..-1]
    if contains -- "$node/$w" $nodes
      set node "$node/$w"
    end
  end
  echo $node
end
${lines.join("\n")}
`;
}
