// Catalogue: offline categories, created or renamed by id (what the app downloads).
import { api } from "../api.js";
import { action, confirmAction, field, h, notify, page } from "../ui.js";

export default async function catalogue(_rest, { may }) {
  if (!may("admin")) return page("Catalogue", h("p", {}, "Only admins change the catalogue."));
  const id = h("input", { name: "category_id", required: true, pattern: "[A-Za-z0-9_-]{1,64}" });
  const name = h("input", { name: "category_name", required: true, maxlength: "200" });
  const description = h("textarea", { name: "category_description", rows: "3" });
  return page("Catalogue", h("form", { class: "card", "aria-label": "Category" }, h("h2", {}, "Create or rename a category"),
    field("Category id", id), field("Name", name), field("Description", description),
    action("Save category", async () => {
      if (!(await confirmAction(`Save category ${id.value}? Apps see it at their next sync.`))) return;
      const r = await api("PUT", `/offline/v1/admin/categories/${encodeURIComponent(id.value.trim())}`, { name: name.value.trim(), description: description.value });
      notify(`Saved ${r.id}: ${r.name}.`, "ok");
    }, { class: "primary" })));
}
