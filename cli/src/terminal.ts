/**
 * Text for a terminal. Output of sandboxed code (test output, stack traces, test and file
 * names) and model-written text (messages, files) can hold control characters: an ANSI/OSC
 * escape can move the cursor, erase lines, set the window title or, on some terminals, write
 * to the clipboard. Everything the CLI prints for people goes through {@link printable};
 * everything it prints as JSON goes through {@link jsonLine}, which stays lossless.
 */

/**
 * Characters neutralised by {@link printable}: C0 controls except tab and newline, DEL, the
 * C1 controls (U+0080–U+009F; U+009B is an 8-bit CSI on some terminals) and the bidi
 * embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069), which reorder
 * what is shown.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** Characters JSON.stringify leaves raw that a terminal may act on (C0 it escapes itself). */
const JSON_UNSAFE = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function hex(ch: string): string {
  const c = ch.codePointAt(0) ?? 0;
  return c <= 0xff ? `\\x${c.toString(16).padStart(2, "0")}` : `\\u${c.toString(16).padStart(4, "0")}`;
}

/**
 * `text` safe to print on a terminal: every unsafe character (see above) is shown as a
 * visible escape (`ESC` as `\x1b`, a lone carriage return as `\x0d`, U+202E as `\u202e`);
 * newlines, tabs and all other text are kept; `\r\n` line ends become `\n`.
 * Pure; never throws.
 */
export function printable(text: string): string {
  return text.replace(/\r\n/g, "\n").replace(UNSAFE, hex);
}

/**
 * `value` as JSON with no character a terminal acts on: JSON.stringify escapes C0 controls
 * itself; DEL, C1, U+2028/U+2029 and bidi controls are written as `\uXXXX` escapes too.
 * Lossless: `JSON.parse(jsonLine(v))` equals `JSON.parse(JSON.stringify(v))`.
 * @param space - indentation as for JSON.stringify; none (one line) by default
 */
export function jsonLine(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replace(
    JSON_UNSAFE,
    (ch) => `\\u${(ch.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`,
  );
}

/** The stream a {@link LiveBlock} draws on: a terminal's (`process.stdout`). */
export interface LiveStream {
  write(text: string): unknown;
  columns?: number;
  rows?: number;
}

/**
 * Lines kept at the bottom of a terminal and redrawn in place, with text written above them
 * as it comes (the DAG under `solve`'s progress lines). Each change is one write: the cursor
 * goes up over the block, erases to the end of the screen, writes what is new, draws the
 * block again. Its lines must not wrap: cut them to {@link LiveBlock.width} first. A block
 * taller than the terminal is cut, its last line `… n more`. Nothing else may write to the
 * terminal while a block is shown, except through {@link LiveBlock.around}.
 */
export class LiveBlock {
  private lines: string[] = [];
  /** Lines of the block now on screen. */
  private shown = 0;

  constructor(private readonly stream: LiveStream) {}

  /** The characters a line may have without wrapping (at least 20). */
  width(): number {
    return Math.max(20, (this.stream.columns ?? 80) - 1);
  }

  /** Shows `lines` in place of the block's, after writing `above` (one or more lines) above it. */
  set(lines: readonly string[], above?: string): void {
    this.lines = [...lines];
    this.log(above);
  }

  /** Writes `text` (one or more lines) above the block. */
  log(text: string | undefined): void {
    const above = text === undefined ? "" : text.endsWith("\n") ? text : `${text}\n`;
    this.emit(`${this.erase()}${above}${this.draw()}`);
  }

  /** Runs `write` (to another stream of the same terminal, stderr) with the block erased, then draws it again. */
  around(write: () => void): void {
    this.emit(this.erase());
    write();
    this.emit(this.draw());
  }

  /** Erases the block. */
  clear(): void {
    this.lines = [];
    this.emit(this.erase());
  }

  /** Leaves the block on screen as it is, above whatever is written next, and forgets it. */
  release(): void {
    this.lines = [];
    this.shown = 0;
  }

  private emit(text: string): void {
    if (text) this.stream.write(text);
  }

  private erase(): string {
    const up = this.shown;
    this.shown = 0;
    return up ? `\r\x1b[${up}A\x1b[J` : "";
  }

  private draw(): string {
    const max = Math.max(2, (this.stream.rows ?? 24) - 1);
    const lines =
      this.lines.length > max
        ? [...this.lines.slice(0, max - 1), `… ${this.lines.length - (max - 1)} more`]
        : this.lines;
    this.shown = lines.length;
    return lines.length ? `${lines.join("\n")}\n` : "";
  }
}
