// Ads revenue: the last 30 days from the daily aggregates, by day, ad type and provider.
import { api } from "../api.js";
import { barChart, h, page } from "../ui.js";

export default async function revenue() {
  const r = await api("GET", "/ads/v1/analytics/revenue");
  const money = (v) => v.toFixed(2);
  const chart = (title, items) => (items.length ? barChart(title, items, money) : h("p", {}, `${title}: nothing yet.`));
  const grouped = (o) => Object.entries(o || {}).map(([label, f]) => ({ label, value: Number(f.revenue || 0) }));
  const days = (r.by_date || []).filter((d) => d.revenue > 0 || d.impressions > 0).map((d) => ({ label: d.date, value: Number(d.revenue) }));
  return page("Ads revenue",
    h("p", { class: "balance" }, `${r.start_date} → ${r.end_date}: revenue ${money(r.total_revenue)}${r.estimated ? " (part estimated)" : ""} · `
      + `${r.total_impressions} impressions · fill rate ${(r.fill_rate * 100).toFixed(1)} % · eCPM ${money(r.avg_ecpm)}`),
    chart("Revenue by day", days), chart("Revenue by ad type", grouped(r.by_type)), chart("Revenue by provider", grouped(r.by_provider)));
}
