CREATE TABLE "identity"."guardrail_revisions" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"org_id" uuid NOT NULL,
	"agent_id" uuid NOT NULL,
	"actor_id" uuid NOT NULL,
	"change" text NOT NULL,
	"before" jsonb NOT NULL,
	"after" jsonb NOT NULL,
	"approval_id" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "identity"."guardrail_revisions" ADD CONSTRAINT "guardrail_revisions_org_id_orgs_id_fk" FOREIGN KEY ("org_id") REFERENCES "identity"."orgs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "identity"."guardrail_revisions" ADD CONSTRAINT "guardrail_revisions_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "identity"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "guardrail_revisions_org_idx" ON "identity"."guardrail_revisions" USING btree ("org_id","created_at");--> statement-breakpoint
CREATE INDEX "guardrail_revisions_agent_idx" ON "identity"."guardrail_revisions" USING btree ("agent_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "guardrail_revisions_approval_idx" ON "identity"."guardrail_revisions" USING btree ("approval_id");