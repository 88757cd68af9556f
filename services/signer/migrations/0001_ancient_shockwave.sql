CREATE TABLE "signer"."chains" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"display_name" text NOT NULL,
	"chain_id" bigint NOT NULL,
	"family" text NOT NULL,
	"rpc_url" text DEFAULT '' NOT NULL,
	"ws_url" text DEFAULT '' NOT NULL,
	"explorer_url" text DEFAULT '' NOT NULL,
	"native_currency" text NOT NULL,
	"native_decimals" integer NOT NULL,
	"is_testnet" boolean DEFAULT false NOT NULL,
	"is_enabled" boolean DEFAULT true NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "chains_name_unique" UNIQUE("name"),
	CONSTRAINT "chains_family_chain_id_unique" UNIQUE("family","chain_id"),
	CONSTRAINT "chains_family_known" CHECK ("signer"."chains"."family" in ('evm', 'bitcoin', 'solana', 'xrp', 'cardano', 'tron'))
);
--> statement-breakpoint
CREATE TABLE "signer"."signing_keys" (
	"id" uuid PRIMARY KEY NOT NULL,
	"org_id" uuid NOT NULL,
	"agent_id" uuid NOT NULL,
	"family" text NOT NULL,
	"curve" text NOT NULL,
	"public_key" text NOT NULL,
	"address" text NOT NULL,
	"key_version" integer NOT NULL,
	"custody" text DEFAULT 'server' NOT NULL,
	"is_active" boolean DEFAULT true NOT NULL,
	"vault_secret_id" uuid NOT NULL,
	"created_by" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"rotated_at" timestamp with time zone,
	CONSTRAINT "signing_keys_agent_family_version" UNIQUE("agent_id","family","key_version"),
	CONSTRAINT "signing_keys_custody_known" CHECK ("signer"."signing_keys"."custody" in ('server', 'client_tss', 'passkey_owner'))
);
--> statement-breakpoint
CREATE UNIQUE INDEX "signing_keys_one_active" ON "signer"."signing_keys" USING btree ("agent_id","family") WHERE "signer"."signing_keys"."is_active";--> statement-breakpoint
CREATE INDEX "signing_keys_org_agent" ON "signer"."signing_keys" USING btree ("org_id","agent_id");