/**
 * The rows of `loopsmith history` for people: a DAG task's child tasks (one per subtask
 * attempt, id `<parent>--<subtask>-a<N>`, see `childTaskId`) under their parent's row when
 * the parent is on the same page. Pure; `--json` keeps memory's list as it is.
 */
import { createHash } from "node:crypto";
import { childTaskId, type TaskRecord } from "@loopsmith/shared/contracts";

/** One way to read a task id as a child task's. */
export interface ChildIdParts {
  /** Everything before `--<subtask>-a<N>`: the parent id, or for a shortened id (64 characters) the cut parent id, `-` and 8 hex digits of its SHA-256. */
  parent: string;
  subtaskId: string;
  attempt: number;
}

/** `--<subtask>-a<N>` from one `--` to the end of an id. */
const CHILD_TAIL = /^--([a-z][a-z0-9_-]{0,23})-a([1-9][0-9]{0,8})$/;

/**
 * The ways `id` reads as a child task id, the last `--` first (a subtask id may itself hold
 * `--`); empty when it is not one.
 */
export function childIdParts(id: string): ChildIdParts[] {
  const parts: ChildIdParts[] = [];
  for (let at = id.lastIndexOf("--"); at > 0; at = id.lastIndexOf("--", at - 1)) {
    const m = CHILD_TAIL.exec(id.slice(at));
    if (m) parts.push({ parent: id.slice(0, at), subtaskId: m[1]!, attempt: Number(m[2]) });
  }
  return parts;
}

/** One printed row: the task and how deep it sits (0: a row of its own; 1: under its parent). */
export interface HistoryRow {
  task: TaskRecord;
  depth: number;
}

/** Whether `childTaskId(parent, sub, attempt)` is `id`. */
function isChildOf(id: string, parent: string, p: ChildIdParts): boolean {
  try {
    return childTaskId(parent, p.subtaskId, p.attempt) === id;
  } catch {
    return false;
  }
}

/**
 * The rows in print order: each task in the given order (newest first), except that a child
 * task whose parent is in `tasks` comes right after its parent's row, one level deeper,
 * among its siblings by subtask id, then attempt. Children whose parent is not in `tasks`
 * keep their place.
 */
export function historyRows(tasks: readonly TaskRecord[]): HistoryRow[] {
  const index = new Map<string, number>();
  tasks.forEach((t, i) => {
    if (!index.has(t.taskId)) index.set(t.taskId, i);
  });
  let byHash: Map<string, number[]> | undefined;
  /** The rows whose id has these 8 hex digits of SHA-256 (what a shortened child id carries). */
  const withHash = (hash: string): number[] => {
    if (!byHash) {
      byHash = new Map();
      for (const [id, i] of index) {
        const h = createHash("sha256").update(id).digest("hex").slice(0, 8);
        byHash.set(h, [...(byHash.get(h) ?? []), i]);
      }
    }
    return byHash.get(hash) ?? [];
  };
  const parentOf = (id: string): { at: number; parts: ChildIdParts } | undefined => {
    for (const parts of childIdParts(id)) {
      const plain = index.get(parts.parent);
      if (plain !== undefined && isChildOf(id, parts.parent, parts)) return { at: plain, parts };
      if (id.length === 64) {
        const at = withHash(parts.parent.slice(-8)).find((i) => isChildOf(id, tasks[i]!.taskId, parts));
        if (at !== undefined) return { at, parts };
      }
    }
    return undefined;
  };

  const children = new Map<number, Array<{ i: number; parts: ChildIdParts }>>();
  const nested = new Set<number>();
  tasks.forEach((t, i) => {
    if (index.get(t.taskId) !== i) return;
    const parent = parentOf(t.taskId);
    if (!parent || parent.at === i) return;
    children.set(parent.at, [...(children.get(parent.at) ?? []), { i, parts: parent.parts }]);
    nested.add(i);
  });
  for (const list of children.values()) {
    list.sort((a, b) =>
      a.parts.subtaskId < b.parts.subtaskId
        ? -1
        : a.parts.subtaskId > b.parts.subtaskId
          ? 1
          : a.parts.attempt - b.parts.attempt || a.i - b.i,
    );
  }

  const rows: HistoryRow[] = [];
  const placed = new Set<number>();
  const place = (i: number, depth: number): void => {
    if (placed.has(i)) return;
    placed.add(i);
    rows.push({ task: tasks[i]!, depth });
    for (const c of children.get(i) ?? []) place(c.i, depth + 1);
  };
  tasks.forEach((_, i) => {
    if (!nested.has(i)) place(i, 0);
  });
  // Only a cycle of parents (a SHA-256 collision) would leave rows unplaced: they come last.
  tasks.forEach((_, i) => place(i, 0));
  return rows;
}
