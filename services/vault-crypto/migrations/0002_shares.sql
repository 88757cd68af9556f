CREATE TABLE "vault_crypto"."shares" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"org_id" uuid NOT NULL,
	"secret_version_id" uuid NOT NULL,
	"vault_id" uuid NOT NULL,
	"path" text NOT NULL,
	"created_by" uuid NOT NULL,
	"created_by_type" text NOT NULL,
	"recipient_type" text NOT NULL,
	"recipient_id" uuid,
	"recipient_email" text,
	"passphrase_hash" text,
	"ip_allowlist" jsonb,
	"expires_at" timestamp with time zone NOT NULL,
	"max_access_count" integer NOT NULL,
	"access_count" integer DEFAULT 0 NOT NULL,
	"passphrase_attempts" integer DEFAULT 0 NOT NULL,
	"accepted_at" timestamp with time zone,
	"declined_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "shares_org_created" ON "vault_crypto"."shares" USING btree ("org_id","created_at");--> statement-breakpoint
CREATE INDEX "shares_creator" ON "vault_crypto"."shares" USING btree ("created_by","created_at");--> statement-breakpoint
CREATE INDEX "shares_recipient" ON "vault_crypto"."shares" USING btree ("recipient_id") WHERE "vault_crypto"."shares"."recipient_id" IS NOT NULL;