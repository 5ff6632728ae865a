-- What GET /subscriptions/me and the entitlement other services ask for are answered from:
-- every change announced to every replica's cache (a purchase, a renewal, a refund, an expiry,
-- a transfer, a plan's features).
CREATE TRIGGER subscriptions_announce AFTER INSERT OR UPDATE OR DELETE ON subscriptions
    FOR EACH ROW EXECUTE FUNCTION announce_change('subscription');
CREATE TRIGGER plans_announce AFTER INSERT OR UPDATE OR DELETE ON subscription_plans
    FOR EACH ROW EXECUTE FUNCTION announce_tenant_change('plans');
