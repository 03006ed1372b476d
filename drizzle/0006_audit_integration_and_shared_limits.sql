-- Audit rows are inserted without their place in the chain; the integrator assigns seq, prev_hash and
-- hash later, once, in commit order. The old serial `seq` becomes the row id; existing rows keep
-- their chain and get seq = their position in it.
ALTER TABLE "audit_events" DISABLE TRIGGER "audit_events_append_only";--> statement-breakpoint
ALTER TABLE "audit_events" RENAME COLUMN "seq" TO "id";--> statement-breakpoint
ALTER SEQUENCE "audit_events_seq_seq" RENAME TO "audit_events_id_seq";--> statement-breakpoint
ALTER TABLE "audit_events" ADD COLUMN "seq" bigint;--> statement-breakpoint
UPDATE "audit_events" AS a SET "seq" = n.position FROM (SELECT "id", row_number() OVER (ORDER BY "id") AS position FROM "audit_events") AS n WHERE a."id" = n."id";--> statement-breakpoint
ALTER TABLE "audit_events" ALTER COLUMN "prev_hash" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "audit_events" ALTER COLUMN "hash" DROP NOT NULL;--> statement-breakpoint
DROP INDEX "audit_events_proposal_idx";--> statement-breakpoint
CREATE UNIQUE INDEX "audit_events_seq_key" ON "audit_events" USING btree ("seq");--> statement-breakpoint
CREATE INDEX "audit_events_pending_idx" ON "audit_events" USING btree ("id") WHERE "audit_events"."seq" is null;--> statement-breakpoint
CREATE INDEX "audit_events_proposal_idx" ON "audit_events" USING btree ("proposal_id","id");--> statement-breakpoint
-- Append-only, with one exception: the integrator sets the chain columns of a row that has none,
-- and nothing else. History is evidence.
CREATE OR REPLACE FUNCTION twokey_refuse_audit_change() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'UPDATE'
     AND OLD.seq IS NULL AND OLD.prev_hash IS NULL AND OLD.hash IS NULL
     AND NEW.seq IS NOT NULL AND NEW.prev_hash IS NOT NULL AND NEW.hash IS NOT NULL
     AND NEW.id = OLD.id AND NEW.at = OLD.at AND NEW.type = OLD.type AND NEW.actor = OLD.actor
     AND NEW.proposal_id IS NOT DISTINCT FROM OLD.proposal_id
     AND NEW.agent_id IS NOT DISTINCT FROM OLD.agent_id
     AND NEW.data = OLD.data THEN
    RETURN NEW;
  END IF;
  RAISE EXCEPTION 'audit_events is append-only (% refused)', TG_OP USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;--> statement-breakpoint
ALTER TABLE "audit_events" ENABLE TRIGGER "audit_events_append_only";--> statement-breakpoint
CREATE TABLE "audit_checkpoints" (
	"size" bigint PRIMARY KEY NOT NULL,
	"record" text NOT NULL,
	"published_to" text[] DEFAULT '{}'::text[] NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
-- Rate limits shared by replicas: requests per key per fixed window (leased in blocks).
CREATE TABLE "rate_limit_windows" (
	"key" text NOT NULL,
	"window_start" bigint NOT NULL,
	"taken" integer NOT NULL,
	CONSTRAINT "rate_limit_windows_key_window_start_pk" PRIMARY KEY("key","window_start")
);
