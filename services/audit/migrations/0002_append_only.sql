-- Audit records are append-only (issue: "the database role the service uses cannot update or
-- delete them"). The service's pool runs as custos_audit_writer (SET at connection start), which may
-- insert and read records but has no UPDATE, DELETE or TRUNCATE on them; a trigger refuses those
-- for every role as well, table owners included. Roles are cluster-wide, so creation tolerates a
-- concurrent or earlier creator (another database of the same cluster).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'custos_audit_writer') THEN
    CREATE ROLE custos_audit_writer NOLOGIN;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
  NULL;
END
$$;
--> statement-breakpoint
GRANT custos_audit_writer TO CURRENT_USER;
--> statement-breakpoint
GRANT USAGE ON SCHEMA audit TO custos_audit_writer;
--> statement-breakpoint
GRANT SELECT, INSERT ON audit.events TO custos_audit_writer;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE ON audit.chain_heads TO custos_audit_writer;
--> statement-breakpoint
GRANT SELECT, INSERT, UPDATE, DELETE ON audit.outbox, audit.inbox TO custos_audit_writer;
--> statement-breakpoint
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA audit TO custos_audit_writer;
--> statement-breakpoint
CREATE FUNCTION audit.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit records are append-only (% refused)', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
--> statement-breakpoint
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON audit.events
  FOR EACH ROW EXECUTE FUNCTION audit.refuse_change();
--> statement-breakpoint
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON audit.events
  FOR EACH STATEMENT EXECUTE FUNCTION audit.refuse_change();
