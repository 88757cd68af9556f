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
	"confirmed_at" timestamp with time zone,
	"watch_after" timestamp with time zone,
	CONSTRAINT "transactions_status_known" CHECK ("signer"."transactions"."status" in ('pending', 'signed', 'sign_only', 'broadcast', 'confirmed', 'failed', 'simulation_failed')),
	CONSTRAINT "transactions_nonce_held_has_nonce" CHECK (not "signer"."transactions"."nonce_held" or "signer"."transactions"."nonce" is not null)
);
--> statement-breakpoint
CREATE TABLE "signer"."tx_idempotency" (
	"agent_id" uuid NOT NULL,
	"idempotency_key" text NOT NULL,
	"request_hash" text NOT NULL,
	"tx_id" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "transactions_agent_created" ON "signer"."transactions" USING btree ("agent_id","created_at" DESC NULLS LAST,"id" DESC NULLS LAST);--> statement-breakpoint
CREATE UNIQUE INDEX "transactions_nonce_held" ON "signer"."transactions" USING btree ("key_id","chain_id","nonce") WHERE "signer"."transactions"."nonce_held";--> statement-breakpoint
CREATE INDEX "transactions_watch" ON "signer"."transactions" USING btree ("watch_after") WHERE "signer"."transactions"."status" = 'broadcast';--> statement-breakpoint
CREATE UNIQUE INDEX "tx_idempotency_agent_key" ON "signer"."tx_idempotency" USING btree ("agent_id","idempotency_key");