-- The write path of a secret in one round trip: take the path's write lock (the transaction-scoped
-- advisory lock every writer of the path takes), then read its latest version. PL/pgSQL runs the
-- SELECT with a snapshot taken after the lock is granted (READ COMMITTED, volatile function), so a
-- writer that waited sees the version the one before it committed. SECURITY INVOKER: the service's
-- own role runs it with its own rights.
CREATE FUNCTION "vault_crypto"."lock_path_latest"(p_vault_id uuid, p_path text)
RETURNS TABLE (version integer, deleted_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(p_vault_id::text), hashtext(p_path));
  RETURN QUERY
    SELECT s.version, s.deleted_at FROM "vault_crypto"."secret_versions" s
    WHERE s.vault_id = p_vault_id AND s.path = p_path
    ORDER BY s.version DESC LIMIT 1;
END
$$;
