-- Every table that holds a user's data refuses rows for an erased user (ServiceKit's ErasureFence).
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON credit_balances FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON credit_ledger FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON content_unlocks FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON subscriptions FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON subscription_events FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON iap_receipts FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
-- Written in batches: one check for the statement's rows.
CREATE TRIGGER erasure_fence AFTER INSERT ON access_logs REFERENCING NEW TABLE AS written FOR EACH STATEMENT EXECUTE FUNCTION refuse_erased_users();
CREATE TRIGGER erasure_fence_user BEFORE UPDATE OF user_id ON access_logs FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
CREATE TRIGGER erasure_fence BEFORE INSERT OR UPDATE OF user_id ON devices FOR EACH ROW EXECUTE FUNCTION refuse_erased_user();
