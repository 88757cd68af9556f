-- The service's role has only SELECT on identity.signing_keys: a key is retired, revoked or pruned
-- only through these functions, with the server's clock, so that whoever holds the role cannot
-- backdate a live key into pruning nor un-revoke a compromised one.
CREATE OR REPLACE FUNCTION "identity"."retire_signing_keys"(p_except_kid text)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n integer;
BEGIN
  UPDATE "identity"."signing_keys" SET retired_at = now()
  WHERE retired_at IS NULL AND kid <> p_except_kid;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END;
$$;
--> statement-breakpoint
CREATE OR REPLACE FUNCTION "identity"."revoke_signing_key"(p_kid text)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  UPDATE "identity"."signing_keys"
  SET revoked_at = coalesce(revoked_at, now()), retired_at = coalesce(retired_at, now())
  WHERE kid = p_kid;
  RETURN FOUND;
END;
$$;
