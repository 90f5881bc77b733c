-- One row per failure recall (a recall made with an error text), so `stats` can tell how
-- often memory had the same failure to offer: `hit` when a recalled failure has the query's
-- signature, `with_fix` when that failure carries the reflection that fixed it.

-- Up Migration
CREATE TABLE loopsmith.recalls (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id     text NOT NULL,
  signature   text NOT NULL,
  returned    integer NOT NULL,
  hit         boolean NOT NULL,
  with_fix    boolean NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX recalls_task_idx ON loopsmith.recalls (task_id);

-- Down Migration
DROP TABLE loopsmith.recalls;
