/**
 * A request's `shell` (repo mode's test command): a command line run as `sh -c` at the
 * workspace root. pytest, wherever the line runs it, writes JUnit where the supervisor reads
 * it ({@link PYTEST_ADDOPTS}); any other runner is judged by its exit code, counted as one
 * synthetic test case; exit code 127 is `command_not_found`, never a test failure.
 */
import type { TestCase } from "@loopsmith/shared/contracts";
import { PYTEST_CONTROLLER, RESULT_PATH } from "./commands.js";
import type { Verdict } from "./outcome.js";

/**
 * `PYTEST_ADDOPTS` of a shell run: JUnit XML to {@link RESULT_PATH} (outside the workspace,
 * read back by the supervisor without following links), no `.pytest_cache`, and the
 * controller's options ({@link PYTEST_CONTROLLER}: loopsmith's verdict plugin, which forks
 * the worker that runs the tests), so any pytest the line runs reports its verdict on the
 * signed channel.
 */
export const PYTEST_ADDOPTS = `--junitxml=${RESULT_PATH} -p no:cacheprovider ${PYTEST_CONTROLLER.join(" ")}`;

/** Longest command line used as the synthetic test case's name, in characters. */
const NAME_LIMIT = 200;
/** Output kept in the synthetic failing case's message, in characters. */
const MESSAGE_TAIL = 2_000;

/**
 * The argv of a shell run: `sh -c <line>`, through the usual supervisor path; with an image's
 * `prologue` (SWE-bench's `source /opt/miniconda3/bin/activate && conda activate testbed`),
 * `bash -c` with the prologue first, as the official evaluation script runs it: a prologue
 * that fails stops the line with exit 126 and says so on stderr.
 */
export function shellArgv(shell: string, prologue?: string): string[] {
  if (!prologue) return ["sh", "-c", shell];
  return [
    "bash",
    "-c",
    `${prologue} || { echo "loopsmith: the image's prologue failed (exit $?)" >&2; exit 126; }\n${shell}`,
  ];
}

/** The first command word of a line: the first word that is not a `NAME=value` assignment. */
export function firstWord(shell: string): string {
  const words = shell.trim().split(/\s+/);
  return words.find((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w)) ?? words[0] ?? shell;
}

/**
 * The command the shell could not find: from dash's `sh: 1: NAME: not found` (or bash's
 * `NAME: command not found`) in stderr, else the line's first word.
 */
export function missingCommand(stderr: string, shell: string): string {
  const dash = /(?:^|\n)(?:sh|bash|dash): (?:\d+: |line \d+: )?([^\n:]+): (?:command )?not found/.exec(stderr);
  return dash?.[1]?.trim() || firstWord(shell);
}

/** What the shell run produced, beyond the verdict by exit code. */
export interface ShellFacts {
  shell: string;
  /** Test cases parsed from JUnit (empty when none appeared). */
  tests: TestCase[];
  stdout: string;
  stderr: string;
  /** The command's wall time, ms. */
  durationMs: number;
}

/**
 * Adjusts the verdict of a shell run (runner `custom`): exit code 127 with no test results
 * becomes `command_not_found`, naming the command; a run that passed or failed by exit code
 * alone (no JUnit appeared) gets one synthetic test case named after the command line
 * (classname `command`), so the counts say one check ran. Every other verdict (timeout, oom,
 * output limit, signal) is kept as outcome.ts decided it.
 */
export function shellOutcome(v: Verdict, f: ShellFacts): { verdict: Verdict; tests: TestCase[] } {
  if (v.exitCode === 127 && v.status === "error" && f.tests.length === 0) {
    const name = missingCommand(f.stderr, f.shell);
    return {
      verdict: {
        status: "command_not_found",
        exitCode: 127,
        reason: `the command "${name}" was not found in the sandbox (sh exit code 127)`,
      },
      tests: [],
    };
  }
  if (f.tests.length > 0 || (v.status !== "passed" && v.status !== "failed")) return { verdict: v, tests: f.tests };
  const name = f.shell.length > NAME_LIMIT ? `${f.shell.slice(0, NAME_LIMIT - 1)}…` : f.shell;
  const test: TestCase = {
    name,
    classname: "command",
    status: v.status,
    durationMs: Math.round(f.durationMs * 1000) / 1000,
  };
  if (v.status === "failed") {
    const output = f.stderr.trim() || f.stdout.trim();
    test.message = `exit code ${v.exitCode ?? "?"}${output ? `\n${output.slice(-MESSAGE_TAIL)}` : ""}`;
  }
  return { verdict: v, tests: [test] };
}
