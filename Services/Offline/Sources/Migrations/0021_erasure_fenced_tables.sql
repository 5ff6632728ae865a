-- Every table that holds a user's data refuses rows for an erased user (ServiceKit's ErasureFence).
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON sync_profiles FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON download_jobs FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON offline_categories FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
-- Written in batches: one check for the statement's rows.
CREATE TRIGGER erasure_fence AFTER INSERT ON offline_items REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION refuse_erased_users();
CREATE TRIGGER erasure_fence_user BEFORE UPDATE OF user_id ON offline_items FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON sync_queue FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON sync_jobs FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON sync_applied_actions FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON sync_conflicts FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON user_locations FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON user_consents FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
