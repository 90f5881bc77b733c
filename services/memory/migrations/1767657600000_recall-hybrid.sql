-- Hybrid recall of failures: full-text search beside pgvector, fused by reciprocal rank.
-- Each failure keeps the parts its embedding is made of (services/memory/src/embed-text.ts:
-- goal, error signature key and failing tests, failing code), as lower-case words, and a
-- generated tsvector per part (the `simple` configuration: no stemming, no stop words, so a
-- query made of the same words matches them exactly). `code` keeps the failing code as given;
-- `signature_key` the full signature (headline, test, assertion, frame in candidate code).
-- Rows stored before this migration get their goal and signature as words.

-- Up Migration
ALTER TABLE loopsmith.failures
  ADD COLUMN code text NOT NULL DEFAULT '',
  ADD COLUMN signature_key text NOT NULL DEFAULT '',
  ADD COLUMN recall_goal text NOT NULL DEFAULT '',
  ADD COLUMN recall_error text NOT NULL DEFAULT '',
  ADD COLUMN recall_code text NOT NULL DEFAULT '';

UPDATE loopsmith.failures SET
  signature_key = signature,
  recall_goal = left(btrim(regexp_replace(lower(goal), '[^a-z0-9]+', ' ', 'g')), 2000),
  recall_error = btrim(regexp_replace(lower(signature), '[^a-z0-9]+', ' ', 'g'));

ALTER TABLE loopsmith.failures
  ADD COLUMN fts_goal tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, recall_goal)) STORED,
  ADD COLUMN fts_error tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, recall_error)) STORED,
  ADD COLUMN fts_code tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, recall_code)) STORED;

CREATE INDEX failures_fts_goal_idx ON loopsmith.failures USING gin (fts_goal);
CREATE INDEX failures_fts_error_idx ON loopsmith.failures USING gin (fts_error);
CREATE INDEX failures_fts_code_idx ON loopsmith.failures USING gin (fts_code);
-- Failures with exactly the same full signature (hashed: a key can be long).
CREATE INDEX failures_signature_key_idx ON loopsmith.failures (md5(signature_key));
-- The success that followed a failure in its task (what fixed it), found by task and iteration.
CREATE INDEX successes_task_idx ON loopsmith.successes (task_id, iteration);

-- Down Migration
DROP INDEX loopsmith.successes_task_idx;
DROP INDEX loopsmith.failures_signature_key_idx;
ALTER TABLE loopsmith.failures
  DROP COLUMN fts_code, DROP COLUMN fts_error, DROP COLUMN fts_goal,
  DROP COLUMN recall_code, DROP COLUMN recall_error, DROP COLUMN recall_goal,
  DROP COLUMN signature_key, DROP COLUMN code;
