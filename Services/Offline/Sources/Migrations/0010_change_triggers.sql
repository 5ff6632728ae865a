-- What GET /location/nearby-content is answered from: the user's positions (a move, a consent
-- withdrawal, an erasure, the anonymisation sweep) and the tenant's places, every change
-- announced to every replica's cache.
CREATE TRIGGER user_locations_announce AFTER INSERT OR UPDATE OR DELETE ON user_locations
    FOR EACH ROW EXECUTE FUNCTION announce_change('location');
CREATE TRIGGER location_based_content_announce AFTER INSERT OR UPDATE OR DELETE ON location_based_content
    FOR EACH ROW EXECUTE FUNCTION announce_tenant_change('places');
