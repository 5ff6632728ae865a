-- #35 the credit balance, a user's unlocks and the content rules are read from each replica's
-- memory (AccessReads): every change to them is announced to every replica's cache at commit.
CREATE TRIGGER credit_balances_announce AFTER INSERT OR UPDATE OR DELETE ON credit_balances
    FOR EACH ROW EXECUTE FUNCTION announce_change('credits');
CREATE TRIGGER content_unlocks_announce AFTER INSERT OR UPDATE OR DELETE ON content_unlocks
    FOR EACH ROW EXECUTE FUNCTION announce_change('credits');
CREATE TRIGGER content_rules_announce AFTER INSERT OR UPDATE OR DELETE ON content_rules
    FOR EACH ROW EXECUTE FUNCTION announce_tenant_change('content_rules');
