-- Whether the user has answered the ads consent question (here, or the personalised-ads
-- consent at auth). In a GDPR region ads stay blocked until then; an ATT answer or a TCF
-- string alone does not answer it.
ALTER TABLE user_consent_ads ADD COLUMN answered boolean NOT NULL DEFAULT true;
