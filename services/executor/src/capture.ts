/**
 * Capture of a container's output: demultiplexes Docker's attach stream (8-byte frame
 * headers), keeps at most `limitBytes` of stdout and of stderr each (past the cap, the head and
 * the tail with the shared cut note, `CutStream` in `@loopsmith/shared/text`), and splits the
 * supervisor's trailer (a per-run marker, then one JSON line) off the end of stdout.
 */
import { CutStream } from "@loopsmith/shared/text";

/** Docker's stream ids in a multiplexed attach stream. */
const STDOUT = 1;
const STDERR = 2;

/** Largest trailer accepted, in bytes (it carries the base64 result file). */
export const TRAILER_LIMIT_BYTES = 24 * 1024 * 1024;

/** Why capture asked the caller to act: stop the container, or the report is complete. */
export type CaptureEvent = "output_limit" | "trailer" | "trailer_too_large";

/**
 * One output stream: capped bytes before the marker; after it, on stdout, the trailer line.
 * Bytes that could be the start of the marker are held back until they are not.
 */
class Stream {
  readonly sink: CutStream;
  private held = Buffer.alloc(0);
  /** Bytes after the marker, or null while it has not been seen. */
  after: Buffer[] | null = null;
  afterBytes = 0;

  constructor(
    limit: number,
    private readonly marker: Buffer,
    private readonly onLimit: () => void,
  ) {
    this.sink = new CutStream({ max: limit });
  }

  /** Feeds bytes; returns the bytes that came after the marker in this chunk (if it was seen). */
  push(chunk: Buffer): void {
    if (this.after) {
      this.after.push(chunk);
      this.afterBytes += chunk.length;
      return;
    }
    const data = this.held.length ? Buffer.concat([this.held, chunk]) : chunk;
    const at = data.indexOf(this.marker);
    if (at >= 0) {
      this.emit(data.subarray(0, at));
      this.held = Buffer.alloc(0);
      const rest = data.subarray(at + this.marker.length);
      this.after = [rest];
      this.afterBytes = rest.length;
      return;
    }
    const keep = Math.min(data.length, this.marker.length - 1);
    this.held = Buffer.from(data.subarray(data.length - keep));
    this.emit(data.subarray(0, data.length - keep));
  }

  private emit(bytes: Buffer): void {
    if (bytes.length && this.sink.write(bytes)) this.onLimit();
  }

  /** Releases held-back bytes (the stream ended without the marker). */
  end(): void {
    if (!this.after && this.held.length) {
      this.emit(this.held);
      this.held = Buffer.alloc(0);
    }
  }
}

/**
 * Collects one run's output. Feed it raw attach-stream bytes with {@link Capture.write}.
 * The supervisor ends stderr with the marker and stdout with the marker plus a JSON line;
 * `onEvent("trailer")` fires once both have arrived (each pipe is in order, so nothing of
 * the command's output can still be on its way), `output_limit` when a cap is passed.
 */
export class Capture {
  private readonly out: Stream;
  private readonly err: Stream;
  private header = Buffer.alloc(0);
  private frameType = 0;
  private frameLeft = 0;
  private limitHit = false;
  private done = false;
  private tooLarge = false;

  /**
   * @param limitBytes - cap of stdout and of stderr, each, in bytes (the cut note included)
   * @param marker - the per-run marker that ends the command's output on both streams
   * @param onEvent - called when the cap is first passed, or the report is complete
   */
  constructor(
    limitBytes: number,
    marker: string,
    private readonly onEvent: (event: CaptureEvent) => void,
  ) {
    const m = Buffer.from(marker, "utf8");
    this.out = new Stream(limitBytes, m, () => this.hitLimit());
    this.err = new Stream(limitBytes, m, () => this.hitLimit());
  }

  // Not docker.modem.demuxStream: it holds each frame whole until its last byte (a header may announce 4 GiB) so the cap could not be counted while streaming, it needs a 'data' stream, not this per-run sink, and turns an unknown frame type into raw stdout.
  /** Feeds raw bytes of a multiplexed (non-TTY) attach stream. */
  write(data: Buffer): void {
    let pos = 0;
    while (pos < data.length) {
      if (this.frameLeft === 0) {
        const need = 8 - this.header.length;
        this.header = Buffer.concat([this.header, data.subarray(pos, pos + need)]);
        pos += Math.min(need, data.length - pos);
        if (this.header.length < 8) return;
        this.frameType = this.header[0] ?? 0;
        this.frameLeft = this.header.readUInt32BE(4);
        this.header = Buffer.alloc(0);
        continue;
      }
      const take = Math.min(this.frameLeft, data.length - pos);
      const chunk = data.subarray(pos, pos + take);
      pos += take;
      this.frameLeft -= take;
      if (this.frameType === STDERR) this.err.push(chunk);
      else if (this.frameType === STDOUT) this.out.push(chunk);
    }
    this.check();
  }

  private check(): void {
    if (this.done || this.tooLarge || !this.out.after) return;
    if (this.out.afterBytes > TRAILER_LIMIT_BYTES) {
      this.tooLarge = true;
      this.onEvent("trailer_too_large");
      return;
    }
    if (this.err.after && this.out.after.some((c) => c.includes(0x0a))) {
      this.done = true;
      this.onEvent("trailer");
    }
  }

  private hitLimit(): void {
    if (this.limitHit) return;
    this.limitHit = true;
    this.onEvent("output_limit");
  }

  /** Call when the stream ended: releases held-back bytes. */
  end(): void {
    this.out.end();
    this.err.end();
  }

  /** True when stdout or stderr passed the cap. */
  get truncated(): boolean {
    return this.limitHit;
  }

  /** The captured stdout, without the trailer: all of it, or past the cap its head and tail with the cut note (at most the cap, in bytes). */
  stdout(): Buffer {
    return this.out.sink.bytes();
  }

  /** The captured stderr, without the end marker: all of it, or past the cap its head and tail with the cut note (at most the cap, in bytes). */
  stderr(): Buffer {
    return this.err.sink.bytes();
  }

  /** The trailer's JSON text (up to its newline), or null when none arrived whole. */
  trailer(): string | null {
    if (!this.out.after || this.tooLarge) return null;
    const text = Buffer.concat(this.out.after).toString("utf8");
    const nl = text.indexOf("\n");
    return nl < 0 ? null : text.slice(0, nl);
  }
}
