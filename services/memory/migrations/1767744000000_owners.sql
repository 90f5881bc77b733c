-- Owners: every task and stored failure belongs to the client that submitted its task (the
-- owner token of the subjects it used; shared/src/subjects.ts). History, runs, failure lists
-- and statistics are read per owner. Rows recorded before owners existed belong to `client`,
-- the default client user.

-- Up Migration
ALTER TABLE loopsmith.tasks ADD COLUMN owner text NOT NULL DEFAULT 'client';
ALTER TABLE loopsmith.failures ADD COLUMN owner text NOT NULL DEFAULT 'client';
CREATE INDEX tasks_owner_finished_at_idx ON loopsmith.tasks (owner, finished_at DESC);
CREATE INDEX failures_owner_task_idx ON loopsmith.failures (owner, task_id);

-- Down Migration
DROP INDEX loopsmith.failures_owner_task_idx;
DROP INDEX loopsmith.tasks_owner_finished_at_idx;
ALTER TABLE loopsmith.failures DROP COLUMN owner;
ALTER TABLE loopsmith.tasks DROP COLUMN owner;
