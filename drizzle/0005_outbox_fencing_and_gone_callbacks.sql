CREATE TABLE "disabled_callbacks" (
	"agent_id" text NOT NULL,
	"url" text NOT NULL,
	"disabled_at" timestamp with time zone NOT NULL,
	CONSTRAINT "disabled_callbacks_agent_id_url_pk" PRIMARY KEY("agent_id","url")
);
--> statement-breakpoint
ALTER TABLE "jobs" ADD COLUMN "locked_by" text;--> statement-breakpoint
ALTER TABLE "disabled_callbacks" ADD CONSTRAINT "disabled_callbacks_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE no action ON UPDATE no action;