import Foundation

/// One variant's funnel, counted from the rows (never from what a client reports).
package struct CampaignFunnel: Sendable, Equatable {
    package var key: String?
    package var assigned: Int, exposed: Int, joined: Int, completed: Int, claimed: Int, creditsGranted: Int
    package init(key: String? = nil, assigned: Int, exposed: Int, joined: Int, completed: Int, claimed: Int, creditsGranted: Int) {
        self.key = key
        self.assigned = assigned
        self.exposed = exposed
        self.joined = joined
        self.completed = completed
        self.claimed = claimed
        self.creditsGranted = creditsGranted
    }
}

/// `GET /admin/campaigns/{id}/results`: what an operator decides an experiment on (#31).
package struct CampaignReport: Encodable, Sendable {
    package struct Variant: Encodable, Sendable {
        package var key: String?
        package var weight: Int?
        package var holdout: Bool
        package var rewardAmount: Int
        package var required: Int
        package var assigned: Int, exposed: Int, joined: Int, completed: Int, claimed: Int, creditsGranted: Int
        /// completed ÷ exposed (nil before anyone was shown it).
        package var completionRate: Double?
        /// Against the first variant (nil for the first itself).
        package var versusFirst: CampaignExperiment.Comparison?
        package enum CodingKeys: String, CodingKey {
            case key, weight, holdout
            case rewardAmount = "reward_amount"
            case required, assigned, exposed, joined, completed, claimed
            case creditsGranted = "credits_granted"
            case completionRate = "completion_rate"
            case versusFirst = "versus_first"
        }
    }
    package struct Day: Encodable, Sendable {
        package var day: String
        package var exposed: Int
        package var completed: Int
        /// Completions so far over exposures so far.
        package var cumulativeCompletionRate: Double?
        package enum CodingKeys: String, CodingKey {
            case day, exposed, completed
            case cumulativeCompletionRate = "cumulative_completion_rate"
        }
    }
    package struct SampleRatio: Encodable, Sendable {
        package var chiSquare: Double
        package var pValue: Double
        package var mismatch: Bool
        package enum CodingKeys: String, CodingKey {
            case chiSquare = "chi_square"
            case pValue = "p_value"
            case mismatch
        }
    }

    package var campaignID: UUID
    package var name: String
    package var variants: [Variant]
    package var sampleRatio: SampleRatio?
    package var byDay: [Day]
    package var warnings: [String]
    package enum CodingKeys: String, CodingKey {
        case campaignID = "campaign_id"
        case name, variants
        case sampleRatio = "sample_ratio"
        case byDay = "by_day"
        case warnings
    }

    /// The SRM threshold: below it the split is broken and the comparison cannot be trusted.
    package static let mismatchThreshold = 0.001

    package init(
        campaignID: UUID,
        name: String,
        rewardAmount: Int,
        required: Int,
        variants defined: [CampaignVariant],
        rows: [CampaignFunnel],
        days: [(day: String, exposed: Int, completed: Int)]
    ) {
        self.campaignID = campaignID
        self.name = name
        let byKey = Dictionary(rows.map { ($0.key ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        func rate(_ f: CampaignFunnel) -> Double? { f.exposed > 0 ? Double(f.completed) / Double(f.exposed) : nil }
        if defined.isEmpty {
            let f = byKey[""] ?? CampaignFunnel(key: nil, assigned: 0, exposed: 0, joined: 0, completed: 0, claimed: 0, creditsGranted: 0)
            variants = [
                Variant(
                    key: nil,
                    weight: nil,
                    holdout: false,
                    rewardAmount: rewardAmount,
                    required: required,
                    assigned: f.assigned,
                    exposed: f.exposed,
                    joined: f.joined,
                    completed: f.completed,
                    claimed: f.claimed,
                    creditsGranted: f.creditsGranted,
                    completionRate: rate(f),
                    versusFirst: nil
                )
            ]
            sampleRatio = nil
        } else {
            let funnels = defined.map {
                byKey[$0.key] ?? CampaignFunnel(key: $0.key, assigned: 0, exposed: 0, joined: 0, completed: 0, claimed: 0, creditsGranted: 0)
            }
            let first = funnels[0]
            variants = zip(defined, funnels).enumerated().map { i, pair in
                let (v, f) = pair
                return Variant(
                    key: v.key,
                    weight: v.weight,
                    holdout: v.holdout,
                    rewardAmount: v.rewardAmount,
                    required: v.required,
                    assigned: f.assigned,
                    exposed: f.exposed,
                    joined: f.joined,
                    completed: f.completed,
                    claimed: f.claimed,
                    creditsGranted: f.creditsGranted,
                    completionRate: rate(f),
                    versusFirst: i == 0
                        ? nil
                        : CampaignExperiment.compare(
                            successA: first.completed,
                            totalA: first.exposed,
                            successB: f.completed,
                            totalB: f.exposed
                        )
                )
            }
            sampleRatio = CampaignExperiment.sampleRatio(observed: funnels.map(\.exposed), weights: defined.map(\.weight)).map {
                SampleRatio(chiSquare: $0.chiSquare, pValue: $0.pValue, mismatch: $0.pValue < Self.mismatchThreshold)
            }
        }
        var exposedSoFar = 0
        var completedSoFar = 0
        byDay = days.map { d in
            exposedSoFar += d.exposed
            completedSoFar += d.completed
            return Day(
                day: d.day,
                exposed: d.exposed,
                completed: d.completed,
                cumulativeCompletionRate: exposedSoFar > 0 ? Double(completedSoFar) / Double(exposedSoFar) : nil
            )
        }
        var w: [String] = []
        if sampleRatio?.mismatch == true {
            w.append("sample_ratio_mismatch: exposures do not follow the weights (p < 0.001); the comparison cannot be trusted")
        }
        warnings = w
    }

    /// One row per variant, then one per day.
    package var csv: String {
        func f(_ d: Double?) -> String { d.map { String(format: "%.6f", $0) } ?? "" }
        var lines = [
            "variant,weight,holdout,reward_amount,required,assigned,exposed,joined,completed,claimed,credits_granted,completion_rate,difference_vs_first,ci95_low,ci95_high,p_value"
        ]
        for v in variants {
            lines.append(
                [
                    v.key ?? "", v.weight.map(String.init) ?? "", String(v.holdout), String(v.rewardAmount), String(v.required),
                    String(v.assigned), String(v.exposed), String(v.joined), String(v.completed), String(v.claimed),
                    String(v.creditsGranted), f(v.completionRate), f(v.versusFirst?.difference), f(v.versusFirst?.ciLow),
                    f(v.versusFirst?.ciHigh), f(v.versusFirst?.pValue),
                ].joined(separator: ",")
            )
        }
        lines.append("")
        lines.append("day,exposed,completed,cumulative_completion_rate")
        for d in byDay { lines.append("\(d.day),\(d.exposed),\(d.completed),\(f(d.cumulativeCompletionRate))") }
        return lines.joined(separator: "\n") + "\n"
    }
}
