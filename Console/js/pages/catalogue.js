// Catalogue: the offline categories the app downloads (items and size), paged by id; an admin
// creates or renames one by id.
import { api } from "../api.js";
import { action, confirmAction, field, fmtDate, h, notify, page, table } from "../ui.js";

export default async function catalogue(_rest, { may }) {
  const list = h("div", {});
  let after = null;
  async function load(more) {
    const q = new URLSearchParams({ limit: "50" });
    if (more && after) q.set("after", after);
    const r = await api("GET", `/offline/v1/admin/categories?${q}`);
    after = r.next_after ?? null;
    list.replaceChildren(table("Categories", [
      { label: "Id", value: (c) => c.id }, { label: "Name", value: (c) => c.name },
      { label: "Items", value: (c) => String(c.items) }, { label: "Size", value: (c) => `${(c.size_bytes / 1024).toFixed(1)} KB` },
      { label: "Active", value: (c) => (c.active ? "yes" : "no") }, { label: "Updated", value: (c) => fmtDate(c.updated_at) }], r.categories),
    after ? action("Next categories", () => load(true)) : null);
  }
  await load(false);
  if (!may("admin")) return page("Catalogue", list, h("p", {}, "Only admins change the catalogue."));
  const id = h("input", { name: "category_id", required: true, pattern: "[A-Za-z0-9_-]{1,64}" });
  const name = h("input", { name: "category_name", required: true, maxlength: "200" });
  const description = h("textarea", { name: "category_description", rows: "3" });
  return page("Catalogue", list, h("form", { class: "card", "aria-label": "Category" }, h("h2", {}, "Create or rename a category"),
    field("Category id", id), field("Name", name), field("Description", description),
    action("Save category", async () => {
      if (!(await confirmAction(`Save category ${id.value}? Apps see it at their next sync.`))) return;
      const r = await api("PUT", `/offline/v1/admin/categories/${encodeURIComponent(id.value.trim())}`, { name: name.value.trim(), description: description.value });
      notify(`Saved ${r.id}: ${r.name}.`, "ok");
      await load(false);
    }, { class: "primary" })));
}
