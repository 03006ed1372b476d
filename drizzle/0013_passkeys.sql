CREATE TABLE "passkey_challenges" (
	"nonce" text PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"purpose" text NOT NULL,
	"proposal_id" text,
	"challenge" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"used_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "passkeys" (
	"credential_id" text PRIMARY KEY NOT NULL,
	"owner" text NOT NULL,
	"label" text NOT NULL,
	"public_key" text NOT NULL,
	"counter" bigint NOT NULL,
	"transports" jsonb NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"last_used_at" timestamp with time zone,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "approvals" ADD COLUMN "step_up" jsonb;--> statement-breakpoint
ALTER TABLE "proposals" ADD COLUMN "step_up" text;--> statement-breakpoint
ALTER TABLE "passkey_challenges" ADD CONSTRAINT "passkey_challenges_proposal_id_proposals_id_fk" FOREIGN KEY ("proposal_id") REFERENCES "public"."proposals"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "passkeys_owner_idx" ON "passkeys" USING btree ("owner");