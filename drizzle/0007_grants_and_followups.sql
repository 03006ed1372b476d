CREATE TABLE "grant_approvals" (
	"grant_id" text NOT NULL,
	"approver" text NOT NULL,
	"matched_rule" text NOT NULL,
	"via" text NOT NULL,
	"at" timestamp with time zone NOT NULL,
	CONSTRAINT "grant_approvals_grant_id_approver_pk" PRIMARY KEY("grant_id","approver")
);
--> statement-breakpoint
CREATE TABLE "grants" (
	"id" text PRIMARY KEY NOT NULL,
	"operation" text NOT NULL,
	"agent_id" text NOT NULL,
	"source_proposal_id" text,
	"quorum" integer NOT NULL,
	"bounds" jsonb NOT NULL,
	"max_uses" integer,
	"uses" integer DEFAULT 0 NOT NULL,
	"duration_ms" integer NOT NULL,
	"created_by" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"activated_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	"revoked_by" text,
	CONSTRAINT "grants_uses_check" CHECK ("grants"."max_uses" is null or "grants"."uses" <= "grants"."max_uses")
);
--> statement-breakpoint
ALTER TABLE "proposals" ADD COLUMN "approvers" jsonb;--> statement-breakpoint
ALTER TABLE "proposals" ADD COLUMN "reminders" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "proposals" ADD COLUMN "escalated_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "grant_approvals" ADD CONSTRAINT "grant_approvals_grant_id_grants_id_fk" FOREIGN KEY ("grant_id") REFERENCES "public"."grants"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "grants" ADD CONSTRAINT "grants_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "grants" ADD CONSTRAINT "grants_source_proposal_id_proposals_id_fk" FOREIGN KEY ("source_proposal_id") REFERENCES "public"."proposals"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "grants_lookup_idx" ON "grants" USING btree ("agent_id","operation","expires_at");