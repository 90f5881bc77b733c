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
import type { TaskEvent } from "@loopsmith/shared/contracts";

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

/** The readers of a parent task and of its children, and what they handed over that is not yet taken. */
class Readers {
  readonly queue: Item[] = [];
  private wake: (() => void) | undefined;
  /** Children followed and not ended, with what stops each. */
  readonly following = new Map<string, AbortController>();
  private readonly started = new Set<string>();
  readonly parentStop = new AbortController();

  constructor(
    private readonly parentTaskId: string,
    private readonly source: EventSource,
  ) {}

  /** Hands an item over and ends a pending {@link waitForItem}. */
  push(item: Item): void {
    this.queue.push(item);
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Resolves at the next {@link push} or {@link stopChildren}. */
  waitForItem(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.wake = resolve;
    });
  }

  /** Stops following every child: their readers are aborted and whatever they still hand over is dropped. */
  readonly stopChildren = (): void => {
    for (const c of this.following.values()) c.abort();
    this.following.clear();
    this.notify();
  };

  /** Reads one task's events until its result or `signal`, handing each over, then an error if one, then the end. */
  async read(taskId: string, signal: AbortSignal): Promise<void> {
    try {
      for await (const event of this.source(taskId, signal)) {
        if (signal.aborted) break;
        this.push({ from: taskId, event });
        if (event.kind === "result") break;
      }
    } catch (err) {
      this.push({ from: taskId, error: err });
    } finally {
      this.push({ from: taskId, end: true });
    }
  }

  /** Starts following a child task, once (never the parent itself). */
  follow(childId: string): void {
    if (this.started.has(childId) || childId === this.parentTaskId) return;
    this.started.add(childId);
    const stop = new AbortController();
    this.following.set(childId, stop);
    void this.read(childId, stop.signal);
  }

  /** Stops following a child that brought its result. */
  endChild(childId: string): void {
    this.following.get(childId)?.abort();
    this.following.delete(childId);
  }
}

/** Where the parent is: its result once it came, whether its reader ended, the children's grace timer. */
interface ParentState {
  result?: TaskEvent;
  done: boolean;
  grace?: NodeJS.Timeout;
}

/**
 * Takes one of the parent's items: follows the children its event names and returns the event
 * to yield now (the result is kept for last, and starts the children's grace).
 * @throws what reading the parent's events threw
 */
function parentEvent(item: Item, r: Readers, state: ParentState, o: ChildEventsOptions): TaskEvent | undefined {
  if ("error" in item) throw item.error;
  if ("end" in item) {
    if (state.done) return undefined;
    state.done = true;
    // Without a result (stopped, or the events ended) nothing more is awaited.
    if (!state.result) r.stopChildren();
    return undefined;
  }
  for (const id of childTaskIdsOf(item.event)) r.follow(id);
  if (item.event.kind !== "result") return item.event;
  state.result = item.event;
  state.grace = setTimeout(r.stopChildren, o.graceMs ?? CHILD_GRACE_MS);
  return undefined;
}

/** Takes one of a child's items: its event to yield, if the child is still followed; its error or end stops following it. */
function childEvent(item: Item, r: Readers, o: ChildEventsOptions): TaskEvent | undefined {
  if (!r.following.has(item.from)) return undefined;
  if ("event" in item) return item.event;
  if ("error" in item) o.onChildError?.(item.from, item.error);
  r.following.delete(item.from);
  return undefined;
}

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
  const r = new Readers(parentTaskId, source);
  const onAbort = (): void => {
    r.parentStop.abort();
    r.stopChildren();
    r.push({ from: parentTaskId, end: true });
  };
  o.signal?.addEventListener("abort", onAbort, { once: true });
  if (o.signal?.aborted) onAbort();

  const state: ParentState = { done: false };
  try {
    if (o.signal?.aborted) return;
    void r.read(parentTaskId, r.parentStop.signal);
    for (;;) {
      if (o.signal?.aborted) return;
      if (state.done && r.following.size === 0) break;
      const item = r.queue.shift();
      if (!item) {
        await r.waitForItem();
        continue;
      }
      if (item.from === parentTaskId) {
        const event = parentEvent(item, r, state, o);
        if (event) yield event;
        continue;
      }
      const event = childEvent(item, r, o);
      if (!event) continue;
      yield event;
      if (event.kind === "result") r.endChild(item.from);
    }
    if (state.result && !o.signal?.aborted) yield state.result;
  } finally {
    clearTimeout(state.grace);
    o.signal?.removeEventListener("abort", onAbort);
    r.parentStop.abort();
    r.stopChildren();
  }
}
