CREATE TABLE "policy"."ip_rules" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"org_id" uuid NOT NULL,
	"cidr" text NOT NULL,
	"rule_type" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"created_by" uuid NOT NULL,
	"created_by_type" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ip_rules_rule_type" CHECK ("policy"."ip_rules"."rule_type" IN ('allow', 'block')),
	CONSTRAINT "ip_rules_created_by_type" CHECK ("policy"."ip_rules"."created_by_type" IN ('user', 'agent'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX "ip_rules_org_cidr_type" ON "policy"."ip_rules" USING btree ("org_id","cidr","rule_type");