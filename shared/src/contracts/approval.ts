/**
 * Approvals of dependency changes (repo mode, dependency policy `ask`). A candidate that
 * changes a dependency manifest is either approved ahead of time by an allowlist the client
 * read (`.loopsmith/allowed-dependencies` in the repository, `allowed-dependencies` in the
 * user's configuration folder), or asked about: the architect publishes an approval request
 * (a `step` event whose `data.approval` is an {@link ApprovalRequest}) and, when the task says
 * a person answers ({@link RepoApprovals.interactive}), waits for the answer sent to
 * `loopsmith.architect.approve`; without one it stops with `needs_approval`. Every decision is
 * a `step` event whose `data.approval` is a {@link DependencyDecision}, so the recorded run
 * (`loopsmith show`) holds who decided what, when, and the answer.
 */
import { z } from "zod";
import { TaskId, V1 } from "./common.js";

/** Longest a task waits for a person's answer by default, in ms (15 minutes). */
export const APPROVAL_WAIT_MS = 15 * 60_000;

/**
 * One changed package of a manifest: its name as the manifest spells it and its requirement
 * before and after (`==2.32.0`, `^4.17.21`; `""` when it has none), either absent when the
 * package was added or removed. A manifest change that names no package (a lock file, a
 * `setup.py`) is one entry named after the file, its `after` a content hash.
 */
export const PackageChange = z.object({
  manifest: z.string().min(1).max(1_000),
  name: z.string().min(1).max(1_000),
  before: z.string().max(2_000).optional(),
  after: z.string().max(2_000).optional(),
});
export type PackageChange = z.infer<typeof PackageChange>;

/** A package change as people read it and as an answer approves it: `requests ==2.31.0 → ==2.32.0` (`+` added, `-` removed). */
export function packageLabel(p: PackageChange): string {
  if (p.before === undefined) return `+${p.name}${p.after ? ` ${p.after}` : ""}`;
  if (p.after === undefined) return `-${p.name}${p.before ? ` ${p.before}` : ""}`;
  return `${p.name} ${p.before || "(any)"} → ${p.after || "(any)"}`;
}

/**
 * The name a package is compared by: lower case, runs of `-`, `_` and `.` as one `-` (PEP
 * 503's normalisation, which leaves npm names, already lower case, as they are but for `_`/`.`).
 */
export function packageKey(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/[-_.]+/g, "-");
}

/** An allowlist as the client read it: where from, and the package names it approves (normalised by {@link packageKey}). */
export const AllowList = z.object({
  /** The file, as an absolute path. */
  source: z.string().min(1).max(4_000),
  packages: z.array(z.string().min(1).max(214)).max(10_000),
});
export type AllowList = z.infer<typeof AllowList>;

/**
 * An allowlist file's text: one package name a line (`requests`, `@types/node`); `#` starts
 * a comment; a version after the name (`requests==2.32.0`, `lodash@^4`) is ignored, since the
 * list approves a package whatever its version.
 */
export function parseAllowList(text: string, source: string): AllowList {
  const packages = new Set<string>();
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*$/, "").trim();
    if (!line) continue;
    // A scoped npm name keeps its leading @; the version starts at the first of = < > ~ ! ; [ space, or a later @.
    const name = /^(@?[^\s=<>~!;[@]+)/.exec(line)?.[1];
    if (name) packages.add(packageKey(name));
  }
  return { source, packages: [...packages].sort() };
}

/**
 * The allowlist entry that approves every one of `changes`, undefined when none does. An
 * entry named after a manifest file (a change no package could be read from) is never approved
 * by a list.
 */
export function allowedBy(changes: readonly PackageChange[], lists: readonly AllowList[]): AllowList | undefined {
  if (changes.length === 0) return undefined;
  return lists.find((l) => {
    const names = new Set(l.packages);
    return changes.every((c) => c.name !== c.manifest && names.has(packageKey(c.name)));
  });
}

/** How a repo task with policy `ask` is approved: who answers, and what is approved ahead of time. */
export const RepoApprovals = z.object({
  /**
   * A person answers approval requests (the CLI on a terminal): the task waits for the answer
   * up to `waitMs`. False: a change that is not allowlisted stops the task with `needs_approval`.
   */
  interactive: z.boolean().default(false),
  /** Longest the task waits for one answer, in ms; then it stops with `needs_approval`. @defaultValue 15 minutes */
  waitMs: z
    .number()
    .int()
    .min(1_000)
    .max(24 * 3_600_000)
    .default(APPROVAL_WAIT_MS),
  /** Allowlists that approve their packages without asking. */
  allowed: z.array(AllowList).max(8).default([]),
});
export type RepoApprovals = z.infer<typeof RepoApprovals>;

/** An approval request's id: the iteration and a hash of the changes it is about (`i2-3f9c0a1b2c4d`). */
export const ApprovalId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "1 to 64 letters, digits, _ or -");

/** What the architect asks about (`data.approval` of its `step` event, `state: "requested"`). */
export const ApprovalRequest = z.object({
  state: z.literal("requested"),
  requestId: ApprovalId,
  packages: z.array(PackageChange),
  /** The unified diff of the manifests the change is about. */
  diff: z.string(),
  /** Whether the task waits for an answer (else it stops with `needs_approval`). */
  waiting: z.boolean(),
  /** Until when it waits, ISO time (when waiting). */
  until: z.string().optional(),
});
export type ApprovalRequest = z.infer<typeof ApprovalRequest>;

/** One decision on a dependency change, as recorded with the task (`data.approval`, `state: "decided"`). */
export const DependencyDecision = z.object({
  state: z.literal("decided"),
  requestId: ApprovalId,
  /** Who decided: the user name for a person, the allowlist file's path for a list. */
  by: z.string().min(1).max(4_000),
  source: z.enum(["user", "allowlist"]),
  /** The changes decided on, as {@link packageLabel} writes them. */
  packages: z.array(z.string()),
  /** When, ISO time. */
  at: z.string().datetime({ offset: true }),
  answer: z.enum(["yes", "no"]),
});
export type DependencyDecision = z.infer<typeof DependencyDecision>;

/** A person's answer to an approval request (`loopsmith.architect.approve.<owner>`). */
export const ApproveRequest = z.object({
  v: V1,
  taskId: TaskId,
  requestId: ApprovalId,
  answer: z.enum(["yes", "no"]),
  /** The person's user name. */
  by: z.string().min(1).max(256),
  /** When they answered, ISO time. */
  at: z.string().datetime({ offset: true }),
});
export type ApproveRequest = z.infer<typeof ApproveRequest>;

/** The architect's reply: whether the answer was taken (false: the task is unknown, another owner's, or final). */
export const ApproveReply = z.object({ accepted: z.boolean() });
export type ApproveReply = z.infer<typeof ApproveReply>;
