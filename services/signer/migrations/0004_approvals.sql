ALTER TABLE "signer"."transactions" DROP CONSTRAINT "transactions_status_known";--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD COLUMN "approval_id" uuid;--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD COLUMN "request_hash" text;--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD COLUMN "resumed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD CONSTRAINT "transactions_awaiting_has_no_nonce" CHECK ("signer"."transactions"."status" <> 'awaiting_approval' or ("signer"."transactions"."nonce" is null and not "signer"."transactions"."nonce_held"));--> statement-breakpoint
ALTER TABLE "signer"."transactions" ADD CONSTRAINT "transactions_status_known" CHECK ("signer"."transactions"."status" in ('awaiting_approval', 'pending', 'signed', 'sign_only', 'broadcast', 'confirmed', 'failed', 'simulation_failed'));