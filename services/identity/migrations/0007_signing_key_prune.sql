-- The one way a signing key leaves the table: only keys retired for longer than a token can live
-- (at least a day, whatever the caller asks), so the service's role (no DELETE on the table) cannot
-- drop the keys that verify live tokens.
CREATE OR REPLACE FUNCTION "identity"."prune_signing_keys"(p_retired_for interval)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  n integer;
BEGIN
  DELETE FROM "identity"."signing_keys"
  WHERE retired_at < now() - greatest(p_retired_for, interval '1 day');
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END;
$$;
