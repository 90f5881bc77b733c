import {
  ConnectionError,
  InvalidArgumentError,
  NoRespondersError,
  RequestError,
  TimeoutError,
} from "@nats-io/transport-node";
import { JetStreamApiError } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { isTransientNatsError } from "./nats-errors.js";
import { LoopsmithError } from "../runtime/errors.js";

describe("isTransientNatsError", () => {
  it("takes what passes with a NATS restart or a reconnect (timeouts, no responders, a failed connection, JetStream 503)", () => {
    expect(isTransientNatsError(new TimeoutError())).toBe(true);
    expect(isTransientNatsError(new RequestError("request failed", { cause: new TimeoutError() }))).toBe(true);
    expect(
      isTransientNatsError(
        new RequestError("no responders", { cause: new NoRespondersError("$JS.API.DIRECT.GET.KV_loopsmith_tasks") }),
      ),
    ).toBe(true);
    expect(isTransientNatsError(new ConnectionError("connection refused"))).toBe(true);
    expect(
      isTransientNatsError(
        new JetStreamApiError({ code: 503, err_code: 10008, description: "JetStream system temporarily unavailable" }),
      ),
    ).toBe(true);
  });

  it("leaves what a retry cannot cure: a refused argument, a missing stream, any other error", () => {
    expect(isTransientNatsError(new InvalidArgumentError("payload too large"))).toBe(false);
    expect(
      isTransientNatsError(new JetStreamApiError({ code: 404, err_code: 10059, description: "stream not found" })),
    ).toBe(false);
    expect(isTransientNatsError(new Error("timeout"))).toBe(false);
    expect(isTransientNatsError(new LoopsmithError("internal", "bad"))).toBe(false);
    expect(isTransientNatsError(undefined)).toBe(false);
  });
});
