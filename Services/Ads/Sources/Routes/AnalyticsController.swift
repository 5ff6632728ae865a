import AdsDomain
import Foundation
import Hummingbird
import NIOCore
import PostgresNIO
import ServiceKit

/// UC-ADS-4.5 (admin credential): the revenue report as JSON, CSV and an HTML dashboard, all
/// from the daily aggregates.
struct AnalyticsController: Sendable {
    let db: DatabasePool
    let stats: StatsStore
    let ads: AdStore
    let campaigns: CampaignStore
    let refresher: StatsRefresher
    let clock: any WallClock
    let logger: Logger

    func addRoutes(to admin: RouterGroup<ServiceRequestContext>) {
        admin.get("analytics/revenue") { request, context in try await revenue(request, context) }
        admin.get("analytics/dashboard") { request, context in try await dashboard(request, context) }
        admin.post("analytics/refresh") { _, context in
            _ = try context.requireApp()
            let days = try await refresher.refresh()
            return try context.json(["refreshed_days": days])
        }
    }

    /// Retention: two years of detail.
    static let maxRangeDays = 731

    func filter(_ request: Request) throws -> StatsStore.Filter {
        let q = request.uri.queryParameters
        let now = clock.now()
        func date(_ name: String, default def: Date) throws -> String {
            guard let raw = q.get(name) else { return AdStore.day(def) }
            let f = DateFormatter()
            f.locale = Locale(identifier: "en_US_POSIX")
            f.timeZone = TimeZone(identifier: "UTC")
            f.dateFormat = "yyyy-MM-dd"
            guard raw.count == 10, let d = f.date(from: raw) else { throw AppError.validation(name, "\(name) must be a date YYYY-MM-DD") }
            return AdStore.day(d)
        }
        let end = try date("end_date", default: now)
        let start = try date("start_date", default: now.addingTimeInterval(-29 * 86400))
        guard start <= end else { throw AppError.validation("start_date", "start_date must not be after end_date") }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "UTC")
        f.dateFormat = "yyyy-MM-dd"
        if let s = f.date(from: start), let e = f.date(from: end), e.timeIntervalSince(s) / 86400 > Double(Self.maxRangeDays) {
            throw AppError.validation("start_date", "the range is at most \(Self.maxRangeDays) days")
        }
        var type: String?
        if let t = q.get("ad_type") {
            guard AdType(rawValue: t) != nil else { throw AppError.validation("ad_type", "ad_type must be rewarded or interstitial") }
            type = t
        }
        var provider: String?
        if let p = q.get("provider") {
            guard p.utf8.count <= 40, p.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") }) else {
                throw AppError.validation("provider", "provider must be a provider name")
            }
            provider = p
        }
        let placement = q.get("placement") != nil ? try AdsController.placement(q.get("placement")) : nil
        if let format = q.get("format"), !["json", "csv"].contains(format) { throw AppError.validation("format", "format must be json or csv") }
        return StatsStore.Filter(start: start, end: end, adType: type, provider: provider, placement: placement)
    }

    func report(app: UUID, _ f: StatsStore.Filter) async throws -> (RevenueReport, Date?) {
        try await db.withConnection { conn in
            let rows = try await stats.rows(app: app, f, on: conn)
            let estimates = Dictionary(
                try await ads.providers(app: app, on: conn).map { ($0.name, $0.ecpmEstimateUSD) },
                uniquingKeysWith: { a, _ in a }
            )
            return (RevenueReport(rows: rows, configuredECPM: estimates), try await stats.refreshedUntil(on: conn))
        }
    }

    struct DateFigures: Encodable {
        var date: String
        var figures: RevenueReport.Figures
        func encode(to encoder: any Encoder) throws {
            try figures.encode(to: encoder)
            var c = encoder.container(keyedBy: K.self)
            try c.encode(date, forKey: .date)
        }
        enum K: String, CodingKey { case date }
    }

    struct RevenueResponse: Encodable {
        var startDate: String
        var endDate: String
        var totals: RevenueReport.Figures
        var byDate: [DateFigures]
        var byType: [String: RevenueReport.Figures]
        var byProvider: [String: RevenueReport.Figures]
        var byPlacement: [String: RevenueReport.Figures]
        var dataUpdatedAt: Date?
        enum CodingKeys: String, CodingKey {
            case startDate = "start_date"
            case endDate = "end_date"
            case totalRevenue = "total_revenue"
            case totalImpressions = "total_impressions"
            case avgECPM = "avg_ecpm"
            case fillRate = "fill_rate"
            case ctr
            case completionRate = "completion_rate"
            case estimated
            case estimatedRevenue = "estimated_revenue"
            case totalRequests = "total_requests"
            case totalClicks = "total_clicks"
            case totalCompletions = "total_completions"
            case byDate = "by_date"
            case byType = "by_type"
            case byProvider = "by_provider"
            case byPlacement = "by_placement"
            case dataUpdatedAt = "data_updated_at"
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            typealias F = RevenueReport.Figures
            try c.encode(startDate, forKey: .startDate)
            try c.encode(endDate, forKey: .endDate)
            try c.encode(F.round(totals.revenue), forKey: .totalRevenue)
            try c.encode(totals.impressions, forKey: .totalImpressions)
            try c.encode(totals.requests, forKey: .totalRequests)
            try c.encode(totals.clicks, forKey: .totalClicks)
            try c.encode(totals.completions, forKey: .totalCompletions)
            try c.encode(F.round(totals.ecpm), forKey: .avgECPM)
            try c.encode(F.round(totals.fillRate), forKey: .fillRate)
            try c.encode(F.round(totals.ctr), forKey: .ctr)
            try c.encode(F.round(totals.completionRate), forKey: .completionRate)
            try c.encode(totals.estimatedRevenue > 0, forKey: .estimated)
            try c.encode(F.round(totals.estimatedRevenue), forKey: .estimatedRevenue)
            try c.encode(byDate, forKey: .byDate)
            try c.encode(byType, forKey: .byType)
            try c.encode(byProvider, forKey: .byProvider)
            try c.encode(byPlacement, forKey: .byPlacement)
            try c.encode(dataUpdatedAt, forKey: .dataUpdatedAt)
        }
    }

    func revenue(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let f = try filter(request)
        let (r, updated) = try await report(app: app, f)
        if request.uri.queryParameters.get("format") == "csv" {
            var csv = "date,ad_type,provider,placement,requests,impressions,clicks,completions,revenue_usd,estimated_revenue_usd,ecpm\n"
            for (row, estimate) in r.rows {
                let revenue = row.revenueUSD + estimate
                let ecpm = row.impressions == 0 ? 0 : revenue / Double(row.impressions) * 1000
                csv +=
                    [
                        row.day, row.adType, row.provider, row.placement, "\(row.requests)", "\(row.impressions)", "\(row.clicks)",
                        "\(row.completions)", String(format: "%.6f", revenue), String(format: "%.6f", estimate), String(format: "%.4f", ecpm),
                    ]
                    .joined(separator: ",") + "\n"
            }
            return Response(
                status: .ok,
                headers: [
                    .contentType: "text/csv; charset=utf-8",
                    .contentDisposition: "attachment; filename=\"ad-revenue-\(f.start)-\(f.end).csv\"",
                ],
                body: .init(byteBuffer: ByteBuffer(string: csv))
            )
        }
        return try context.json(
            RevenueResponse(
                startDate: f.start,
                endDate: f.end,
                totals: r.total,
                byDate: r.byDate.map { DateFigures(date: $0.0, figures: $0.1) },
                byType: r.byType,
                byProvider: r.byProvider,
                byPlacement: r.byPlacement,
                dataUpdatedAt: updated
            )
        )
    }

    func dashboard(_ request: Request, _ context: ServiceRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let f = try filter(request)
        let (r, updated) = try await report(app: app, f)
        // #31: each running campaign's experiment beside the revenue.
        let now = clock.now()
        let experiments = try await db.withConnection { conn -> [CampaignReport] in
            var out: [CampaignReport] = []
            for c in try await campaigns.running(app: app, now: now, on: conn) {
                out.append(
                    CampaignReport(
                        campaignID: c.id,
                        name: c.name,
                        rewardAmount: c.rewardAmount,
                        required: c.required,
                        variants: try await campaigns.variants(of: [c.id], on: conn)[c.id] ?? [],
                        rows: try await campaigns.results(campaign: c.id, on: conn),
                        days: []
                    )
                )
            }
            return out
        }
        let html = RevenueDashboard.render(report: r, filter: f, updatedAt: updated, campaigns: experiments)
        return Response(
            status: .ok,
            headers: [
                .contentType: "text/html; charset=utf-8",
                .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
            ],
            body: .init(byteBuffer: ByteBuffer(string: html))
        )
    }
}

/// The admin dashboard: one self-contained HTML page (inline CSS and SVG, no script, no
/// external asset), so it renders anywhere, including behind a strict CSP.
enum RevenueDashboard {
    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func money(_ x: Double) -> String { String(format: "$%.2f", x) }

    static func table(_ title: String, _ rows: [String: RevenueReport.Figures]) -> String {
        var out =
            "<h2>\(escape(title))</h2><table><tr><th></th><th>Impressions</th><th>Completions</th><th>Clicks</th><th>Revenue</th><th>eCPM</th><th>Fill rate</th></tr>"
        for (k, v) in rows.sorted(by: { $0.value.revenue > $1.value.revenue }) {
            out +=
                "<tr><td>\(escape(k))</td><td>\(v.impressions)</td><td>\(v.completions)</td><td>\(v.clicks)</td><td>\(money(v.revenue))\(v.estimatedRevenue > 0 ? "*" : "")</td><td>\(money(v.ecpm))</td><td>\(String(format: "%.1f %%", v.fillRate * 100))</td></tr>"
        }
        return out + "</table>"
    }

    /// The running campaigns' variants: funnel, completion rate, and the difference against the
    /// first variant with its interval and p-value; a sample-ratio mismatch in red.
    static func campaignsSection(_ reports: [CampaignReport]) -> String {
        guard !reports.isEmpty else { return "" }
        func pct(_ d: Double?) -> String { d.map { String(format: "%.1f %%", $0 * 100) } ?? "–" }
        var out = "<h2>Campaigns</h2>"
        for r in reports {
            out += "<h3>\(escape(r.name))</h3>"
            if r.sampleRatio?.mismatch == true {
                out += "<p class=\"note\">Sample ratio mismatch: the exposures do not follow the weights; do not trust the differences.</p>"
            }
            out +=
                "<table><tr><th>Variant</th><th>Weight</th><th>Assigned</th><th>Exposed</th><th>Joined</th><th>Completed</th><th>Claimed</th><th>Credits</th><th>Completion</th><th>vs first (95 % CI)</th><th>p</th></tr>"
            for v in r.variants {
                let versus =
                    v.versusFirst.map {
                        "\(String(format: "%+.1f", $0.difference * 100)) pts (\(String(format: "%+.1f", $0.ciLow * 100)) to \(String(format: "%+.1f", $0.ciHigh * 100)))"
                    } ?? "–"
                out +=
                    "<tr><td>\(escape(v.key ?? "all"))\(v.holdout ? " (holdout)" : "")</td><td>\(v.weight.map { "\($0) %" } ?? "–")</td><td>\(v.assigned)</td><td>\(v.exposed)</td><td>\(v.joined)</td><td>\(v.completed)</td><td>\(v.claimed)</td><td>\(v.creditsGranted)</td><td>\(pct(v.completionRate))</td><td>\(versus)</td><td>\(v.versusFirst.map { String(format: "%.3f", $0.pValue) } ?? "–")</td></tr>"
            }
            out += "</table>"
        }
        return out
    }

    static func render(report r: RevenueReport, filter f: StatsStore.Filter, updatedAt: Date?, campaigns: [CampaignReport] = []) -> String {
        let days = r.byDate.reversed() as [(String, RevenueReport.Figures)]
        let maxRevenue = max(days.map { $0.1.revenue }.max() ?? 0, 0.01)
        let width = 900.0
        let height = 260.0
        let barGap = 4.0
        let barWidth = days.isEmpty ? 0 : max(2, (width - 40) / Double(days.count) - barGap)
        var bars = ""
        for (i, (day, fig)) in days.enumerated() {
            let h = (fig.revenue / maxRevenue) * (height - 40)
            let x = 30 + Double(i) * (barWidth + barGap)
            bars +=
                "<rect x=\"\(x)\" y=\"\(height - 20 - h)\" width=\"\(barWidth)\" height=\"\(h)\" fill=\"\(fig.estimatedRevenue > 0 ? "#9ab8e6" : "#2f6fd6")\"><title>\(escape(day)): \(money(fig.revenue))</title></rect>"
            if days.count <= 31 {
                bars +=
                    "<text x=\"\(x + barWidth / 2)\" y=\"\(height - 5)\" font-size=\"9\" text-anchor=\"middle\">\(escape(String(day.suffix(5))))</text>"
            }
        }
        let chart =
            "<svg width=\"\(Int(width))\" height=\"\(Int(height))\" role=\"img\" aria-label=\"Revenue per day\"><line x1=\"30\" y1=\"\(height - 20)\" x2=\"\(width)\" y2=\"\(height - 20)\" stroke=\"#888\"/><text x=\"2\" y=\"14\" font-size=\"10\">\(money(maxRevenue))</text>\(bars)</svg>"
        let disclaimer =
            r.total.estimatedRevenue > 0
            ? "<p class=\"note\">* Includes \(money(r.total.estimatedRevenue)) estimated from the average eCPM for views reported without revenue.</p>"
            : ""
        let filters = [f.adType.map { "type \($0)" }, f.provider.map { "provider \($0)" }, f.placement.map { "placement \($0)" }]
            .compactMap { $0 }.joined(separator: ", ")
        return """
            <!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Ad revenue \(escape(f.start)) – \(escape(f.end))</title>
            <style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}h1{font-size:22px}h2{font-size:17px;margin-top:28px}
            .kpis{display:flex;gap:16px;flex-wrap:wrap}.kpi{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:120px}
            .kpi b{display:block;font-size:20px}table{border-collapse:collapse;margin-top:8px}td,th{border-bottom:1px solid #eee;padding:4px 10px;text-align:right}
            td:first-child,th:first-child{text-align:left}.note{color:#8a5a00}</style></head><body>
            <h1>Ad revenue, \(escape(f.start)) to \(escape(f.end))\(filters.isEmpty ? "" : " (\(escape(filters)))")</h1>
            <div class="kpis"><div class="kpi">Revenue<b>\(money(r.total.revenue))\(r.total.estimatedRevenue > 0 ? "*" : "")</b></div>
            <div class="kpi">Impressions<b>\(r.total.impressions)</b></div><div class="kpi">eCPM<b>\(money(r.total.ecpm))</b></div>
            <div class="kpi">Fill rate<b>\(String(format: "%.1f %%", r.total.fillRate * 100))</b></div>
            <div class="kpi">CTR<b>\(String(format: "%.2f %%", r.total.ctr * 100))</b></div>
            <div class="kpi">Completion<b>\(String(format: "%.1f %%", r.total.completionRate * 100))</b></div></div>
            <h2>Revenue per day</h2>\(chart)\(disclaimer)
            \(table("By ad type", r.byType))\(table("By provider", r.byProvider))\(table("By placement", r.byPlacement))
            \(campaignsSection(campaigns))
            <p class="note">Data aggregated up to \(updatedAt.map { escape(JSON.iso8601($0)) } ?? "never (the aggregation job has not run)").</p>
            </body></html>
            """
    }
}
