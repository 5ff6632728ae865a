import Crypto
import Foundation
import ServiceCore
import WireTypes

/// UC-ADS-4.4 "A/B testing : différents rewards selon cohortes" (#31): a campaign's variants,
/// the deterministic assignment of a user to one, and the statistics an operator decides on.
/// No I/O: decisions as functions of values.
package struct CampaignVariant: Sendable, Equatable, Codable {
    package var key: String
    package var weight: Int
    /// The variant's own reward and goal (the campaign's when not overridden).
    package var rewardAmount: Int
    package var required: Int
    package var conditions: JSONValue
    /// Not shown the campaign; only counted (the baseline without it).
    package var holdout: Bool

    package enum CodingKeys: String, CodingKey {
        case key, weight
        case rewardAmount = "reward_amount"
        case required, conditions, holdout
    }
    package init(
        key: String,
        weight: Int,
        rewardAmount: Int,
        required: Int,
        conditions: JSONValue,
        holdout: Bool
    ) {
        self.key = key
        self.weight = weight
        self.rewardAmount = rewardAmount
        self.required = required
        self.conditions = conditions
        self.holdout = holdout
    }
}

package enum CampaignExperiment {
    package static let maxVariants = 10
    /// Buckets of the assignment hash: weights are whole percents, so 10,000 buckets split them
    /// exactly.
    package static let buckets = 10_000

    /// A variant as the operator writes it.
    package struct VariantInput: Decodable, Sendable {
        package struct Reward: Decodable, Sendable {
            package var type: String?
            package var amount: Int

            package init(type: String? = nil, amount: Int) {
                self.type = type
                self.amount = amount
            }
        }
        package var key: String
        package var weight: Int
        package var reward: Reward?
        package var conditions: [String: JSONValue]?
        package var holdout: Bool?

        package init(key: String, weight: Int, reward: Reward? = nil, conditions: [String: JSONValue]? = nil, holdout: Bool? = nil) {
            self.key = key
            self.weight = weight
            self.reward = reward
            self.conditions = conditions
            self.holdout = holdout
        }
    }

    /// The checked variants; each bad field named (`variants[i].…`). `type`'s condition key
    /// holds a variant's goal; a variant without reward or conditions takes the campaign's.
    package static func variants(
        _ input: [VariantInput],
        type: CampaignType,
        reward: Int,
        required: Int,
        conditions: [String: JSONValue]
    ) throws -> [CampaignVariant] {
        guard (2...maxVariants).contains(input.count) else {
            throw AppError.validation("variants", "variants lists 2 to \(maxVariants) variants")
        }
        var seen: Set<String> = []
        var out: [CampaignVariant] = []
        for (i, v) in input.enumerated() {
            let field = "variants[\(i)]"
            guard (1...32).contains(v.key.count), v.key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
                throw AppError.validation("\(field).key", "a variant key is 1 to 32 letters, digits, '_' or '-'")
            }
            guard seen.insert(v.key).inserted else { throw AppError.validation("\(field).key", "variant key '\(v.key)' appears twice") }
            guard (0...100).contains(v.weight) else { throw AppError.validation("\(field).weight", "a weight is 0 to 100") }
            if let r = v.reward {
                guard r.type == nil || r.type == "credits" else { throw AppError.validation("\(field).reward.type", "reward.type must be credits") }
                guard (1...1000).contains(r.amount) else { throw AppError.validation("\(field).reward.amount", "reward.amount must be 1 to 1000") }
            }
            var merged = conditions
            var goal = required
            if let c = v.conditions {
                for (k, value) in c {
                    guard k == type.conditionKey else {
                        throw AppError.validation("\(field).conditions.\(k)", "a variant may change \(type.conditionKey) only")
                    }
                    guard case .int(let n) = value, (1...1000).contains(n) else {
                        throw AppError.validation("\(field).conditions.\(k)", "\(k) must be a number from 1 to 1000")
                    }
                    goal = n
                    merged[k] = value
                }
            }
            out.append(
                CampaignVariant(
                    key: v.key,
                    weight: v.weight,
                    rewardAmount: v.reward?.amount ?? reward,
                    required: goal,
                    conditions: .object(merged),
                    holdout: v.holdout ?? false
                )
            )
        }
        guard out.reduce(0, { $0 + $1.weight }) == 100 else {
            throw AppError.validation("variants", "the variants' weights must sum to 100 (they sum to \(out.reduce(0) { $0 + $1.weight }))")
        }
        guard out.contains(where: { !$0.holdout && $0.weight > 0 }) else {
            throw AppError.validation("variants", "at least one variant that is shown the campaign needs a weight")
        }
        return out
    }

    /// The user's bucket: SHA-256 of (campaign salt, app, user), stable across replicas and
    /// restarts, unguessable without the salt (a user cannot pick an id for a better variant).
    package static func bucket(salt: String, app: UUID, user: UUID) -> Int {
        let digest = "\(salt):\(app.lowercasedString):\(user.lowercasedString)".sha256
        let n = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Int(n % UInt64(buckets))
    }

    /// The variant a bucket falls in, by the weights in force (cumulative, in list order).
    package static func pick(_ variants: [CampaignVariant], bucket: Int) -> CampaignVariant {
        var upper = 0
        for v in variants {
            upper += v.weight * (buckets / 100)
            if bucket < upper { return v }
        }
        return variants.last { $0.weight > 0 } ?? variants[variants.count - 1]
    }

    /// An edit of a running campaign's variants: every variant that has users stays (their
    /// assignment never moves); weights may change (new users follow them).
    package static func checkEdit(old: [CampaignVariant], new: [CampaignVariant], assigned: [String: Int]) throws {
        for v in old where (assigned[v.key] ?? 0) > 0 {
            guard let kept = new.first(where: { $0.key == v.key }) else {
                throw AppError(
                    AdsErrorCode.variantHasUsers,
                    "Variant '\(v.key)' has \(assigned[v.key] ?? 0) assigned users; it cannot be removed",
                    extra: ["field": .string("variants"), "variant": .string(v.key)]
                )
            }
            guard kept.holdout == v.holdout else {
                throw AppError(
                    AdsErrorCode.variantHasUsers,
                    "Variant '\(v.key)' has assigned users; whether it is a holdout cannot change",
                    extra: ["field": .string("variants"), "variant": .string(v.key)]
                )
            }
        }
    }

    // MARK: statistics

    package struct Comparison: Sendable, Equatable, Encodable {
        /// Completion rate of the variant minus that of the first, in points of proportion.
        package var difference: Double
        package var ciLow: Double
        package var ciHigh: Double
        package var z: Double
        package var pValue: Double
        package enum CodingKeys: String, CodingKey {
            case difference, z
            case ciLow = "ci95_low"
            case ciHigh = "ci95_high"
            case pValue = "p_value"
        }
    }

    /// Two-proportion comparison of b against a: the difference with its 95 % Wald interval
    /// (unpooled standard error) and the two-sided z-test p-value (pooled), as statsmodels'
    /// `proportions_ztest` and `confint_proportions_2indep(method="wald")` give them.
    package static func compare(successA: Int, totalA: Int, successB: Int, totalB: Int) -> Comparison? {
        guard totalA > 0, totalB > 0 else { return nil }
        let pa = Double(successA) / Double(totalA)
        let pb = Double(successB) / Double(totalB)
        let diff = pb - pa
        let se = (pa * (1 - pa) / Double(totalA) + pb * (1 - pb) / Double(totalB)).squareRoot()
        let pooled = Double(successA + successB) / Double(totalA + totalB)
        let sePooled = (pooled * (1 - pooled) * (1 / Double(totalA) + 1 / Double(totalB))).squareRoot()
        let z = sePooled > 0 ? diff / sePooled : 0
        return Comparison(
            difference: diff,
            ciLow: diff - 1.959963984540054 * se,
            ciHigh: diff + 1.959963984540054 * se,
            z: z,
            pValue: sePooled > 0 ? erfc(abs(z) / 2.0.squareRoot()) : 1
        )
    }

    /// Sample-ratio mismatch: chi-square of the observed exposures against the weights; the
    /// p-value (upper tail, k-1 degrees of freedom). Under 0.001 the split is broken, and no
    /// difference between the variants can be trusted.
    package static func sampleRatio(observed: [Int], weights: [Int]) -> (chiSquare: Double, pValue: Double)? {
        let pairs = zip(observed, weights).filter { $0.1 > 0 }
        let total = pairs.reduce(0) { $0 + $1.0 }
        let weightSum = pairs.reduce(0) { $0 + $1.1 }
        guard pairs.count >= 2, total > 0, weightSum > 0 else { return nil }
        var chi = 0.0
        for (o, w) in pairs {
            let expected = Double(total) * Double(w) / Double(weightSum)
            chi += (Double(o) - expected) * (Double(o) - expected) / expected
        }
        return (chi, gammaQ(Double(pairs.count - 1) / 2, chi / 2))
    }

    /// The regularised upper incomplete gamma function Q(a, x) (series below a + 1, continued
    /// fraction above: Numerical Recipes' gammq).
    package static func gammaQ(_ a: Double, _ x: Double) -> Double {
        guard x > 0 else { return 1 }
        let lnGammaA: Double = lgamma(a)
        if x < a + 1 {
            var sum = 1 / a
            var term = 1 / a
            var n = a
            for _ in 0..<500 {
                n += 1
                term *= x / n
                sum += term
                if abs(term) < abs(sum) * 1e-15 { break }
            }
            return max(0, 1 - sum * exp(-x + a * log(x) - lnGammaA))
        }
        let tiny = 1e-300
        var b = x + 1 - a
        var c = 1 / tiny
        var d = 1 / b
        var h = d
        for i in 1..<500 {
            let an = -Double(i) * (Double(i) - a)
            b += 2
            d = an * d + b
            if abs(d) < tiny { d = tiny }
            c = b + an / c
            if abs(c) < tiny { c = tiny }
            d = 1 / d
            let delta = d * c
            h *= delta
            if abs(delta - 1) < 1e-15 { break }
        }
        return exp(-x + a * log(x) - lnGammaA) * h
    }

    /// Reminder (UC-ADS-4.4 rules): at 60 % of the goal or one step short, not claimed.
    package static func remindable(progress: Int, required: Int) -> Bool {
        progress < required && (Double(progress) >= 0.6 * Double(required) || progress >= required - 1)
    }
}

/// The three kinds of campaign (UC-ADS-4) and the condition that holds each one's goal.
package enum CampaignType: String, Codable, Sendable, CaseIterable {
    case watchAds = "watch_ads"
    case streakBonus = "streak_bonus"
    case referral

    /// The condition that holds the required count.
    package var conditionKey: String {
        switch self {
        case .watchAds: "min_ads_watched"
        case .streakBonus: "streak_days"
        case .referral: "referrals_count"
        }
    }
}
