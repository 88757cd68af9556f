CREATE TABLE "signer"."client_share_wraps" (
	"key_id" uuid NOT NULL,
	"org_id" uuid NOT NULL,
	"type" text NOT NULL,
	"ciphertext" "bytea" NOT NULL,
	"params" jsonb NOT NULL,
	"created_by" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "client_share_wraps_key_id_type_pk" PRIMARY KEY("key_id","type"),
	CONSTRAINT "client_share_wraps_type_known" CHECK ("signer"."client_share_wraps"."type" in ('passkey_prf', 'recovery_code')),
	CONSTRAINT "client_share_wraps_ciphertext_size" CHECK (octet_length("signer"."client_share_wraps"."ciphertext") between 16 and 4096)
);
--> statement-breakpoint
CREATE TABLE "signer"."nonces" (
	"key_id" uuid NOT NULL,
	"chain_id" bigint NOT NULL,
	"next_nonce" bigint NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "nonces_key_id_chain_id_pk" PRIMARY KEY("key_id","chain_id")
);
--> statement-breakpoint
CREATE TABLE "signer"."released_nonces" (
	"key_id" uuid NOT NULL,
	"chain_id" bigint NOT NULL,
	"nonce" bigint NOT NULL,
	"released_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "released_nonces_key_id_chain_id_nonce_pk" PRIMARY KEY("key_id","chain_id","nonce")
);
--> statement-breakpoint
CREATE TABLE "signer"."transactions" (
	"id" uuid PRIMARY KEY NOT NULL,
	"org_id" uuid NOT NULL,
	"agent_id" uuid NOT NULL,
	"key_id" uuid NOT NULL,
	"chain_name" text NOT NULL,
	"chain_id" bigint NOT NULL,
	"from_address" text NOT NULL,
	"to_address" text,
	"value_wei" numeric(78, 0) NOT NULL,
	"data" text DEFAULT '0x' NOT NULL,
	"nonce" bigint,
	"nonce_held" boolean DEFAULT false NOT NULL,
	"gas_limit" numeric(78, 0),
	"tx_type" integer NOT NULL,
	"max_fee_per_gas" numeric(78, 0),
	"max_priority_fee_per_gas" numeric(78, 0),
	"gas_price" numeric(78, 0),
	"status" text NOT NULL,
	"tx_hash" text,
	"signed_tx" text,
	"error_message" text,
	"block_number" bigint,
	"gas_used" numeric(78, 0),
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"signed_at" timestamp with time zone,
	"broadcast_at" timestamp with time zone,
	"send_attempted_at" timestamp with time zone,
	"confirmed_at" timestamp with time zone,
	"watch_after" timestamp with time zone,
	"drop_seen_block" bigint,
	CONSTRAINT "transactions_status_known" CHECK ("signer"."transactions"."status" in ('pending', 'signed', 'sign_only', 'broadcast', 'confirmed', 'failed', 'simulation_failed')),
	CONSTRAINT "transactions_nonce_held_has_nonce" CHECK (not "signer"."transactions"."nonce_held" or "signer"."transactions"."nonce" is not null)
);
--> statement-breakpoint
CREATE TABLE "signer"."tx_idempotency" (
	"agent_id" uuid NOT NULL,
	"idempotency_key" text NOT NULL,
	"request_hash" text NOT NULL,
	"tx_id" uuid,
	"claim_id" uuid DEFAULT gen_random_uuid() NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "signer"."client_share_wraps" ADD CONSTRAINT "client_share_wraps_key_id_signing_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "signer"."signing_keys"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "client_share_wraps_org" ON "signer"."client_share_wraps" USING btree ("org_id");--> statement-breakpoint
CREATE INDEX "transactions_agent_created" ON "signer"."transactions" USING btree ("agent_id","created_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE UNIQUE INDEX "transactions_nonce_held" ON "signer"."transactions" USING btree ("key_id","chain_id","nonce") WHERE "signer"."transactions"."nonce_held";--> statement-breakpoint
CREATE INDEX "transactions_watch" ON "signer"."transactions" USING btree ("watch_after") WHERE "signer"."transactions"."status" = 'broadcast';--> statement-breakpoint
CREATE INDEX "transactions_unfinished" ON "signer"."transactions" USING btree ("status","created_at") WHERE "signer"."transactions"."status" in ('pending', 'signed');--> statement-breakpoint
CREATE UNIQUE INDEX "tx_idempotency_agent_key" ON "signer"."tx_idempotency" USING btree ("agent_id","idempotency_key");