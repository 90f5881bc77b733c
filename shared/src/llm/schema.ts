/**
 * JSON Schema for structured output, generated from the request's zod schema with
 * `z.toJSONSchema` (zod 4). Tool inputs must be JSON objects, so a schema whose root is
 * not an object is wrapped as `{value: …}` and unwrapped on the way back.
 */
import { z } from "zod";

/** The JSON Schema sent to the provider, and whether the root was wrapped. */
export interface OutputSchema {
  /** A JSON Schema object (draft 2020-12, without `$schema`). */
  jsonSchema: Record<string, unknown>;
  /** True when the root is `{type: "object", properties: {value: <schema>}}`. */
  wrapped: boolean;
}

/**
 * Builds the provider schema. Parts zod cannot express (transforms, custom refinements)
 * become "any"; the zod schema still validates the reply.
 */
export function outputSchema(schema: z.ZodType): OutputSchema {
  const generated = z.toJSONSchema(schema, { unrepresentable: "any", io: "input" }) as Record<string, unknown>;
  delete generated.$schema;
  if (generated.type === "object") return { jsonSchema: generated, wrapped: false };
  return {
    jsonSchema: { type: "object", properties: { value: generated }, required: ["value"] },
    wrapped: true,
  };
}

/** The value inside a wrapped tool input (`input.value`), or `input` when not wrapped. */
export function unwrapValue(input: unknown, wrapped: boolean): unknown {
  if (!wrapped) return input;
  return typeof input === "object" && input !== null ? (input as { value?: unknown }).value : undefined;
}
