CREATE TABLE "email_links" (
	"token_hash" text PRIMARY KEY NOT NULL,
	"proposal_id" text NOT NULL,
	"approver" text NOT NULL,
	"binding_hash" text NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"used_at" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "email_messages" (
	"proposal_id" text NOT NULL,
	"recipient" text NOT NULL,
	"message_id" text NOT NULL,
	"subject" text NOT NULL,
	"sent_at" timestamp with time zone,
	"outcome_sent_at" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "email_messages_proposal_id_recipient_pk" PRIMARY KEY("proposal_id","recipient")
);
--> statement-breakpoint
ALTER TABLE "email_links" ADD CONSTRAINT "email_links_proposal_id_proposals_id_fk" FOREIGN KEY ("proposal_id") REFERENCES "public"."proposals"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "email_messages" ADD CONSTRAINT "email_messages_proposal_id_proposals_id_fk" FOREIGN KEY ("proposal_id") REFERENCES "public"."proposals"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "email_links_proposal_idx" ON "email_links" USING btree ("proposal_id");