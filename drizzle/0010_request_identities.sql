ALTER TABLE "mcp_calls" RENAME TO "request_identities";--> statement-breakpoint
ALTER TABLE "request_identities" DROP CONSTRAINT "mcp_calls_agent_id_agents_id_fk";
--> statement-breakpoint
ALTER TABLE "request_identities" DROP CONSTRAINT "mcp_calls_proposal_id_proposals_id_fk";
--> statement-breakpoint
ALTER TABLE "request_identities" ADD COLUMN "sealed_token" jsonb;--> statement-breakpoint
ALTER TABLE "request_identities" ADD COLUMN "seen_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "request_identities" ADD CONSTRAINT "request_identities_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "request_identities" ADD CONSTRAINT "request_identities_proposal_id_proposals_id_fk" FOREIGN KEY ("proposal_id") REFERENCES "public"."proposals"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "request_identities_proposal_idx" ON "request_identities" USING btree ("proposal_id");--> statement-breakpoint
-- Calls answered before this migration: a final outcome counts as seen, so it is not replayed once more.
UPDATE "request_identities" SET "seen_at" = "request_identities"."updated_at" FROM "proposals" WHERE "proposals"."id" = "request_identities"."proposal_id" AND "proposals"."status" IN ('committed', 'rejected', 'expired', 'cancelled');
