// Edited tool arguments checked against the tool's JSON schema before they are sent: JSON
// syntax, an object, required names, no undeclared names (declared properties are closed,
// as the server and the tools treat them) and the type of each property. The server checks
// again with a full JSON Schema validator and its answer is what counts.

const TYPES = {
  string: (v) => typeof v === "string",
  integer: (v) => Number.isInteger(v),
  number: (v) => typeof v === "number" && Number.isFinite(v),
  boolean: (v) => typeof v === "boolean",
  object: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
  array: (v) => Array.isArray(v),
  null: (v) => v === null,
};

/** {value} when `text` is acceptable arguments for `schema`, else {error}. */
export function checkArguments(text, schema) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { error: `not valid JSON: ${err.message}` };
  }
  if (!TYPES.object(value)) return { error: "the arguments must be a JSON object" };
  if (!schema || typeof schema !== "object") return { value };
  const properties = schema.properties || {};
  for (const name of schema.required || []) {
    if (!(name in value)) return { error: `'${name}' is required` };
  }
  const closed = "properties" in schema && (schema.additionalProperties ?? false) === false;
  for (const [name, v] of Object.entries(value)) {
    const rule = properties[name];
    if (!rule) {
      if (closed) return { error: `'${name.slice(0, 60)}' is not an argument of this tool` };
      continue;
    }
    const kinds = [].concat(rule.type || []);
    if (kinds.length && !kinds.some((k) => TYPES[k] && TYPES[k](v))) {
      return { error: `'${name}' must be of type ${kinds.join(" or ")}` };
    }
  }
  return { value };
}
