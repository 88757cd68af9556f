CREATE TABLE "signer"."guardrail_ledger" (
	"agent_id" uuid NOT NULL,
	"org_id" uuid NOT NULL,
	"chain_name" text NOT NULL,
	"family" text NOT NULL,
	"day" text NOT NULL,
	"value_spent" numeric(78, 0) DEFAULT '0' NOT NULL,
	"gas_spent" numeric(78, 0) DEFAULT '0' NOT NULL,
	"tx_count" integer DEFAULT 0 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "guardrail_ledger_agent_id_chain_name_day_pk" PRIMARY KEY("agent_id","chain_name","day"),
	CONSTRAINT "guardrail_ledger_non_negative" CHECK ("signer"."guardrail_ledger"."value_spent" >= 0 and "signer"."guardrail_ledger"."gas_spent" >= 0 and "signer"."guardrail_ledger"."tx_count" >= 0),
	CONSTRAINT "guardrail_ledger_day_format" CHECK ("signer"."guardrail_ledger"."day" ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$')
);
--> statement-breakpoint
CREATE TABLE "signer"."guardrail_reservations" (
	"id" uuid PRIMARY KEY NOT NULL,
	"agent_id" uuid NOT NULL,
	"chain_name" text NOT NULL,
	"day" text NOT NULL,
	"value" numeric(78, 0) NOT NULL,
	"gas" numeric(78, 0) NOT NULL,
	"kind" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"released_at" timestamp with time zone,
	CONSTRAINT "guardrail_reservations_kind_known" CHECK ("signer"."guardrail_reservations"."kind" in ('transaction', 'sign_only'))
);
--> statement-breakpoint
CREATE INDEX "guardrail_ledger_agent_day" ON "signer"."guardrail_ledger" USING btree ("agent_id","day");--> statement-breakpoint
CREATE INDEX "guardrail_reservations_agent_day" ON "signer"."guardrail_reservations" USING btree ("agent_id","day");