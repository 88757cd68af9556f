-- Rows signed before send_attempted_at existed may have been sent: recovery keeps re-sending them.
UPDATE "signer"."transactions" SET "send_attempted_at" = "signed_at" WHERE "status" = 'signed' AND "send_attempted_at" IS NULL;
