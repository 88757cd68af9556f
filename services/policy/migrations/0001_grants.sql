CREATE TABLE "policy"."grants" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"org_id" uuid NOT NULL,
	"vault_id" uuid NOT NULL,
	"secret_path_pattern" text NOT NULL,
	"principal_type" text NOT NULL,
	"principal_id" uuid NOT NULL,
	"permissions" text[] NOT NULL,
	"conditions" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"effect" text DEFAULT 'allow' NOT NULL,
	"priority" integer DEFAULT 0 NOT NULL,
	"expires_at" timestamp with time zone,
	"created_by" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "grants_principal_type" CHECK ("policy"."grants"."principal_type" IN ('user', 'agent')),
	CONSTRAINT "grants_effect" CHECK ("policy"."grants"."effect" IN ('allow', 'deny')),
	CONSTRAINT "grants_permissions" CHECK (cardinality("policy"."grants"."permissions") > 0 AND "policy"."grants"."permissions" <@ ARRAY['read', 'write']::text[])
);
--> statement-breakpoint
CREATE INDEX "grants_vault_principal" ON "policy"."grants" USING btree ("vault_id","principal_type","principal_id");--> statement-breakpoint
CREATE INDEX "grants_principal" ON "policy"."grants" USING btree ("principal_type","principal_id");