CREATE TABLE "billing"."org_plans" (
	"org_id" uuid PRIMARY KEY NOT NULL,
	"plan" text NOT NULL,
	"assigned_by" uuid,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "org_plans_plan_known" CHECK ("billing"."org_plans"."plan" in ('free', 'pro', 'business', 'enterprise'))
);
