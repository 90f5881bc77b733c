import { describe, expect, it } from "vitest";
import { hasCode } from "@loopsmith/shared/runtime";
import { BUILTIN_ENV, instanceImage, officialImage, resolveEnv } from "./env.js";

const inst = { instance_id: "django__django-11099", repo: "django/django", version: "3.0" };

describe("instance images", () => {
  it("names the official image as the harness does: __ to _1776_, lower case, latest", () => {
    expect(officialImage("django__django-11099")).toBe("swebench/sweb.eval.x86_64.django_1776_django-11099:latest");
    expect(officialImage("Foo__Bar-1")).toBe("swebench/sweb.eval.x86_64.foo_1776_bar-1:latest");
  });

  it("runs in loopsmith's image when nothing names one", () => {
    expect(instanceImage(inst, resolveEnv(BUILTIN_ENV, inst.repo, inst.version))).toBeUndefined();
  });

  it("takes --images official with the official prologue and /testbed", () => {
    expect(instanceImage(inst, {}, "official")).toEqual({
      name: "swebench/sweb.eval.x86_64.django_1776_django-11099:latest",
      workdir: "/testbed",
      prologue: "source /opt/miniconda3/bin/activate && conda activate testbed",
    });
  });

  it("fills a template, lets the instance's image_name win, and the environment file set the prologue and workdir", () => {
    expect(instanceImage(inst, {}, "mirror.example:5000/swe/{instance_id}:v{version}")?.name).toBe(
      "mirror.example:5000/swe/django__django-11099:v3.0",
    );
    expect(instanceImage({ ...inst, image_name: "jefzda/sweap-images:django" }, {}, "official")?.name).toBe(
      "jefzda/sweap-images:django",
    );
    const own = instanceImage(inst, { image: "my/{instance_id}", prologue: ". /venv/bin/activate", workdir: "/app" });
    expect(own).toEqual({ name: "my/django__django-11099", workdir: "/app", prologue: ". /venv/bin/activate" });
  });

  it("refuses a name that is no image reference, naming the instance", () => {
    let err: unknown;
    try {
      instanceImage(inst, {}, "Not An Image/{instance_id}");
    } catch (e) {
      err = e;
    }
    expect(hasCode(err, "bad_request")).toBe(true);
    expect((err as Error).message).toContain("django__django-11099");
  });
});
