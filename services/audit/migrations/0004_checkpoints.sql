CREATE TABLE "audit"."checkpoints" (
	"id" uuid PRIMARY KEY NOT NULL,
	"org_id" uuid NOT NULL,
	"seq" bigint NOT NULL,
	"head_hash" text NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL,
	"key_id" text NOT NULL,
	"signature" text NOT NULL,
	CONSTRAINT "checkpoints_org_seq_key" UNIQUE("org_id","seq")
);
--> statement-breakpoint
ALTER TABLE "audit"."events" ADD COLUMN "key_version" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
-- Checkpoints are append-only as the records are: the service's role may only insert and read them,
-- and the trigger of 0002 refuses UPDATE, DELETE and TRUNCATE for everyone.
GRANT SELECT, INSERT ON audit.checkpoints TO custos_audit_writer;
--> statement-breakpoint
CREATE TRIGGER checkpoints_append_only BEFORE UPDATE OR DELETE ON audit.checkpoints
  FOR EACH ROW EXECUTE FUNCTION audit.refuse_change();
--> statement-breakpoint
CREATE TRIGGER checkpoints_no_truncate BEFORE TRUNCATE ON audit.checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION audit.refuse_change();
