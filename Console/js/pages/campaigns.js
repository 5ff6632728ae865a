// Campaigns: the list, a new campaign with its variants, a campaign's weights and results
// (each variant's completion rate, the difference with its 95 % interval drawn, the
// sample-ratio verdict, the CSV).
import { api, currentSession } from "../api.js";
import { action, barChart, confirmAction, field, fmtDate, h, intervalChart, notify, page, table } from "../ui.js";

const pct = (v) => (v === null || v === undefined ? "—" : (v * 100).toFixed(1) + " %");

function conditionsFor(type, n) {
  return type === "watch_ads" ? { min_ads_watched: n } : type === "streak_bonus" ? { streak_days: n } : { referrals_count: n };
}

function createForm() {
  const name = h("input", { name: "name", required: true, maxlength: "120" });
  const type = h("select", { name: "campaign_type" }, ["watch_ads", "streak_bonus", "referral"].map((t) => h("option", { value: t }, t)));
  const required = h("input", { type: "number", name: "required", min: "1", max: "1000", value: "3" });
  const reward = h("input", { type: "number", name: "reward", min: "1", max: "1000", value: "5" });
  const ends = h("input", { type: "date", name: "ends_at", required: true, value: new Date(Date.now() + 14 * 86400e3).toISOString().slice(0, 10) });
  const rows = h("tbody", {});
  const addVariant = (key, weight) => {
    const k = h("input", { name: "variant_key", value: key, pattern: "[A-Za-z0-9_-]{1,32}", "aria-label": "Variant key" });
    const w = h("input", { type: "number", name: "variant_weight", min: "0", max: "100", value: String(weight), "aria-label": "Variant weight" });
    const r = h("input", { type: "number", name: "variant_reward", min: "1", max: "1000", placeholder: "as the campaign", "aria-label": "Variant reward" });
    rows.append(h("tr", {}, h("td", {}, k), h("td", {}, w), h("td", {}, r)));
  };
  addVariant("control", 50); addVariant("treatment", 50);
  return h("form", { class: "card", "aria-label": "New campaign" }, h("h2", {}, "New campaign"),
    field("Name", name), field("Type", type), field("Required (ads, days or friends)", required), field("Reward (credits)", reward), field("Ends on", ends),
    h("table", {}, h("caption", {}, "Variants"), h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Key"), h("th", { scope: "col" }, "Weight"), h("th", { scope: "col" }, "Reward"))), rows),
    action("Add a variant", () => addVariant("", 0)),
    action("Create campaign", async () => {
      const variants = [...rows.children].map((tr) => {
        const [k, w, r] = tr.querySelectorAll("input");
        const v = { key: k.value.trim(), weight: Number(w.value) };
        if (r.value) v.reward = { amount: Number(r.value) };
        return v;
      }).filter((v) => v.key);
      const body = { name: name.value.trim(), campaign_type: type.value, reward: { type: "credits", amount: Number(reward.value) },
        conditions: conditionsFor(type.value, Number(required.value)), ends_at: new Date(ends.value + "T23:59:59Z").toISOString() };
      if (variants.length) body.variants = variants;
      if (!(await confirmAction(`Create "${body.name}" with ${variants.length} variants?`))) return;
      const c = await api("POST", "/ads/v1/admin/campaigns", body);
      location.hash = "#/campaigns/" + c.id;
    }, { class: "primary" }));
}

async function list(rest, may) {
  const offset = Number(rest[1] || 0);
  const r = await api("GET", `/ads/v1/admin/campaigns?limit=20&offset=${offset}`);
  const t = table("Campaigns", [
    { label: "Name", value: (c) => h("a", { href: "#/campaigns/" + c.id }, c.name) }, { label: "Type", value: (c) => c.campaign_type },
    { label: "Status", value: (c) => c.status }, { label: "Variants", value: (c) => c.variants.map((v) => `${v.key} ${v.weight}`).join(", ") || "—" },
    { label: "Ends", value: (c) => fmtDate(c.ends_at) }], r.campaigns);
  const pager = h("p", { class: "row" },
    offset > 0 ? h("a", { href: `#/campaigns/page/${Math.max(0, offset - 20)}` }, "Newer") : null,
    r.campaigns.length === 20 ? h("a", { href: `#/campaigns/page/${offset + 20}` }, "Older") : null);
  return page("Campaigns", t, pager, may("admin") ? createForm() : null);
}

async function detail(id, may) {
  const [c, r] = await Promise.all([api("GET", `/ads/v1/admin/campaigns/${id}`), api("GET", `/ads/v1/admin/campaigns/${id}/results`)]);
  const results = table("Results by variant", [
    { label: "Variant", value: (v) => v.key ?? "—" }, { label: "Weight", value: (v) => String(v.weight ?? "—") },
    { label: "Assigned", value: (v) => String(v.assigned) }, { label: "Exposed", value: (v) => String(v.exposed) },
    { label: "Completed", value: (v) => String(v.completed) }, { label: "Completion rate", value: (v) => pct(v.completion_rate) },
    { label: "Versus the first", value: (v) => (v.versus_first ? `${pct(v.versus_first.difference)} [${pct(v.versus_first.ci95_low)}, ${pct(v.versus_first.ci95_high)}] p=${v.versus_first.p_value.toFixed(3)}` : "—") },
    { label: "Credits granted", value: (v) => String(v.credits_granted) }], r.variants);
  const rates = barChart("Completion rate by variant", r.variants.map((v) => ({ label: v.key ?? "all", value: v.completion_rate ?? 0 })), pct);
  const diffs = r.variants.filter((v) => v.versus_first);
  const interval = diffs.length
    ? intervalChart("Difference with the first variant, 95 % interval", diffs.map((v) => ({ label: v.key, value: v.versus_first.difference, low: v.versus_first.ci95_low, high: v.versus_first.ci95_high })))
    : h("p", {}, "No difference to draw yet: nobody was shown a variant.");
  const ratio = r.sample_ratio
    ? h("p", { class: "notice " + (r.sample_ratio.mismatch ? "error" : "ok") }, r.sample_ratio.mismatch
      ? `Sample ratio mismatch (χ² ${r.sample_ratio.chi_square.toFixed(2)}, p ${r.sample_ratio.p_value.toExponential(2)}): the split does not follow the weights; do not trust the difference.`
      : `The split follows the weights (χ² ${r.sample_ratio.chi_square.toFixed(2)}, p ${r.sample_ratio.p_value.toFixed(3)}).`)
    : null;
  const csv = action("Download CSV", async () => {
    const response = await fetch(`/ads/v1/admin/campaigns/${id}/results?format=csv`, { headers: { "X-App-Id": currentSession().appId, Authorization: "Bearer " + currentSession().token } });
    if (!response.ok) throw new Error(`The CSV was refused (${response.status})`);
    const url = URL.createObjectURL(await response.blob());
    const a = h("a", { href: url, download: `campaign-${id}.csv` });
    document.body.append(a); a.click(); a.remove(); URL.revokeObjectURL(url);
  });
  const parts = [h("p", {}, `${c.campaign_type}, ${c.status}, ${fmtDate(c.starts_at)} → ${fmtDate(c.ends_at)}`), results, rates, interval, ratio,
    (r.warnings || []).map((w) => h("p", { class: "notice warn" }, w)), csv];
  if (may("admin") && c.variants.length) {
    const inputs = c.variants.map((v) => h("input", { type: "number", min: "0", max: "100", value: String(v.weight), "aria-label": `Weight of ${v.key}` }));
    parts.push(h("form", { class: "card", "aria-label": "Weights" }, h("h2", {}, "Weights"),
      c.variants.map((v, i) => h("div", { class: "field inline" }, h("span", {}, v.key), inputs[i])),
      action("Save weights", async () => {
        if (!(await confirmAction("Change the weights? New players are split by them; those assigned keep their variant."))) return;
        await api("PATCH", `/ads/v1/admin/campaigns/${id}`, { variants: c.variants.map((v, i) => ({ key: v.key, weight: Number(inputs[i].value), reward: { amount: v.reward_amount }, conditions: v.conditions, holdout: v.holdout })) });
        notify("Weights saved.", "ok");
      })));
    parts.push(action("End the campaign now", async () => {
      if (!(await confirmAction(`End "${c.name}" now? Progress stops counting.`))) return;
      await api("POST", `/ads/v1/admin/campaigns/${id}/end`);
      notify("Ended.", "ok");
    }));
  }
  return page(c.name, ...parts);
}

export default async function campaigns(rest, { may }) {
  if (rest[0] && rest[0] !== "page") return detail(rest[0], may);
  return list(rest, may);
}
