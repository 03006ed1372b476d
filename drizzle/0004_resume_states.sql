CREATE TABLE "resume_states" (
	"proposal_id" text PRIMARY KEY NOT NULL,
	"agent_id" text NOT NULL,
	"sealed" jsonb NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "resume_states" ADD CONSTRAINT "resume_states_proposal_id_proposals_id_fk" FOREIGN KEY ("proposal_id") REFERENCES "public"."proposals"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "resume_states" ADD CONSTRAINT "resume_states_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE no action ON UPDATE no action;