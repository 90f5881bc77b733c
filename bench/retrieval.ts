/**
 * Retrieval metrics of the memory benchmarks (bench/recall.ts, bench/transfer.ts): a ranker
 * type, the BM25 baseline ranker, the evaluation of a ranker over queries (the rank of the
 * first relevant candidate in each query's top {@link TOP}), and the metrics of those ranks.
 *
 * The metrics are the usual ones of information retrieval (Manning, Raghavan and Schütze,
 * "Introduction to Information Retrieval", ch. 8; the reciprocal rank as in the TREC-8
 * question-answering track, Voorhees 1999), with one relevant hit counted per query: the
 * first. recall@k is the share of queries with a relevant candidate within the first k,
 * MRR@20 the mean of 1 / rank over the queries, a query with none in the top 20 counting 0.
 */
import MiniSearch from "minisearch";
import { formatTable } from "@loopsmith/cli/ui";

/** How deep a ranking is read: candidates beyond the 20th count as not found. */
export const TOP = 20;

/** What a ranked candidate (and a query) is: a stored failure's id and the task it is stored under. */
interface Candidate {
  id: string;
  taskId: string;
}

/** Candidate ids for a query, best first (the evaluation applies the exclusion rule itself). */
export type Ranker<F> = (query: F) => Promise<string[]>;

/** The rank, 1-based, of the first relevant candidate in each query's top {@link TOP}; null when none. */
export type Ranks = Array<number | null>;

/** What the evaluation of one benchmark counts as an answer, and what it leaves out of a ranking. */
export interface EvaluationRule<F> {
  /**
   * A candidate is relevant to a query when it has the query's label (recall: the mutant,
   * `cause`; transfer: the mutation operator). An id the corpus does not hold is never relevant.
   */
  label: (f: F) => string;
  /**
   * Left out of each ranking before the top {@link TOP} is read: `"self"`, the query itself
   * (bench:recall, where a query's task holds no other failure); `"same-task"`, every
   * candidate stored under the query's task (bench:transfer; memory's `excludeSameTask`).
   */
  exclude: "self" | "same-task";
}

/** The rank of the first relevant candidate in each query's top {@link TOP}, in the queries' order. */
export async function evaluate<F extends Candidate>(
  queries: readonly F[],
  byId: ReadonlyMap<string, F>,
  rank: Ranker<F>,
  rule: EvaluationRule<F>,
): Promise<Ranks> {
  const out: Ranks = [];
  for (const q of queries) {
    const kept = (id: string): boolean => (rule.exclude === "self" ? id !== q.id : byId.get(id)?.taskId !== q.taskId);
    const ids = (await rank(q)).filter(kept).slice(0, TOP);
    const at = ids.findIndex((id) => {
      const c = byId.get(id);
      return c !== undefined && rule.label(c) === rule.label(q);
    });
    out.push(at >= 0 ? at + 1 : null);
  }
  return out;
}

/** recall@1, recall@5 and MRR@20, each a fraction in [0, 1] over the queries. */
export interface Metrics {
  r1: number;
  r5: number;
  mrr: number;
}

/** The metrics of an evaluation's ranks (all 0 when there is no query). */
export function metrics(ranks: ReadonlyArray<number | null>): Metrics {
  const n = ranks.length || 1;
  return {
    r1: ranks.filter((r) => r === 1).length / n,
    r5: ranks.filter((r) => r !== null && r <= 5).length / n,
    mrr: ranks.reduce<number>((s, r) => s + (r === null ? 0 : 1 / r), 0) / n,
  };
}

/**
 * The expected metrics of a uniformly random ranking of `n` candidates of which `r` are
 * relevant: the probability that the first relevant one is at rank k, summed over the ranks
 * each metric counts (drawing without replacement).
 */
export function randomMetrics(n: number, r: number): Metrics {
  let none = 1; // P(no relevant among the first k-1)
  let r1 = 0;
  let r5 = 0;
  let mrr = 0;
  for (let k = 1; k <= Math.min(TOP, n); k++) {
    const first = none * (r / (n - k + 1));
    if (k === 1) r1 = first;
    if (k <= 5) r5 += first;
    mrr += first / k;
    none *= (n - k + 1 - r) / (n - k + 1);
  }
  return { r1, r5, mrr };
}

/** An evaluation's metrics: computed from its ranks, or given (an expected value). */
export function metricsOf(result: ReadonlyArray<number | null> | Metrics): Metrics {
  return "mrr" in result ? result : metrics(result);
}

/**
 * A BM25 ranker over `docs`: each document is `text(doc)`, the query `text(query)`, its
 * terms OR-ed. MiniSearch's scoring (BM25+, Lv and Zhai 2011, with MiniSearch's defaults
 * k = 1.2, b = 0.7, d = 0.5), its default tokenizer (split on spaces and punctuation) and
 * lower-casing; no prefix or fuzzy match. Every document that shares a term is returned.
 */
export function bm25<F extends { id: string }>(docs: readonly F[], text: (f: F) => string): Ranker<F> {
  const index = new MiniSearch<{ id: string; text: string }>({ fields: ["text"], storeFields: [] });
  index.addAll(docs.map((f) => ({ id: f.id, text: text(f) })));
  return (q) => Promise.resolve(index.search(text(q), { combineWith: "OR" }).map((r) => String(r.id)));
}

/** A Markdown table: the cells padded to line up, each line closed by "|". */
export function markdownTable(cells: string[][], align: Array<"left" | "right">): string[] {
  return formatTable(cells, { align, gap: " | ", indent: "| " }).map((line) => `${line} |`);
}

/**
 * The benchmarks' results table: one row per method, recall@1, recall@5 and MRR@20 to three
 * decimals; `nameWidth` is the width of the method column's rule.
 */
export function metricsTable(
  rows: ReadonlyArray<readonly [string, ReadonlyArray<number | null> | Metrics]>,
  nameWidth: number,
): string[] {
  return markdownTable(
    [
      ["method", "recall@1", "recall@5", "MRR@20"],
      ["-".repeat(nameWidth), "--------", "--------", "------"],
      ...rows.map(([name, result]) => {
        const m = metricsOf(result);
        return [name, m.r1.toFixed(3), m.r5.toFixed(3), m.mrr.toFixed(3)];
      }),
    ],
    ["left", "right", "right", "right"],
  );
}
