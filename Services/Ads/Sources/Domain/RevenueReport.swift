import Foundation

/// One aggregate row (`ad_daily_stats`) summed over the report's filters.
package struct StatsRow: Sendable, Equatable {
    package var day: String
    package var adType: String
    package var provider: String
    package var placement: String
    package var requests: Int
    package var impressions: Int
    package var clicks: Int
    package var completions: Int
    package var revenueUSD: Double
    package var impressionsWithoutRevenue: Int
    package init(
        day: String,
        adType: String,
        provider: String,
        placement: String,
        requests: Int,
        impressions: Int,
        clicks: Int,
        completions: Int,
        revenueUSD: Double,
        impressionsWithoutRevenue: Int
    ) {
        self.day = day
        self.adType = adType
        self.provider = provider
        self.placement = placement
        self.requests = requests
        self.impressions = impressions
        self.clicks = clicks
        self.completions = completions
        self.revenueUSD = revenueUSD
        self.impressionsWithoutRevenue = impressionsWithoutRevenue
    }
}

/// UC-ADS-4.5: totals and breakdowns from daily aggregates. Pure: eCPM = revenue /
/// impressions × 1000; fill rate = impressions / requests; CTR = clicks / impressions;
/// completion rate = completions / impressions. Views without a revenue figure (5a) are valued
/// at the measured eCPM of the same provider and type, else the provider's configured estimate,
/// and the figures say they are estimated.
package struct RevenueReport: Sendable {
    package struct Figures: Encodable, Sendable {
        package var requests = 0
        package var impressions = 0
        package var clicks = 0
        package var completions = 0
        package var revenue = 0.0
        package var estimatedRevenue = 0.0

        package var ecpm: Double { impressions == 0 ? 0 : revenue / Double(impressions) * 1000 }
        package var fillRate: Double { requests == 0 ? 0 : Double(impressions) / Double(requests) }
        package var ctr: Double { impressions == 0 ? 0 : Double(clicks) / Double(impressions) }
        package var completionRate: Double { impressions == 0 ? 0 : Double(completions) / Double(impressions) }

        package mutating func add(_ r: StatsRow, estimate: Double) {
            requests += r.requests
            impressions += r.impressions
            clicks += r.clicks
            completions += r.completions
            revenue += r.revenueUSD + estimate
            estimatedRevenue += estimate
        }

        package static func round(_ x: Double, _ places: Double = 4) -> Double { (x * pow(10, places)).rounded() / pow(10, places) }

        package enum CodingKeys: String, CodingKey {
            case requests, impressions, clicks, completions, revenue, ecpm
            case fillRate = "fill_rate"
            case ctr
            case completionRate = "completion_rate"
            case estimated
            case estimatedRevenue = "estimated_revenue"
        }
        package func encode(to encoder: any Encoder) throws {
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

    package var total = Figures()
    package var byDate: [(String, Figures)] = []
    package var byType: [String: Figures] = [:]
    package var byProvider: [String: Figures] = [:]
    package var byPlacement: [String: Figures] = [:]
    /// Each row with its estimate, for the CSV export.
    package var rows: [(StatsRow, Double)] = []

    package init(rows input: [StatsRow], configuredECPM: [String: Double]) {
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
