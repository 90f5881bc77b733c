/**
 * The one cut of output for the model: the head and the tail of a text are kept and the middle
 * becomes one note on its own line that says how much was left out and in which unit,
 * `[… 1,234 bytes cut …]` (or `characters`, or `lines`). One-shot over a string (characters,
 * optionally lines first: {@link cutText}), one-shot over bytes ({@link cutBytes},
 * {@link cutUtf8}), and streaming over bytes with bounded memory ({@link CutStream}), which
 * gives exactly what {@link cutBytes} gives on the same bytes however they were chunked.
 */

/** What a cut counts in: UTF-8 bytes, characters (UTF-16 code units, as `string.length`) or lines. */
export type CutUnit = "bytes" | "characters" | "lines";

/** The share of the room a cut keeps at the head unless told otherwise; the tail keeps the rest. */
const DEFAULT_HEAD_SHARE = 0.5;

/**
 * The note that stands where `count` units were cut out, with the newlines that put it on its
 * own line: `\n[… 1,234 bytes cut …]\n`. Its newlines are the note's, never the text's.
 * @param count - how much was left out, in `unit`
 */
export function cutNote(count: number, unit: CutUnit): string {
  return `\n[… ${count.toLocaleString("en-US")} ${unit} cut …]\n`;
}

/** Matches one {@link cutNote} (without its newlines): group 1 the count (with commas), group 2 the unit. */
export const CUT_NOTE_PATTERN = /\[… ([\d,]+) (bytes|characters|lines) cut …\]/;

/** The count and unit of the first {@link cutNote} in `text`, or null when it has none. */
export function findCutNote(text: string): { count: number; unit: CutUnit } | null {
  const m = CUT_NOTE_PATTERN.exec(text);
  return m ? { count: Number((m[1] ?? "").replace(/,/g, "")), unit: m[2] as CutUnit } : null;
}

/** How a cut is sized. */
export interface CutOptions {
  /**
   * The most the result holds, the note included, in the cut's unit (UTF-8 bytes for
   * {@link cutBytes}, {@link cutUtf8} and {@link CutStream}; characters for {@link cutText}).
   * A text within it is returned as it is; when it is smaller than the note, the note alone.
   */
  max: number;
  /** The share of the room kept at the head, from 0 to 1 (default 1/2); the tail keeps the rest. */
  headShare?: number;
}

/** The head and tail lengths of a cut with `room` units for text, in that unit. */
function split(room: number, headShare: number): { head: number; tail: number } {
  const head = Math.floor(room * headShare);
  return { head, tail: room - head };
}

/** Room for the text beside a note counting up to `whole` units, in the note's own measure. */
function roomBeside(max: number, whole: number, unit: CutUnit, measure: (s: string) => number): number {
  return Math.max(0, max - measure(cutNote(whole, unit)));
}

function checkShare(headShare: number): number {
  if (!(headShare >= 0 && headShare <= 1)) throw new RangeError(`headShare must be between 0 and 1, got ${headShare}`);
  return headShare;
}

// ---- bytes -------------------------------------------------------------------------------

const isContinuation = (b: number | undefined): boolean => b !== undefined && (b & 0xc0) === 0x80;

/** Length of the UTF-8 sequence a lead byte starts, 1 for anything that is not a multi-byte lead. */
const sequenceLength = (b: number): number => (b >= 0xf0 && b <= 0xf7 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1);

/** `head` without a multi-byte UTF-8 character its end cuts in two (other bytes are left as they are). */
function wholeHead(head: Buffer): Buffer {
  for (let back = 1; back <= Math.min(3, head.length); back++) {
    const b = head[head.length - back] as number;
    if (isContinuation(b)) continue;
    return sequenceLength(b) > back ? head.subarray(0, head.length - back) : head;
  }
  return head;
}

/** `tail` without the continuation bytes (at most three) of a character its start cuts in two. */
function wholeTail(tail: Buffer): Buffer {
  let skip = 0;
  while (skip < 3 && isContinuation(tail[skip])) skip++;
  return tail.subarray(skip);
}

/**
 * The most bytes of text a cut of `whole` bytes can keep beside its note within `max`: from a
 * `room` that fits (one beside a note counting `whole`), grown while the note of what is left
 * out is shorter than the one reserved (fewer digits), so that a cut fills `max` exactly.
 */
function fullRoom(max: number, whole: number, room: number): number {
  for (;;) {
    const next = max - Buffer.byteLength(cutNote(whole - room, "bytes"));
    if (next <= room) return room;
    room = next;
  }
}

/**
 * The ends a byte cut keeps: the first and last bytes of the room its note leaves, without a
 * character cut in two. `head` and `tail` hold at least those bytes. `exact`: the room is the
 * one the note of what is actually left out leaves (the result is then `max` bytes, unless a
 * character at an end went with the middle); else the one a note counting `whole` leaves (an
 * earlier cut's note may still go with the middle, so the count can grow after sizing).
 */
function keptEnds(
  head: Buffer,
  tail: Buffer,
  whole: number,
  opts: Required<CutOptions>,
  exact: boolean,
): [Buffer, Buffer] {
  const ends = (room: number): [Buffer, Buffer] => {
    const { head: h, tail: t } = split(room, opts.headShare);
    return [wholeHead(head.subarray(0, h)), wholeTail(tail.subarray(Math.max(0, tail.length - t)))];
  };
  const safe = roomBeside(opts.max, whole, "bytes", Buffer.byteLength);
  if (!exact) return ends(safe);
  const kept = ends(fullRoom(opts.max, whole, safe));
  const [h, t] = kept;
  // A character that went with the middle makes the count larger: its note may no longer fit.
  const size = h.length + t.length + Buffer.byteLength(cutNote(whole - h.length - t.length, "bytes"));
  return size <= opts.max ? kept : ends(safe);
}

/** `head`, the note counting what `whole` bytes lose beside the two ends, and `tail`. */
function joinAround(head: Buffer, tail: Buffer, whole: number): Buffer {
  const note = Buffer.from(cutNote(whole - head.length - tail.length, "bytes"), "utf8");
  return Buffer.concat([head, note, tail]);
}

const NOTE_START = Buffer.from("\n[… ", "utf8");
const NOTE_END = Buffer.from(" cut …]\n", "utf8");

/**
 * Keeps the head and the tail of `bytes` within `max` bytes, the note between them saying how
 * many bytes went. A multi-byte UTF-8 character is never cut in two: the head stops before it,
 * the tail starts after it (at most three bytes at either end go with the middle).
 * @param opts - `max` in bytes; `whole`: the size, in bytes, of the output `bytes` stands for
 *   when an earlier cut already took its middle (its note is then cut with the middle, never
 *   kept in part, and the new note counts both cuts); default the length of `bytes`
 * @returns `bytes` itself when it fits, else a new buffer of at most `max` bytes (the note
 *   alone when `max` is smaller than it)
 * @throws RangeError when `headShare` is not between 0 and 1
 */
export function cutBytes(bytes: Buffer, opts: CutOptions & { whole?: number }): Buffer {
  if (bytes.length <= opts.max) return bytes;
  const sized = { max: opts.max, headShare: checkShare(opts.headShare ?? DEFAULT_HEAD_SHARE) };
  const whole = Math.max(opts.whole ?? 0, bytes.length);
  let [head, tail] = keptEnds(bytes, bytes, whole, sized, opts.whole === undefined);
  if (opts.whole !== undefined) {
    // An earlier cut's note lies in the middle: neither end keeps a piece of it.
    const first = bytes.indexOf(NOTE_START);
    if (first >= 0 && first < head.length) head = head.subarray(0, first);
    const last = bytes.lastIndexOf(NOTE_END);
    const after = last + NOTE_END.length;
    if (last >= 0 && bytes.length - tail.length < after) tail = bytes.subarray(after);
  }
  return joinAround(head, tail, whole);
}

/**
 * {@link cutBytes} over the UTF-8 bytes of `text`: at most `opts.max` bytes, the note counting
 * bytes. A string that fits comes back as it is.
 */
export function cutUtf8(text: string, opts: CutOptions & { whole?: number }): string {
  // A string has at least as many UTF-8 bytes as characters: a long one need not be measured.
  if (text.length <= opts.max && Buffer.byteLength(text, "utf8") <= opts.max) return text;
  return cutBytes(Buffer.from(text, "utf8"), opts).toString("utf8");
}

const EMPTY = Buffer.alloc(0);

/**
 * The streaming form of {@link cutBytes}: bytes are written as they arrive; it holds at most
 * about `max` bytes (plus one chunk) however many pass, and {@link CutStream.bytes} returns
 * exactly what `cutBytes` returns on all of them at once (the same head, tail and note).
 */
export class CutStream {
  private readonly max: number;
  private readonly headShare: number;
  /** Bytes the head keeps at most: what the smallest note leaves it. */
  private readonly headCap: number;
  /** Bytes the tail keeps at least. */
  private readonly tailCap: number;
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private tail: Buffer[] = [];
  /** Index of the first live chunk of `tail`. */
  private tailFrom = 0;
  private tailBytes = 0;
  private written = 0;

  /**
   * @param opts - `max` in bytes, the note included
   * @throws RangeError when `headShare` is not between 0 and 1
   */
  constructor(opts: CutOptions) {
    this.max = opts.max;
    this.headShare = checkShare(opts.headShare ?? DEFAULT_HEAD_SHARE);
    // Any note leaves no more room than `max`, and the head's share of a smaller room is no larger.
    this.headCap = split(opts.max, this.headShare).head;
    this.tailCap = opts.max - this.headCap;
  }

  /** Takes the next bytes; returns true once more than `max` bytes have been written. */
  write(chunk: Buffer): boolean {
    this.written += chunk.length;
    if (this.headBytes < this.headCap) {
      const take =
        chunk.length <= this.headCap - this.headBytes ? chunk : chunk.subarray(0, this.headCap - this.headBytes);
      this.head.push(take);
      this.headBytes += take.length;
      chunk = chunk.subarray(take.length);
    }
    if (chunk.length) {
      this.tail.push(chunk);
      this.tailBytes += chunk.length;
      let first = this.tail[this.tailFrom];
      while (first && this.tailBytes - first.length >= this.tailCap) {
        this.tailBytes -= first.length;
        this.tail[this.tailFrom] = EMPTY; // let the dropped chunk go now, not at the next compaction
        first = this.tail[++this.tailFrom];
      }
      if (this.tailFrom > 64 && this.tailFrom * 2 > this.tail.length) {
        this.tail = this.tail.slice(this.tailFrom);
        this.tailFrom = 0;
      }
    }
    return this.written > this.max;
  }

  /** Bytes written in all, those cut included. */
  get total(): number {
    return this.written;
  }

  /** True once more than `max` bytes have been written: {@link CutStream.bytes} is cut. */
  get cut(): boolean {
    return this.written > this.max;
  }

  /** Everything written when it fits `max`, else its head and tail with the note (at most `max` bytes). */
  bytes(): Buffer {
    const live = this.tailFrom ? this.tail.slice(this.tailFrom) : this.tail;
    if (this.written <= this.max) return Buffer.concat([...this.head, ...live], this.written);
    const head = Buffer.concat(this.head, this.headBytes);
    const tail = Buffer.concat(live, this.tailBytes);
    const [h, t] = keptEnds(head, tail, this.written, { max: this.max, headShare: this.headShare }, true);
    return joinAround(h, t, this.written);
  }
}

// ---- characters and lines ------------------------------------------------------------------

const isHighSurrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;
const isLowSurrogate = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff;

/** The first `n` characters of `s`, one fewer when that would cut a surrogate pair in two. */
function headChars(s: string, n: number): string {
  return n > 0 && n < s.length && isHighSurrogate(s.charCodeAt(n - 1)) ? s.slice(0, n - 1) : s.slice(0, n);
}

/** The last `n` characters of `s`, one fewer when that would cut a surrogate pair in two. */
function tailChars(s: string, n: number): string {
  if (n <= 0) return "";
  const from = Math.max(0, s.length - n);
  return from > 0 && isLowSurrogate(s.charCodeAt(from)) ? s.slice(from + 1) : s.slice(from);
}

const chars = (s: string): number => s.length;

/** Lines of `text`: a last line without its newline counts, an empty text has none. */
function lineCount(text: string): number {
  if (text === "") return 0;
  let n = 0;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) n++;
  return text.endsWith("\n") ? n : n + 1;
}

/**
 * Keeps the head and the tail of `text` within `opts.max` characters (UTF-16 code units, as
 * `string.length`; a surrogate pair is never cut in two), the note between them saying how many
 * went. With `lines`, a text of more lines than `lines.head + lines.tail` keeps its first
 * `lines.head` and last `lines.tail` lines and the note counts the lines that went, as long as
 * those lines fit `max`; else they are cut by characters (the head's first share of the room,
 * the tail's last) and the note counts characters.
 * @param opts - `max` in characters, the note included; `lines`: the lines kept at most at the
 *   head and at the tail
 * @returns `text` itself when it is within `max` (and `lines`), else at most `max` characters
 *   (the note alone when `max` is smaller than it)
 * @throws RangeError when `headShare` is not between 0 and 1
 */
export function cutText(text: string, opts: CutOptions & { lines?: { head: number; tail: number } }): string {
  const lines = opts.lines;
  const total = lines ? lineCount(text) : 0;
  const byLines = lines !== undefined && total > lines.head + lines.tail;
  if (!byLines && text.length <= opts.max) return text;
  const headShare = checkShare(opts.headShare ?? DEFAULT_HEAD_SHARE);
  let headSrc = text;
  let tailSrc = text;
  if (byLines) {
    // The newline that ends the last head line is the note's; the tail keeps the text's last newline.
    const all = text.split("\n");
    const end = text.endsWith("\n") ? all.length - 1 : all.length;
    headSrc = all.slice(0, lines.head).join("\n");
    tailSrc = all.slice(end - lines.tail).join("\n");
    const note = cutNote(total - lines.head - lines.tail, "lines");
    if (headSrc.length + note.length + tailSrc.length <= opts.max) return headSrc + note + tailSrc;
  }
  const room = roomBeside(opts.max, text.length, "characters", chars);
  // A head shorter than its share (after a line cut) leaves the rest to the tail.
  const headRoom = Math.min(headSrc.length, split(room, headShare).head);
  const head = headChars(headSrc, headRoom);
  const tail = tailChars(tailSrc, room - headRoom);
  return head + cutNote(text.length - head.length - tail.length, "characters") + tail;
}
