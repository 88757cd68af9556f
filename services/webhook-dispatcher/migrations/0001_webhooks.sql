CREATE TABLE "webhook_dispatcher"."deliveries" (
	"id" uuid PRIMARY KEY NOT NULL,
	"webhook_id" uuid NOT NULL,
	"org_id" uuid NOT NULL,
	"event_id" uuid NOT NULL,
	"event_type" text NOT NULL,
	"body" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempt_count" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"lease_until" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp (3) with time zone,
	CONSTRAINT "deliveries_webhook_event_key" UNIQUE("webhook_id","event_id"),
	CONSTRAINT "deliveries_status_check" CHECK ("webhook_dispatcher"."deliveries"."status" IN ('pending', 'succeeded', 'failed'))
);
--> statement-breakpoint
CREATE TABLE "webhook_dispatcher"."delivery_attempts" (
	"delivery_id" uuid NOT NULL,
	"attempt" integer NOT NULL,
	"status_code" integer,
	"duration_ms" integer NOT NULL,
	"error" text DEFAULT '' NOT NULL,
	"attempted_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "delivery_attempts_delivery_id_attempt_pk" PRIMARY KEY("delivery_id","attempt")
);
--> statement-breakpoint
CREATE TABLE "webhook_dispatcher"."webhooks" (
	"id" uuid PRIMARY KEY NOT NULL,
	"org_id" uuid NOT NULL,
	"url" text NOT NULL,
	"events" text[] NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"is_active" boolean DEFAULT true NOT NULL,
	"secret_sealed" text NOT NULL,
	"created_by" uuid NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "webhook_dispatcher"."deliveries" ADD CONSTRAINT "deliveries_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "webhook_dispatcher"."webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_dispatcher"."delivery_attempts" ADD CONSTRAINT "delivery_attempts_delivery_id_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "webhook_dispatcher"."deliveries"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "deliveries_due_idx" ON "webhook_dispatcher"."deliveries" USING btree ("next_attempt_at") WHERE "webhook_dispatcher"."deliveries"."status" = 'pending';--> statement-breakpoint
CREATE INDEX "deliveries_webhook_created_idx" ON "webhook_dispatcher"."deliveries" USING btree ("webhook_id","created_at");--> statement-breakpoint
CREATE INDEX "deliveries_completed_idx" ON "webhook_dispatcher"."deliveries" USING btree ("completed_at") WHERE "webhook_dispatcher"."deliveries"."completed_at" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "webhooks_org_idx" ON "webhook_dispatcher"."webhooks" USING btree ("org_id","created_at");