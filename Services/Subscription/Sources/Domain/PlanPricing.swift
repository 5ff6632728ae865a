import Foundation

/// Seed UC-SUB-2.1: a longer plan shows its saving against paying monthly ("-33%" for
/// 39.99/year against 4.99/month).
public enum PlanPricing {
    public static func months(_ planType: String) -> Double? {
        switch planType {
        case "monthly": 1
        case "annual": 12
        case "weekly": 12.0 / 52.0
        default: nil
        }
    }

    /// nil when there is nothing to show (no monthly reference, or no saving).
    public static func discountVsMonthly(price: Double, planType: String, monthlyPrice: Double?) -> String? {
        guard planType == "annual", let monthly = monthlyPrice, monthly > 0, let m = months(planType) else { return nil }
        let full = monthly * m
        let saving = (1 - price / full) * 100
        guard saving >= 1 else { return nil }
        return "-\(Int(saving.rounded(.down)))%"
    }
}
