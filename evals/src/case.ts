/**
 * A dataset task as `loopsmith bench` sees it: the case a dataset line becomes
 * (`loadDataset`, datasets.ts), whatever the dataset's format.
 */
import { z } from "zod";
import { FileChange, Language } from "@loopsmith/shared/contracts";

/** The dataset formats `bench` reads. */
export const DatasetFormat = z.enum(["humaneval", "mbpp", "jsbench"]);
export type DatasetFormat = z.infer<typeof DatasetFormat>;

/**
 * One dataset task. `visibleTests` go into the task's acceptance tests (the model sees
 * them); `hiddenTests` go into `Task.hiddenTests` only (never a prompt) and score the final
 * candidate once. `solution` is the reference file; only the scripted and simulated
 * providers answer from it.
 */
export const BenchCase = z.object({
  /** Dataset id: `HumanEval/12`, `mbpp/11`, `js/3`. */
  id: z.string().min(1),
  format: DatasetFormat,
  language: Language,
  goal: z.string().min(1),
  /** The starting workspace (for HumanEval, `solution.py` holding the prompt). */
  files: z.array(FileChange),
  visibleTests: z.array(FileChange).min(1),
  hiddenTests: z.array(FileChange).min(1),
  /** Path of the file the candidate is. */
  solutionPath: z.string().min(1),
  /** The reference content of that file. */
  solution: z.string(),
  /** The function under test. */
  entryPoint: z.string().min(1),
  /** 1-based line of the dataset file. */
  line: z.number().int().positive(),
});
export type BenchCase = z.infer<typeof BenchCase>;

/** A dataset line that could not be used: its 1-based line number and why. */
export interface SkippedLine {
  line: number;
  message: string;
}
