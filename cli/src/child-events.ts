/**
 * A DAG task's events together with its child tasks' (what `solve --json` prints): the
 * parent's events as they come and, interleaved as they come, the events of every child task
 * its `schedule` events name. A child is followed from the first parent event whose `data.dag`
 * (a subtask's `childTaskId`) or `data.subtask` names it, and until its own `result` event.
 * Each child is read from its start, so nothing it did before it was named is missed. The
 * parent's `result` event comes last: after it, the children still followed get `graceMs`
 * to bring their results (they ended before the parent did, or are being cancelled with
 * it), and then are no longer followed.
 */
import type { TaskEvent } from "@loopsmith/shared";

/**
 * A task's events, replayed from its start, until its `result` event (inclusive) or until
 * `signal` aborts. `watchEvents` in `solve`, a fake in tests.
 */
export type EventSource = (taskId: string, signal: AbortSignal) => AsyncIterable<TaskEvent>;

/** Options of {@link withChildEvents}. */
export interface ChildEventsOptions {
  /** Stops everything: the generator returns (without the parent's result). */
  signal?: AbortSignal;
  /** After the parent's result, how long the children still followed get to end, in ms. @defaultValue CHILD_GRACE_MS */
  graceMs?: number;
  /** A child's events could not be read (the child is no longer followed; the parent goes on). */
  onChildError?: (childTaskId: string, err: unknown) => void;
}

/** Default of {@link ChildEventsOptions.graceMs}. */
export const CHILD_GRACE_MS = 3_000;

/** The child task ids an event names: each subtask's `childTaskId` in `data.dag`, and `data.subtask.childTaskId`. */
export function childTaskIdsOf(e: Pick<TaskEvent, "data">): string[] {
  const ids: string[] = [];
  const add = (x: unknown): void => {
    if (typeof x === "object" && x !== null) {
      const id = (x as { childTaskId?: unknown }).childTaskId;
      if (typeof id === "string" && id && !ids.includes(id)) ids.push(id);
    }
  };
  const dag = e.data?.dag as { subtasks?: unknown } | undefined;
  if (dag && Array.isArray(dag.subtasks)) for (const s of dag.subtasks as unknown[]) add(s);
  add(e.data?.subtask);
  return ids;
}

/** What one followed task's reader hands over. */
type Item = { from: string; event: TaskEvent } | { from: string; error: unknown } | { from: string; end: true };

/**
 * The events of `parentTaskId` and of its child tasks, in the order they arrive, the parent's
 * `result` event last. Ends without that result when `o.signal` aborts or the parent's events
 * end without one.
 * @throws whatever reading the parent's events throws (the children are stopped first)
 */
export async function* withChildEvents(
  parentTaskId: string,
  source: EventSource,
  o: ChildEventsOptions = {},
): AsyncGenerator<TaskEvent> {
  const queue: Item[] = [];
  let wake: (() => void) | undefined;
  const push = (item: Item): void => {
    queue.push(item);
    const w = wake;
    wake = undefined;
    w?.();
  };
  /** Children followed and not ended, with what stops each. */
  const following = new Map<string, AbortController>();
  const started = new Set<string>();
  const parentStop = new AbortController();
  /** Stops following every child: their readers are aborted and whatever they still hand over is dropped. */
  const stopChildren = (): void => {
    for (const c of following.values()) c.abort();
    following.clear();
    const w = wake;
    wake = undefined;
    w?.();
  };
  const onAbort = (): void => {
    parentStop.abort();
    stopChildren();
    push({ from: parentTaskId, end: true });
  };
  o.signal?.addEventListener("abort", onAbort, { once: true });
  if (o.signal?.aborted) onAbort();

  const read = async (taskId: string, signal: AbortSignal): Promise<void> => {
    try {
      for await (const event of source(taskId, signal)) {
        if (signal.aborted) break;
        push({ from: taskId, event });
        if (event.kind === "result") break;
      }
    } catch (err) {
      push({ from: taskId, error: err });
    } finally {
      push({ from: taskId, end: true });
    }
  };
  const follow = (childId: string): void => {
    if (started.has(childId) || childId === parentTaskId) return;
    started.add(childId);
    const stop = new AbortController();
    following.set(childId, stop);
    void read(childId, stop.signal);
  };

  let result: TaskEvent | undefined;
  let parentDone = false;
  let grace: NodeJS.Timeout | undefined;
  try {
    if (o.signal?.aborted) return;
    void read(parentTaskId, parentStop.signal);
    for (;;) {
      if (o.signal?.aborted) return;
      if (parentDone && following.size === 0) break;
      const item = queue.shift();
      if (!item) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        continue;
      }
      if (item.from === parentTaskId) {
        if ("error" in item) throw item.error;
        if ("end" in item) {
          if (parentDone) continue;
          parentDone = true;
          // Without a result (stopped, or the events ended) nothing more is awaited.
          if (!result) stopChildren();
          continue;
        }
        for (const id of childTaskIdsOf(item.event)) follow(id);
        if (item.event.kind !== "result") {
          yield item.event;
          continue;
        }
        result = item.event;
        grace = setTimeout(stopChildren, o.graceMs ?? CHILD_GRACE_MS);
        continue;
      }
      // A child's.
      const child = following.get(item.from);
      if (!child) continue;
      if ("event" in item) {
        yield item.event;
        if (item.event.kind === "result") {
          child.abort();
          following.delete(item.from);
        }
      } else {
        if ("error" in item) o.onChildError?.(item.from, item.error);
        following.delete(item.from);
      }
    }
    if (result && !o.signal?.aborted) yield result;
  } finally {
    clearTimeout(grace);
    o.signal?.removeEventListener("abort", onAbort);
    parentStop.abort();
    stopChildren();
  }
}
