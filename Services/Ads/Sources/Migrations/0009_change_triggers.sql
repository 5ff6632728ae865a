-- What GET /ads/available is answered from: the day's counters and cooldowns, and the latest
-- consent; every change announced to every replica's cache.
CREATE TRIGGER user_ad_limits_announce AFTER INSERT OR UPDATE OR DELETE ON user_ad_limits
    FOR EACH ROW EXECUTE FUNCTION announce_change('ad_limits');
CREATE TRIGGER user_consent_ads_announce AFTER INSERT OR UPDATE OR DELETE ON user_consent_ads
    FOR EACH ROW EXECUTE FUNCTION announce_change('ad_consent');
