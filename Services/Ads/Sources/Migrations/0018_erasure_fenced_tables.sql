-- Every table that holds a user's data refuses rows for an erased user (ServiceKit's ErasureFence).
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON ad_requests FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON ad_views FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON user_ad_limits FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON user_consent_ads FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON pending_rewards FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON campaign_participations FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON referral_codes FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF referee_id ON referral_redemptions FOR EACH ROW EXECUTE FUNCTION refuse_erased_user('referee_id');
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON campaign_assignments FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON campaign_reminders FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
