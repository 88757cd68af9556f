CREATE TABLE "vault_crypto"."org_keys" (
	"org_id" uuid NOT NULL,
	"version" integer NOT NULL,
	"wrapped_key" "bytea" NOT NULL,
	"provider" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "org_keys_org_id_version_pk" PRIMARY KEY("org_id","version")
);
--> statement-breakpoint
CREATE TABLE "vault_crypto"."secret_versions" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"vault_id" uuid NOT NULL,
	"org_id" uuid NOT NULL,
	"path" text NOT NULL,
	"version" integer NOT NULL,
	"type" text NOT NULL,
	"ciphertext" "bytea" NOT NULL,
	"iv" "bytea" NOT NULL,
	"tag" "bytea" NOT NULL,
	"wrapped_data_key" "bytea" NOT NULL,
	"kek_version" integer NOT NULL,
	"metadata" jsonb,
	"expires_at" timestamp with time zone,
	"max_access_count" bigint,
	"access_count" bigint DEFAULT 0 NOT NULL,
	"is_disabled" boolean DEFAULT false NOT NULL,
	"rotation_policy" jsonb,
	"created_by" uuid NOT NULL,
	"created_by_type" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"deleted_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "vault_crypto"."vaults" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"org_id" uuid NOT NULL,
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"created_by" uuid NOT NULL,
	"created_by_type" text NOT NULL,
	"is_system" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"deleted_at" timestamp with time zone
);
--> statement-breakpoint
CREATE UNIQUE INDEX "secret_versions_path_version" ON "vault_crypto"."secret_versions" USING btree ("vault_id","path","version");--> statement-breakpoint
CREATE INDEX "secret_versions_live_path" ON "vault_crypto"."secret_versions" USING btree ("vault_id","path","version" DESC NULLS LAST) WHERE "vault_crypto"."secret_versions"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "secret_versions_org_live" ON "vault_crypto"."secret_versions" USING btree ("org_id") WHERE "vault_crypto"."secret_versions"."deleted_at" IS NULL;--> statement-breakpoint
CREATE UNIQUE INDEX "vaults_org_name_live" ON "vault_crypto"."vaults" USING btree ("org_id","name") WHERE "vault_crypto"."vaults"."deleted_at" IS NULL;--> statement-breakpoint
CREATE INDEX "vaults_org" ON "vault_crypto"."vaults" USING btree ("org_id");