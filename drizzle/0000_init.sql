CREATE TABLE "agents" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"key_hash" text NOT NULL,
	"key_prefix" text NOT NULL,
	"callback_secret" text NOT NULL,
	"owners" jsonb NOT NULL,
	"operations" jsonb,
	"created_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "approvals" (
	"proposal_id" text NOT NULL,
	"approver" text NOT NULL,
	"matched_rule" text NOT NULL,
	"via" text NOT NULL,
	"at" timestamp with time zone NOT NULL,
	CONSTRAINT "approvals_proposal_id_approver_pk" PRIMARY KEY("proposal_id","approver")
);
--> statement-breakpoint
CREATE TABLE "audit_events" (
	"seq" bigserial PRIMARY KEY NOT NULL,
	"at" timestamp with time zone NOT NULL,
	"type" text NOT NULL,
	"actor" text NOT NULL,
	"proposal_id" text,
	"agent_id" text,
	"data" jsonb NOT NULL,
	"prev_hash" text NOT NULL,
	"hash" text NOT NULL
);
--> statement-breakpoint
CREATE TABLE "proposals" (
	"id" text PRIMARY KEY NOT NULL,
	"agent_id" text NOT NULL,
	"operation" text NOT NULL,
	"params" jsonb NOT NULL,
	"params_hash" text NOT NULL,
	"summary" text NOT NULL,
	"summary_hash" text NOT NULL,
	"cost" text,
	"confirmation_type" text NOT NULL,
	"token_hash" text NOT NULL,
	"status" text NOT NULL,
	"quorum" integer NOT NULL,
	"commit_mode" text NOT NULL,
	"callback_url" text,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"consumed_at" timestamp with time zone,
	"decided_by" text,
	"decided_at" timestamp with time zone,
	"decision_reason" text,
	"result" jsonb,
	"error" text,
	"execution_attempts" integer DEFAULT 0 NOT NULL,
	"lease_until" timestamp with time zone,
	"updated_at" timestamp with time zone NOT NULL,
	CONSTRAINT "proposals_status_check" CHECK ("proposals"."status" in ('pending','approved','executing','committed','rejected','expired','cancelled'))
);
--> statement-breakpoint
ALTER TABLE "approvals" ADD CONSTRAINT "approvals_proposal_id_proposals_id_fk" FOREIGN KEY ("proposal_id") REFERENCES "public"."proposals"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "proposals" ADD CONSTRAINT "proposals_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "agents_name_key" ON "agents" USING btree ("name");--> statement-breakpoint
CREATE UNIQUE INDEX "agents_key_hash_key" ON "agents" USING btree ("key_hash");--> statement-breakpoint
CREATE INDEX "audit_events_proposal_idx" ON "audit_events" USING btree ("proposal_id","seq");--> statement-breakpoint
CREATE UNIQUE INDEX "proposals_token_hash_key" ON "proposals" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "proposals_agent_idx" ON "proposals" USING btree ("agent_id","created_at");--> statement-breakpoint
CREATE INDEX "proposals_status_idx" ON "proposals" USING btree ("status","expires_at");