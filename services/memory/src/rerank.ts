/**
 * Re-ranking of recalled failures by their cause: the shape of the failing code and of the
 * failed assertion, without the task's names and values.
 *
 * The fused recall (`recall.ts`) finds failures by their goal, error and code words, which are
 * mostly the task's own (its names, its test data): good for the same mistake on the same
 * task, weak for the same mistake on another. The cause words of a failure are its code's
 * shape words (`code-shape.ts`: runs of three tokens, names and values abstracted) and how
 * its assertion's returned value differs from the expected one (`mismatch.ts`), each word
 * prefixed by its kind. Both are computed from the raw error text and code stored with the
 * row, at recall time: nothing stored or embedded changes.
 *
 * The rows (the fused ranking's best {@link RERANK_POOL}) are scored by BM25 against the
 * query's cause words (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25
 * and Beyond", 2009; k1 = 1.2, b = 0.75; the document frequencies are the pool's), and that
 * ranking is added to the fused score as one more reciprocal-rank term of weight
 * {@link CAUSE_WEIGHT}.
 */
import { shapeWords } from "./code-shape.js";
import { decodeEntities } from "./signature.js";
import { mismatch } from "./mismatch.js";
import { stripComments } from "./embed-text.js";
import type { Language } from "@loopsmith/shared/contracts";

/** Rows of the fused ranking that are re-ranked (the rest keep their place below them). */
export const RERANK_POOL = 100;
/** Weight of the cause ranking beside the fused rankings' (each of weight 1, `RANKING_WEIGHTS`). */
export const CAUSE_WEIGHT = 2;
/** BM25's term-frequency saturation and length normalisation. */
const K1 = 1.2;
const B = 0.75;

/**
 * A failure's cause words: `m<word>` for each mismatch word, then its code's shape words.
 * Pure; never throws.
 * @param errorText - the raw error text (entities are decoded here)
 * @param code - the failing code, comments included (stripped here)
 */
export function causeWords(errorText: string, code: string, language: Language = "python"): string[] {
  const mm = errorText ? mismatch(decodeEntities(errorText)) : "";
  const shape = code ? shapeWords(stripComments(decodeEntities(code), language)) : "";
  return [
    ...mm
      .split(" ")
      .filter(Boolean)
      .map((w) => `m${w}`),
    ...shape.split(" ").filter(Boolean),
  ];
}

/** A row to re-rank: its fused score and its cause words. */
export interface CauseCandidate {
  score: number;
  words: readonly string[];
}

/**
 * The BM25 score of each candidate against the query's words, the document frequencies taken
 * over the candidates. A candidate sharing no word scores 0.
 */
export function bm25Scores(query: readonly string[], docs: ReadonlyArray<readonly string[]>): number[] {
  const n = docs.length;
  const avg = docs.reduce((s, d) => s + d.length, 0) / (n || 1) || 1;
  const terms = [...new Set(query)];
  const df = new Map<string, number>(terms.map((t) => [t, 0]));
  const tfs = docs.map((d) => {
    const tf = new Map<string, number>();
    for (const w of d) if (df.has(w)) tf.set(w, (tf.get(w) ?? 0) + 1);
    for (const t of tf.keys()) df.set(t, (df.get(t) ?? 0) + 1);
    return tf;
  });
  return docs.map((d, i) => {
    let s = 0;
    const tf = tfs[i] ?? new Map<string, number>();
    for (const t of terms) {
      const f = tf.get(t) ?? 0;
      if (f === 0) continue;
      const dfT = df.get(t) ?? 0;
      const idf = Math.log(1 + (n - dfT + 0.5) / (dfT + 0.5));
      s += (idf * f * (K1 + 1)) / (f + K1 * (1 - B + (B * d.length) / avg));
    }
    return s;
  });
}

/**
 * The order of the candidates after adding the cause ranking to their fused scores: each
 * candidate with a BM25 score above 0 gains `weight / (rrfK + rank)` (ties share a rank);
 * ties in the new score keep the fused order.
 * @returns the candidates' indices, best first
 */
export function causeOrder(
  query: readonly string[],
  candidates: readonly CauseCandidate[],
  rrfK: number,
  weight = CAUSE_WEIGHT,
): number[] {
  const scores = bm25Scores(
    query,
    candidates.map((c) => c.words),
  );
  const distinct = [...new Set(scores.filter((s) => s > 0))].sort((a, b) => b - a);
  const rankOf = new Map<number, number>();
  let seen = 0;
  for (const s of distinct) {
    rankOf.set(s, seen + 1);
    seen += scores.filter((x) => x === s).length;
  }
  const total = candidates.map((c, i) => {
    const r = rankOf.get(scores[i] ?? 0);
    return c.score + (r === undefined ? 0 : weight / (rrfK + r));
  });
  return candidates.map((_, i) => i).sort((a, b) => (total[b] ?? 0) - (total[a] ?? 0) || a - b);
}
