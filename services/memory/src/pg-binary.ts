/**
 * Vectors in PostgreSQL's binary format, for bulk inserts: a `vector[]` parameter (and COPY
 * fields) of 4-byte floats instead of decimal text. Formatting 256 doubles as text and parsing
 * them back costs more than the rest of a row's insert (per 1,000 rows: 150 ms on PostgreSQL,
 * 500 ms on PGlite; the binary array, 11 ms).
 *
 * The floats are those PostgreSQL stores for the text form pgvector's `toSql` sends
 * (`JSON.stringify`, parsed by pgvector's `vector_in` with `strtof`): see {@link float4Of}.
 * So a row stored through these encoders has the same vector, bit for bit, as one stored
 * from text.
 */
import { endianness } from "node:os";
import type pg from "pg";
import { LoopsmithError } from "@loopsmith/shared/runtime";

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);
/** 2^-149: the smallest 4-byte float above zero. */
const MIN_FLOAT4 = 2 ** -149;

/** `x` rounded to a 4-byte float, a step of one float toward `x` from `f` (= fround(x) ≠ x). */
function neighbourTowards(f: number, x: number): number {
  if (f === 0) return x > 0 ? MIN_FLOAT4 : -MIN_FLOAT4;
  F32[0] = f;
  // Sign and magnitude: one more in the bits is one step away from zero.
  U32[0] = (U32[0] ?? 0) + (Math.abs(x) > Math.abs(f) ? 1 : -1);
  return F32[0] ?? 0;
}

/**
 * Whether the decimal number `text` (JavaScript's shortest round-trip form of a finite double,
 * e.g. `1.0000000596046448` or `-3.1e-7`) is above, equal to or below the double `x` it stands
 * for, compared exactly.
 * @returns 1, 0 or -1
 */
function compareDecimal(text: string, x: number): number {
  const m = /^-?(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(text);
  if (!m) throw new LoopsmithError("internal", `unexpected number text ${text}`);
  const frac = m[2] ?? "";
  const digits = BigInt(`${m[1] ?? "0"}${frac}`);
  const exp10 = Number(m[3] ?? 0) - frac.length;
  // |x| = mantissa * 2^exp2, exactly.
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  const hi = view.getUint32(0);
  const biased = hi >>> 20;
  const fraction = (BigInt(hi & 0xfffff) << 32n) | BigInt(view.getUint32(4));
  const mantissa = biased === 0 ? fraction : fraction | (1n << 52n);
  const exp2 = (biased === 0 ? 1 : biased) - 1075;
  let left = digits * 10n ** BigInt(Math.max(exp10, 0)) * 2n ** BigInt(Math.max(-exp2, 0));
  let right = mantissa * 2n ** BigInt(Math.max(exp2, 0)) * 10n ** BigInt(Math.max(-exp10, 0));
  if (x < 0) [left, right] = [right, left];
  return left > right ? 1 : left < right ? -1 : 0;
}

/**
 * The 4-byte float PostgreSQL stores for the number `x` sent as text, as pgvector's `toSql`
 * sends it: `strtof` (correctly rounded) of `String(x)`. That is `Math.fround(x)`, except
 * when `x` lies exactly halfway between two 4-byte floats: then the side of `x` its shortest
 * decimal form falls on decides (where `fround` rounds to even). `-0` becomes `0`, as `String(-0)`
 * is `"0"`. Non-finite numbers and numbers beyond the 4-byte range come back infinite or NaN
 * (PostgreSQL refuses those, in text and binary alike).
 * @param x - a number, as an embedder returns it
 * @returns the stored 4-byte float, as a number
 */
export function float4Of(x: number): number {
  const f = Math.fround(x);
  if (f === x || !Number.isFinite(f)) return f === 0 ? 0 : f;
  // x is halfway between f and g only if 2x - f (= g) is a 4-byte float itself: a cheap test
  // that passes for every halfway x (and for few others), checked exactly below.
  const twice = 2 * x - f;
  if (Math.fround(twice) !== twice) return f === 0 ? 0 : f;
  const g = neighbourTowards(f, x);
  if (x !== (f + g) / 2) return f === 0 ? 0 : f;
  // strtof takes the float on the decimal's side of x (on x itself: the even one, as fround).
  const side = compareDecimal(String(x), x);
  const chosen = side === 0 ? f : side > 0 ? Math.max(f, g) : Math.min(f, g);
  return chosen === 0 ? 0 : chosen;
}

/** Bytes of one vector in pgvector's binary format: int16 dimensions, int16 zero, float4s. */
export function vectorBytes(dimensions: number): number {
  return 4 + 4 * dimensions;
}

/** Whether this machine stores floats little-endian (the wire wants big-endian). */
const LITTLE_ENDIAN = endianness() === "LE";
let scratch = new Float32Array(0);

/**
 * Writes `vector` in pgvector's binary format (`vector_recv`: int16 dimensions, int16 zero,
 * then each {@link float4Of} big-endian) into `buf` at `offset`.
 * @returns the offset after it
 * @throws LoopsmithError `internal` when the vector is not `dimensions` long
 */
export function writeVector(buf: Buffer, offset: number, vector: readonly number[], dimensions: number): number {
  if (vector.length !== dimensions) {
    throw new LoopsmithError("internal", `a vector of ${vector.length} numbers where ${dimensions} were expected`);
  }
  let o = buf.writeInt16BE(dimensions, offset);
  o = buf.writeInt16BE(0, o);
  if (scratch.length !== dimensions) scratch = new Float32Array(dimensions);
  for (let i = 0; i < dimensions; i++) scratch[i] = float4Of(vector[i] ?? 0);
  // The floats' bytes in one copy, then each 4 reversed in place (native, not one call a float).
  const bytes = Buffer.from(scratch.buffer, scratch.byteOffset, 4 * dimensions);
  bytes.copy(buf, o);
  if (LITTLE_ENDIAN) buf.subarray(o, o + 4 * dimensions).swap32();
  return o + 4 * dimensions;
}

/**
 * A one-dimensional `vector[]` in PostgreSQL's binary array format (`array_recv`), to send as a
 * query parameter (`pg` sends a Buffer parameter as binary): `unnest($1::vector[])`.
 * @param vectorOid - the oid of the `vector` type in this database ({@link vectorTypeOid})
 * @returns the parameter's bytes (20 + vectors × (8 + 4 × dimensions))
 * @throws LoopsmithError `internal` when a vector is not `dimensions` long
 */
export function vectorArrayParam(
  vectors: ReadonlyArray<readonly number[]>,
  dimensions: number,
  vectorOid: number,
): Buffer {
  const size = vectorBytes(dimensions);
  const buf = Buffer.allocUnsafe(20 + vectors.length * (4 + size));
  let o = buf.writeInt32BE(1, 0); // dimensions of the array
  o = buf.writeInt32BE(0, o); // no NULL elements
  o = buf.writeUInt32BE(vectorOid, o);
  o = buf.writeInt32BE(vectors.length, o);
  o = buf.writeInt32BE(1, o); // lower bound
  for (const v of vectors) {
    o = buf.writeInt32BE(size, o);
    o = writeVector(buf, o, v, dimensions);
  }
  return buf;
}

const oids = new WeakMap<pg.Pool, Promise<number>>();

/**
 * The oid of pgvector's `vector` type as the pool's connections resolve `vector` (a binary
 * array names its element type by oid). Looked up once per pool; a failed look-up is not kept.
 * @throws the database's error, untyped (callers wrap it in `db_error`)
 */
export function vectorTypeOid(pool: pg.Pool): Promise<number> {
  let oid = oids.get(pool);
  if (!oid) {
    oid = pool.query<{ oid: number }>("SELECT to_regtype('vector')::oid::int8 AS oid").then(({ rows }) => {
      const value = Number(rows[0]?.oid ?? 0);
      if (!(value > 0)) throw new LoopsmithError("db_error", "memory's database has no vector type (pgvector)");
      return value;
    });
    void oid.catch(() => oids.delete(pool));
    oids.set(pool, oid);
  }
  return oid;
}

/** How {@link copyBinary} encodes a column's values (PostgreSQL's binary `*_recv` formats). */
export type CopyKind = "text" | "int4" | "jsonb" | "vector";
/** One value of a {@link copyBinary} row: a string (text, jsonb), a number (int4), a vector, or null. */
export type CopyValue = string | number | readonly number[] | null;

/** `COPY … FROM STDIN (FORMAT binary)`'s signature, flags and header extension length. */
const COPY_HEADER = Buffer.concat([Buffer.from("PGCOPY\n\xff\r\n\0", "latin1"), Buffer.alloc(8)]);

/**
 * Rows in the binary format of `COPY … FROM STDIN (FORMAT binary)`: header, each row, trailer.
 * Text is sent as UTF-8 (the connection's client encoding), `jsonb` as its version byte 1 and
 * the JSON text, `int4` as 4 bytes, vectors as {@link writeVector}; `null` is SQL NULL.
 * @param kinds - each column's kind, in the COPY's column order
 * @param rows - values in the same order as `kinds`
 * @param dimensions - length of every vector
 * @returns the whole COPY data
 * @throws LoopsmithError `internal` when a row has another number of values than `kinds`, or a
 *   value does not fit its kind
 */
export function copyBinary(
  kinds: readonly CopyKind[],
  rows: ReadonlyArray<readonly CopyValue[]>,
  dimensions: number,
): Buffer {
  const bad = (what: string): never => {
    throw new LoopsmithError("internal", `COPY: ${what}`);
  };
  // First pass: sizes (UTF-8 lengths kept for the second).
  const lengths: number[] = [];
  let size = COPY_HEADER.length + 2;
  for (const row of rows) {
    if (row.length !== kinds.length) bad(`a row of ${row.length} values for ${kinds.length} columns`);
    size += 2;
    for (let c = 0; c < kinds.length; c++) {
      const v = row[c] ?? null;
      size += 4;
      if (v === null) continue;
      const kind = kinds[c];
      if (kind === "text" || kind === "jsonb") {
        if (typeof v !== "string") bad(`column ${c} needs a string`);
        const n = Buffer.byteLength(v as string, "utf8");
        lengths.push(n);
        size += n + (kind === "jsonb" ? 1 : 0);
      } else if (kind === "int4") {
        if (typeof v !== "number" || !Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31)
          bad(`column ${c} needs a 32-bit integer`);
        size += 4;
      } else {
        if (!Array.isArray(v)) bad(`column ${c} needs a vector`);
        size += vectorBytes(dimensions);
      }
    }
  }
  const buf = Buffer.allocUnsafe(size);
  let o = COPY_HEADER.copy(buf, 0);
  let l = 0;
  for (const row of rows) {
    o = buf.writeInt16BE(kinds.length, o);
    for (let c = 0; c < kinds.length; c++) {
      const v = row[c] ?? null;
      const kind = kinds[c];
      if (v === null) {
        o = buf.writeInt32BE(-1, o);
      } else if (kind === "text" || kind === "jsonb") {
        const n = lengths[l++] ?? 0;
        o = buf.writeInt32BE(kind === "jsonb" ? n + 1 : n, o);
        if (kind === "jsonb") o = buf.writeUInt8(1, o);
        o += buf.write(v as string, o, n, "utf8");
      } else if (kind === "int4") {
        o = buf.writeInt32BE(4, o);
        o = buf.writeInt32BE(v as number, o);
      } else {
        o = buf.writeInt32BE(vectorBytes(dimensions), o);
        o = writeVector(buf, o, v as readonly number[], dimensions);
      }
    }
  }
  o = buf.writeInt16BE(-1, o);
  if (o !== size) bad(`wrote ${o} of ${size} bytes`);
  return buf;
}
