/**
 * Plain-text tables for the terminal: columns padded to the widest cell by display width
 * (`string-width`: a CJK character or an emoji takes two columns, ANSI colour codes none), so
 * rows line up whatever the cells hold. No borders: the CLI's and the benches' tables are
 * aligned columns separated by spaces.
 */
import stringWidth from "string-width";

/** Where a cell's text sits in its column. */
export type Align = "left" | "right";

/** How {@link formatTable} lays a table out. */
export interface TableOptions {
  /** Each column's alignment, by index. @defaultValue `"left"` for every column */
  align?: readonly Align[];
  /** Each column's least width in terminal columns, by index (a fixed-width column that may still grow). @defaultValue 0 */
  minWidths?: readonly number[];
  /** Text between two columns. @defaultValue two spaces */
  gap?: string;
  /** Text before each row. @defaultValue "" */
  indent?: string;
}

/** The number of terminal columns `text` takes (wide characters count two, ANSI escape codes none). Pure. */
export function displayWidth(text: string): number {
  return stringWidth(text);
}

/** `text` padded with spaces to `width` terminal columns (see {@link displayWidth}); text already as wide or wider is returned as is. Pure. */
export function padCell(text: string, width: number, align: Align = "left"): string {
  const fill = " ".repeat(Math.max(0, width - displayWidth(text)));
  return align === "right" ? fill + text : text + fill;
}

/**
 * `rows` as lines of aligned columns (no trailing newline): each column as wide as its widest
 * cell or its `minWidths` entry, cells padded by display width. A left-aligned last column is
 * not padded and empty trailing cells are dropped, so no line ends in spaces. Rows may have
 * fewer cells than others. Pure.
 */
export function formatTable(rows: readonly (readonly string[])[], opts: TableOptions = {}): string[] {
  const gap = opts.gap ?? "  ";
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? opts.minWidths?.[i] ?? 0, displayWidth(cell));
    });
  }
  return rows.map((full) => {
    let end = full.length;
    while (end > 0 && full[end - 1] === "" && (opts.align?.[end - 1] ?? "left") === "left") end--;
    const row = full.slice(0, end);
    const cells = row.map((cell, i) => {
      const align = opts.align?.[i] ?? "left";
      return i === row.length - 1 && align === "left" ? cell : padCell(cell, widths[i] ?? 0, align);
    });
    return (opts.indent ?? "") + cells.join(gap);
  });
}
