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
ALTER TABLE "signer"."client_share_wraps" ADD CONSTRAINT "client_share_wraps_key_id_signing_keys_id_fk" FOREIGN KEY ("key_id") REFERENCES "signer"."signing_keys"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "client_share_wraps_org" ON "signer"."client_share_wraps" USING btree ("org_id");