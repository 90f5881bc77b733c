/**
 * A task's dependency approval requests and the answers people give, kept where every
 * architect replica reads them: one key of the task state bucket per task,
 * `approval.<owner>.<taskId>`, holding its requests in order (a JSON array of
 * {@link ApprovalEntry}). The replica running the task adds a request when it asks
 * (`repo/approval.ts`) and reads the answer while it waits; the `approve` endpoint, served by
 * any replica, writes the answer. A task resumed elsewhere finds the answers given before.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { KV } from "@nats-io/kv";
import { ApprovalId, type ApproveRequest } from "@loopsmith/shared/contracts";
import { openTaskStates, type StreamOptions } from "@loopsmith/shared/bus";
import { z } from "zod";

/** One approval request of a task: what it is about and, once given, the answer. */
export const ApprovalEntry = z.object({
  requestId: ApprovalId,
  /** The changes asked about, as `packageLabel` writes them. */
  packages: z.array(z.string()),
  answer: z.enum(["yes", "no"]).optional(),
  /** Who answered (a user name) and when (ISO time), with the answer. */
  by: z.string().optional(),
  at: z.string().optional(),
});
export type ApprovalEntry = z.infer<typeof ApprovalEntry>;

/** What the loop uses (`Steps.approvals`). */
export interface ApprovalBox {
  /** The task's requests so far, oldest first (none: `[]`). */
  entries(taskId: string, owner: string): Promise<ApprovalEntry[]>;
  /** Adds a request waiting for an answer (kept as it is when it exists). */
  ask(taskId: string, owner: string, requestId: string, packages: readonly string[]): Promise<void>;
}

/** The box and the answer's writer (the `approve` endpoint's). */
export interface ApprovalStore extends ApprovalBox {
  /**
   * Records a person's answer to a request of `owner`'s task.
   * @returns false when the task has no such request, or it already has an answer
   */
  answer(owner: string, answer: ApproveRequest): Promise<boolean>;
}

const Entries = z.array(ApprovalEntry);
const keyOf = (owner: string, taskId: string): string => `approval.${owner}.${taskId}`;

/** The approval store over the task state bucket (opened, or created when missing). */
export async function openApprovalStore(nc: NatsConnection, opts: StreamOptions = {}): Promise<ApprovalStore> {
  const kv: KV = await openTaskStates(nc, opts);
  const read = async (owner: string, taskId: string): Promise<{ list: ApprovalEntry[]; revision: number }> => {
    const entry = await kv.get(keyOf(owner, taskId));
    if (!entry || entry.operation !== "PUT") return { list: [], revision: 0 };
    const parsed = Entries.safeParse(entry.json());
    return { list: parsed.success ? parsed.data : [], revision: entry.revision };
  };
  /** Compare-and-set on the key's revision: two writers at once both land, in order. */
  const change = async (
    owner: string,
    taskId: string,
    edit: (list: ApprovalEntry[]) => ApprovalEntry[] | undefined,
  ): Promise<boolean> => {
    for (let attempt = 0; attempt < 5; attempt++) {
      const { list, revision } = await read(owner, taskId);
      const next = edit(list);
      if (!next) return false;
      try {
        if (revision === 0) await kv.create(keyOf(owner, taskId), JSON.stringify(next));
        else await kv.update(keyOf(owner, taskId), JSON.stringify(next), revision);
        return true;
      } catch {
        // Written meanwhile: read again.
      }
    }
    throw new Error(`could not write the approval requests of task ${taskId}: written by others 5 times in a row`);
  };
  return {
    entries: async (taskId, owner) => (await read(owner, taskId)).list,
    async ask(taskId, owner, requestId, packages) {
      await change(owner, taskId, (list) =>
        list.some((e) => e.requestId === requestId) ? undefined : [...list, { requestId, packages: [...packages] }],
      );
    },
    answer: (owner, a) =>
      change(owner, a.taskId, (list) => {
        const i = list.findIndex((e) => e.requestId === a.requestId && e.answer === undefined);
        if (i < 0) return undefined;
        return list.map((e, j) => (j === i ? { ...e, answer: a.answer, by: a.by, at: a.at } : e));
      }),
  };
}
