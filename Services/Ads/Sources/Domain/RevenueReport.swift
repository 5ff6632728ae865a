import Foundation

/// One aggregate row (`ad_daily_stats`) summed over the report's filters.
struct StatsRow: Sendable, Equatable {
    var day: String
    var adType: String
    var provider: String
    var placement: String
    var requests: Int
    var impressions: Int
    var clicks: Int
    var completions: Int
    var revenueUSD: Double
    var impressionsWithoutRevenue: Int
}

/// UC-ADS-4.5: totals and breakdowns from daily aggregates. Pure: eCPM = revenue /
/// impressions × 1000; fill rate = impressions / requests; CTR = clicks / impressions;
/// completion rate = completions / impressions. Views without a revenue figure (5a) are valued
/// at the measured eCPM of the same provider and type, else the provider's configured estimate,
/// and the figures say they are estimated.
struct RevenueReport: Sendable {
    struct Figures: Encodable, Sendable {
        var requests = 0
        var impressions = 0
        var clicks = 0
        var completions = 0
        var revenue = 0.0
        var estimatedRevenue = 0.0

        var ecpm: Double { impressions == 0 ? 0 : revenue / Double(impressions) * 1000 }
        var fillRate: Double { requests == 0 ? 0 : Double(impressions) / Double(requests) }
        var ctr: Double { impressions == 0 ? 0 : Double(clicks) / Double(impressions) }
        var completionRate: Double { impressions == 0 ? 0 : Double(completions) / Double(impressions) }

        mutating func add(_ r: StatsRow, estimate: Double) {
            requests += r.requests
            impressions += r.impressions
            clicks += r.clicks
            completions += r.completions
            revenue += r.revenueUSD + estimate
            estimatedRevenue += estimate
        }

        static func round(_ x: Double, _ places: Double = 4) -> Double { (x * pow(10, places)).rounded() / pow(10, places) }

        enum CodingKeys: String, CodingKey {
            case requests, impressions, clicks, completions, revenue, ecpm
            case fillRate = "fill_rate"
            case ctr
            case completionRate = "completion_rate"
            case estimated
            case estimatedRevenue = "estimated_revenue"
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(requests, forKey: .requests)
            try c.encode(impressions, forKey: .impressions)
            try c.encode(clicks, forKey: .clicks)
            try c.encode(completions, forKey: .completions)
            try c.encode(Self.round(revenue), forKey: .revenue)
            try c.encode(Self.round(ecpm), forKey: .ecpm)
            try c.encode(Self.round(fillRate), forKey: .fillRate)
            try c.encode(Self.round(ctr), forKey: .ctr)
            try c.encode(Self.round(completionRate), forKey: .completionRate)
            try c.encode(estimatedRevenue > 0, forKey: .estimated)
            try c.encode(Self.round(estimatedRevenue), forKey: .estimatedRevenue)
        }
    }

    var total = Figures()
    var byDate: [(String, Figures)] = []
    var byType: [String: Figures] = [:]
    var byProvider: [String: Figures] = [:]
    var byPlacement: [String: Figures] = [:]
    /// Each row with its estimate, for the CSV export.
    var rows: [(StatsRow, Double)] = []

    init(rows input: [StatsRow], configuredECPM: [String: Double]) {
        // Measured eCPM per (provider, type), from the views that carry revenue.
        var measured: [String: (revenue: Double, impressions: Int)] = [:]
        for r in input {
            let k = r.provider + "|" + r.adType
            measured[k, default: (0, 0)].revenue += r.revenueUSD
            measured[k, default: (0, 0)].impressions += r.impressions - r.impressionsWithoutRevenue
        }
        var dates: [String: Figures] = [:]
        for r in input {
            var estimate = 0.0
            if r.impressionsWithoutRevenue > 0 {
                let m = measured[r.provider + "|" + r.adType]
                let ecpm =
                    (m.map { $0.impressions > 0 ? $0.revenue / Double($0.impressions) * 1000 : nil } ?? nil)
                    ?? configuredECPM[r.provider] ?? 0
                estimate = Double(r.impressionsWithoutRevenue) * ecpm / 1000
            }
            rows.append((r, estimate))
            total.add(r, estimate: estimate)
            dates[r.day, default: Figures()].add(r, estimate: estimate)
            byType[r.adType, default: Figures()].add(r, estimate: estimate)
            byProvider[r.provider, default: Figures()].add(r, estimate: estimate)
            byPlacement[r.placement, default: Figures()].add(r, estimate: estimate)
        }
        // Newest first, as the seed's query orders them.
        byDate = dates.sorted { $0.key > $1.key }
    }
}
