-- Each task's usage per LLM role (spec, plan, build, review, reflect), so statistics can
-- break tokens and cost down by role (each role may run its own model at its own price).

-- Up Migration
ALTER TABLE loopsmith.tasks ADD COLUMN usage_by_role jsonb NOT NULL DEFAULT '{}'::jsonb;

-- Down Migration
ALTER TABLE loopsmith.tasks DROP COLUMN usage_by_role;
