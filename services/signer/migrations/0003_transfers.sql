CREATE TABLE "signer"."tx_inputs" (
	"chain_name" text NOT NULL,
	"input_ref" text NOT NULL,
	"key_id" uuid NOT NULL,
	"tx_id" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tx_inputs_chain_name_input_ref_pk" PRIMARY KEY("chain_name","input_ref")
);
--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD COLUMN "fee" numeric(78, 0);--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD COLUMN "family" text DEFAULT 'evm' NOT NULL;--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD COLUMN "details" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD COLUMN "expiry_kind" text;--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD COLUMN "expiry_value" numeric(78, 0);--> statement-breakpoint
ALTER TABLE "signer"."tx_inputs" ADD CONSTRAINT "tx_inputs_tx_id_transactions_id_fk" FOREIGN KEY ("tx_id") REFERENCES "signer"."transactions"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "tx_inputs_key" ON "signer"."tx_inputs" USING btree ("key_id","chain_name");--> statement-breakpoint
CREATE INDEX "tx_inputs_tx" ON "signer"."tx_inputs" USING btree ("tx_id");