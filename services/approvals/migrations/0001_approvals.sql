CREATE TABLE "approvals"."approval_votes" (
	"approval_id" uuid NOT NULL,
	"user_id" uuid NOT NULL,
	"role" text NOT NULL,
	"decision" text NOT NULL,
	"credential_type" text NOT NULL,
	"reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "approval_votes_pk" PRIMARY KEY("approval_id","user_id"),
	CONSTRAINT "approval_votes_decision_known" CHECK ("approvals"."approval_votes"."decision" in ('approved', 'rejected'))
);
--> statement-breakpoint
CREATE TABLE "approvals"."approvals" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"org_id" uuid NOT NULL,
	"agent_id" uuid,
	"user_id" uuid,
	"action" text NOT NULL,
	"target_type" text NOT NULL,
	"target_id" text NOT NULL,
	"summary" jsonb NOT NULL,
	"payload" jsonb,
	"reason" text,
	"declared_risk_tier" integer,
	"risk_tier" integer NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"kind" text DEFAULT 'single' NOT NULL,
	"requirement" jsonb,
	"preview" jsonb,
	"rule" jsonb,
	"decision_reason" text,
	"decided_by" uuid,
	"decided_at" timestamp with time zone,
	"credential_type" text,
	"expires_at" timestamp with time zone NOT NULL,
	"executed_at" timestamp with time zone,
	"executed_by" uuid,
	"consumed_at" timestamp with time zone,
	"consumed_by" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "approvals_status_known" CHECK ("approvals"."approvals"."status" in ('pending', 'approved', 'rejected', 'expired', 'executed')),
	CONSTRAINT "approvals_kind_known" CHECK ("approvals"."approvals"."kind" in ('single', 'consensus')),
	CONSTRAINT "approvals_risk_tier_range" CHECK ("approvals"."approvals"."risk_tier" between 1 and 3),
	CONSTRAINT "approvals_declared_tier_range" CHECK ("approvals"."approvals"."declared_risk_tier" is null or "approvals"."approvals"."declared_risk_tier" between 1 and 3),
	CONSTRAINT "approvals_consensus_has_requirement" CHECK (("approvals"."approvals"."kind" = 'consensus') = ("approvals"."approvals"."requirement" is not null)),
	CONSTRAINT "approvals_executed_is_consensus" CHECK ("approvals"."approvals"."status" <> 'executed' or "approvals"."approvals"."kind" = 'consensus')
);
--> statement-breakpoint
ALTER TABLE "approvals"."approval_votes" ADD CONSTRAINT "approval_votes_approval_id_approvals_id_fk" FOREIGN KEY ("approval_id") REFERENCES "approvals"."approvals"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "approvals_org_status_created" ON "approvals"."approvals" USING btree ("org_id","status","created_at");--> statement-breakpoint
CREATE INDEX "approvals_org_agent_created" ON "approvals"."approvals" USING btree ("org_id","agent_id","created_at");--> statement-breakpoint
CREATE INDEX "approvals_open_expires" ON "approvals"."approvals" USING btree ("expires_at") WHERE "approvals"."approvals"."status" in ('pending', 'approved', 'executed') and "approvals"."approvals"."consumed_at" is null;