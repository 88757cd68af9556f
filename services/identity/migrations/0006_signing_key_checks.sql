ALTER TABLE "identity"."signing_keys" ADD COLUMN "revoked_at" timestamp with time zone;--> statement-breakpoint
-- The one way a signing key enters the table (the service's role has no INSERT on it). It checks the
-- row's shape; what makes a row trusted is the service's own check that the sealed private key opens
-- under TOKEN_SIGNING_KEK and derives the published public key (src/tokens/signing-key-store.ts).
CREATE OR REPLACE FUNCTION "identity"."insert_signing_key"(p_kid text, p_public_jwk jsonb, p_private_key_enc bytea, p_created_at timestamptz)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF p_kid !~ '^[A-Za-z0-9_-]{43}$' THEN
    RAISE EXCEPTION 'kid is not an RFC 7638 SHA-256 thumbprint' USING ERRCODE = '22023';
  END IF;
  IF p_public_jwk->>'kid' IS DISTINCT FROM p_kid OR p_public_jwk->>'kty' IS DISTINCT FROM 'OKP'
     OR p_public_jwk->>'crv' IS DISTINCT FROM 'Ed25519' THEN
    RAISE EXCEPTION 'public_jwk does not describe an Ed25519 key with this kid' USING ERRCODE = '22023';
  END IF;
  -- iv(12) | tag(16) | PKCS#8 Ed25519 (48 bytes)
  IF octet_length(p_private_key_enc) <> 76 THEN
    RAISE EXCEPTION 'private_key_enc is not a sealed Ed25519 key' USING ERRCODE = '22023';
  END IF;
  INSERT INTO "identity"."signing_keys" (kid, public_jwk, private_key_enc, created_at)
  VALUES (p_kid, p_public_jwk, p_private_key_enc, p_created_at);
END;
$$;
