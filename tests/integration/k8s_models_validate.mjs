// Validate Kubernetes objects with the validators of the npm package
// kubernetes-models (generated from the Kubernetes OpenAPI spec).
// usage: node k8s_models_validate.mjs MODELS_DIR < [{"apiVersion":..., "kind":...}, ...]
// prints [{"model": "batch/v1/Job" | null, "errors": [...]}, ...] in the same order.
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const root = join(process.argv[2], "node_modules", "kubernetes-models");
const docs = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const doc of docs) {
  // "v1" -> v1/Kind, "batch/v1" -> batch/v1/Kind; a "kind" of the form
  // "group/version/Kind" names a nested type (JobTemplateSpec, PodTemplateSpec).
  const model = doc.__model || `${doc.apiVersion}/${doc.kind}`;
  const file = join(root, `${model}.js`);
  if (!existsSync(file)) {
    out.push({ model: null, errors: [] });
    continue;
  }
  const mod = await import(pathToFileURL(file).href);
  const name = model.split("/").pop();
  const body = { ...doc };
  delete body.__model;
  try {
    new mod[name](body).validate();
    out.push({ model, errors: [] });
  } catch (e) {
    const errs = (e.errors || []).map((x) => `${x.instancePath || "/"} ${x.message}`);
    out.push({ model, errors: errs.length ? errs : [String(e.message || e)] });
  }
}
process.stdout.write(JSON.stringify(out));
