/**
 * Unknown keys in what a user writes (configuration files, `LOOPSMITH_CONFIG_JSON`, MCP tool
 * arguments): an error naming the key by its dotted path and the nearest known key, instead of
 * a typo dropped without a word. Bus contracts stay tolerant of extra fields (an older or newer
 * service may send them); only schemas parsed from user input use {@link strictObject}.
 */
import { distance } from "fastest-levenshtein";
import { z } from "zod";

/**
 * The known key nearest to `key`, when one is near enough to be a likely typo: an edit
 * distance (case ignored) of at most 2, or 40 % of the longer name, or one name holding the
 * other (`acceptanceTests` → `tests`).
 * @returns undefined when no known key is close
 */
export function nearestKey(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  let best: { name: string; score: number } | undefined;
  for (const name of known) {
    const other = name.toLowerCase();
    const d = distance(lower, other);
    const near = d <= Math.max(2, Math.floor(0.4 * Math.max(lower.length, other.length)));
    const contained = Math.min(lower.length, other.length) >= 3 && (lower.includes(other) || other.includes(lower));
    if (!near && !contained) continue;
    if (!best || d < best.score) best = { name, score: d };
  }
  return best?.name;
}

/**
 * The sentence for one unknown key: `unknown key llm.modle; did you mean llm.model?`, or, with
 * no near key, the keys allowed there.
 * @param path - where the object holding the key is (empty at the top level)
 */
export function unknownKeyMessage(path: ReadonlyArray<PropertyKey>, key: string, known: readonly string[]): string {
  const at = (k: string): string => [...path.map(String), k].join(".");
  const near = nearestKey(key, known);
  if (near) return `unknown key ${at(key)}; did you mean ${at(near)}?`;
  return known.length ? `unknown key ${at(key)} (known: ${known.join(", ")})` : `unknown key ${at(key)}`;
}

/** The keys a strict object (its shape) or an enum-keyed record (the enum's values) accepts. */
function knownKeys(inst: unknown): string[] {
  const def = (inst as { _zod?: { def?: Record<string, unknown> } } | undefined)?._zod?.def;
  if (def?.type === "object") return Object.keys(def.shape as object);
  const keyDef = (def?.keyType as { _zod?: { def?: { type?: string; entries?: object } } } | undefined)?._zod?.def;
  if (def?.type === "record" && keyDef?.type === "enum") return Object.values(keyDef.entries ?? {}).map(String);
  return [];
}

/**
 * A zod error map for `unrecognized_keys` issues: one {@link unknownKeyMessage} per key, one
 * line each (`\n` between them, so a reader can list them one per line); other issues keep
 * zod's message. Pass it as the `error` of a strict object or a record.
 */
export function unknownKeysError(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code !== "unrecognized_keys") return undefined;
  const known = knownKeys(issue.inst);
  return issue.keys.map((key) => unknownKeyMessage(issue.path ?? [], key, known)).join("\n");
}

/**
 * `z.strictObject(shape)` whose unknown keys are errors that name each key by its dotted path
 * and the nearest known key ({@link unknownKeysError}). For schemas parsed from user input
 * only, never for messages on the bus.
 */
export function strictObject<T extends z.core.$ZodLooseShape>(shape: T): z.ZodObject<T, z.core.$strict> {
  return z.strictObject(shape, { error: unknownKeysError });
}
