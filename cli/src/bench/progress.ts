/**
 * Progress of a bench run: a `cli-progress` bar on a terminal (stderr), one line per
 * finished task otherwise, and with `--json` one result object per line on stdout.
 */
import cliProgress from "cli-progress";
import { jsonLine, printable } from "../terminal.js";
import type { BenchResult } from "./types.js";

/** One task's outcome in words: the hidden score decides, the visible verdict explains. */
export function outcome(line: BenchResult): string {
  if (line.passed) return `passed (hidden ${line.hidden?.passed ?? 0}/${line.hidden?.total ?? 0})`;
  if (line.status === "error") return `error (${printable(line.error ?? "")})`;
  if (line.visiblePassed) return `visible tests passed, hidden ${line.hidden?.passed ?? 0}/${line.hidden?.total ?? 0}`;
  return `not passed (${line.stopReason})`;
}

/** What the runner tells the progress display. */
export interface ProgressReporter {
  /** One task of one arm ended (its line is already in results.jsonl). */
  done(line: BenchResult): void;
  stop(): void;
}

/**
 * A progress display over `total` tasks (of all arms), `already` of them done by an earlier
 * run (`--resume`). Shown from the start, before the first task ends.
 */
export function progressReporter(o: {
  total: number;
  already: number;
  json: boolean;
  stream?: NodeJS.WriteStream;
}): ProgressReporter {
  const stream = o.stream ?? process.stderr;
  let passed = 0;
  let finished = o.already;
  if (o.json) {
    return {
      done: (line) => void process.stdout.write(`${jsonLine({ kind: "result", ...line })}\n`),
      stop: () => undefined,
    };
  }
  if (!stream.isTTY) {
    stream.write(`bench: ${o.total} task(s), ${o.already} already done\n`);
    return {
      done: (line) => {
        finished += 1;
        if (line.passed) passed += 1;
        stream.write(
          `bench: [${finished}/${o.total}] ${printable(line.caseId)} memory ${line.arm}: ${outcome(line)}, ${line.iterations} iteration(s), ${(line.wallMs / 1000).toFixed(1)} s\n`,
        );
      },
      stop: () => undefined,
    };
  }
  const bar = new cliProgress.SingleBar(
    {
      stream,
      format: "bench [{bar}] {value}/{total} tasks | passed {passed} | {case}",
      hideCursor: true,
      clearOnComplete: false,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(o.total, o.already, { passed: 0, case: "starting" });
  return {
    done: (line) => {
      if (line.passed) passed += 1;
      bar.increment(1, { passed, case: `${printable(line.caseId)} (${line.arm})` });
    },
    stop: () => bar.stop(),
  };
}
