CREATE TABLE "identity"."router_keys" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"token_id" text NOT NULL,
	"agent_id" uuid NOT NULL,
	"secret_hash" text NOT NULL,
	"max_concurrent_streams" integer,
	"spend_cap_micro_usd" bigint,
	"created_by" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "router_keys_token_id_unique" UNIQUE("token_id")
);
--> statement-breakpoint
ALTER TABLE "identity"."router_keys" ADD CONSTRAINT "router_keys_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "identity"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "router_keys_agent_idx" ON "identity"."router_keys" USING btree ("agent_id");