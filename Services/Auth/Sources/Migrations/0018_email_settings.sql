-- #16 each app's emails: its name, sender, support address, link base, default language and
-- its own wording per language (fr, en), set at run time (admin route and CLI). Without a row
-- the deployment's MAIL_FROM / SUPPORT_EMAIL / APP_LINK_BASE_URL and the built-in French apply.
CREATE TABLE email_settings (
    app_id uuid PRIMARY KEY REFERENCES applications (id) ON DELETE CASCADE,
    settings jsonb NOT NULL,
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER email_settings_changes AFTER INSERT OR UPDATE OR DELETE ON email_settings
    FOR EACH ROW EXECUTE FUNCTION announce_tenant_change('email_settings');
