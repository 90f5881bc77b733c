/**
 * What `solve` shows while its task runs (not with `--json`, which prints the raw events):
 * one line per event (see `eventLine`) and, for a DAG task, its subtasks from the `data.dag`
 * of its events. On a terminal the subtasks are a tree (see `renderDagTree`) redrawn in
 * place below the event lines, the running ones' times ticking; elsewhere (a pipe, a file,
 * CI) the lines of the subtasks that changed are printed after the event's line.
 */
import type { DagProgress, TaskEvent } from "@loopsmith/shared/contracts";
import { changedSubtaskLines, dagOf, renderDagTree } from "./dag-view.js";
import { eventLine } from "./output.js";
import { LiveBlock, type LiveStream } from "./terminal.js";

/** Where the progress goes: stdout. */
export interface ProgressStream extends LiveStream {
  isTTY?: boolean;
}

/** The progress display of one task. */
export interface SolveProgress {
  /** Shows one event of the task; the first one after {@link SolveProgress.queued} is announced as its start. */
  event(e: TaskEvent): void;
  /**
   * Says at once that the submitted task waits in the intake queue for a conductor, with
   * `ahead` tasks before it (see `intakePosition`); its first event then prints `started`.
   */
  queued(ahead: number): void;
  /** Runs `write` (to stderr, on the same terminal) without breaking the tree on screen. */
  aside(write: () => void): void;
  /**
   * Stops the clock. `clear`: the tree is erased (the result's report shows the subtasks);
   * else it stays on screen as last drawn.
   */
  stop(o: { clear: boolean }): void;
}

/**
 * The line of an event, or null. A `schedule` step about no one subtask that carries
 * `data.dag` only moves the DAG on (the iteration a running subtask is in): the tree says it
 * all, so it has no line of its own.
 */
function lineOf(e: TaskEvent, dag: DagProgress | undefined): string | null {
  if (dag && e.kind === "step" && e.phase === "schedule" && !e.subtaskId) return null;
  return eventLine(e);
}

/** Prefix of a subtask's line in a log (not a terminal). */
export const LOG_PREFIX = "[subtask] ";

/**
 * The progress display of `solve` on `stream`.
 * @param o.tty - draw the tree in place (default `stream.isTTY`)
 * @param o.color - colour the status marks (`colourEnabled(stream)`: a terminal without NO_COLOR, or FORCE_COLOR)
 * @param o.now - the clock (epoch ms)
 * @param o.tickMs - how often a terminal's tree is redrawn while a subtask runs (1000)
 */
export function solveProgress(
  stream: ProgressStream,
  o: { tty?: boolean; color?: boolean; now?: () => number; tickMs?: number } = {},
): SolveProgress {
  const now = o.now ?? Date.now;
  const inner = eventsProgress(stream, o, now);
  let queuedAt: number | undefined;
  return {
    ...inner,
    queued(ahead) {
      queuedAt = now();
      inner.line(queuedLine(ahead));
    },
    event(e) {
      if (queuedAt !== undefined) {
        inner.line(startedLine(now() - queuedAt));
        queuedAt = undefined;
      }
      inner.event(e);
    },
  };
}

/** The line printed right after submission while the task waits for a conductor. */
export function queuedLine(ahead: number): string {
  return `queued: waiting for a conductor (${ahead} task${ahead === 1 ? "" : "s"} ahead)`;
}

/** The line printed at the task's first event, after `waitedMs` in the queue. */
export function startedLine(waitedMs: number): string {
  return `started: a conductor took the task after ${(waitedMs / 1000).toFixed(1)} s in the queue`;
}

/** The display of the events alone, and a way to print a line of its own between them. */
function eventsProgress(
  stream: ProgressStream,
  o: { tty?: boolean; color?: boolean; tickMs?: number },
  now: () => number,
): Omit<SolveProgress, "queued"> & { line(text: string): void } {
  if (!(o.tty ?? stream.isTTY)) {
    let last: DagProgress | undefined;
    return {
      event(e) {
        const dag = e.kind === "result" ? undefined : dagOf(e);
        const line = lineOf(e, dag);
        const changed = dag ? changedSubtaskLines(last, dag, now()) : [];
        if (dag) last = dag;
        const text = [...(line ? [line] : []), ...changed.map((l) => `${LOG_PREFIX}${l}`)];
        if (text.length) stream.write(`${text.join("\n")}\n`);
      },
      aside: (write) => write(),
      stop: () => undefined,
      line: (text) => void stream.write(`${text}\n`),
    };
  }
  const block = new LiveBlock(stream);
  let dag: DagProgress | undefined;
  let timer: NodeJS.Timeout | undefined;
  const tree = (): string[] => (dag ? renderDagTree(dag, now(), { color: !!o.color, width: block.width() }) : []);
  const tick = (): void => {
    const running = dag?.subtasks.some((s) => s.status === "running") ?? false;
    if (running && !timer) {
      timer = setInterval(() => block.set(tree()), o.tickMs ?? 1_000);
      timer.unref();
    } else if (!running && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  };
  return {
    event(e) {
      const next = e.kind === "result" ? undefined : dagOf(e);
      const line = lineOf(e, next);
      if (next) dag = next;
      if (next) block.set(tree(), line ?? undefined);
      else if (line) block.log(line);
      tick();
    },
    aside: (write) => block.around(write),
    line: (text) => block.log(text),
    stop({ clear }) {
      if (timer) clearInterval(timer);
      timer = undefined;
      if (clear) block.clear();
      else block.release();
    },
  };
}
