CREATE TABLE "readiness_probes" (
	"replica" text PRIMARY KEY NOT NULL,
	"probed_at" timestamp with time zone NOT NULL
);
