// Edited tool arguments checked against the tool's JSON schema before they are sent, every
// problem at once: JSON syntax, an object, required names, no undeclared names (declared
// properties are closed, as the server and the tools treat them) and the type of each
// property. The server checks again with a full JSON Schema validator (it too lists every
// problem) and its answer is what counts.

const TYPES = {
  string: (v) => typeof v === "string",
  integer: (v) => Number.isInteger(v),
  number: (v) => typeof v === "number" && Number.isFinite(v),
  boolean: (v) => typeof v === "boolean",
  object: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
  array: (v) => Array.isArray(v),
  null: (v) => v === null,
};

/** {value, errors}: the parsed arguments and every problem `schema` finds in `text`, one
 * "'field' what is wrong" each ([] when the page sees none; the server may find more). */
export function checkArguments(text, schema) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { errors: [`not valid JSON: ${err.message}`] };
  }
  if (!TYPES.object(value)) return { errors: ["the arguments must be a JSON object"] };
  if (!schema || typeof schema !== "object") return { value, errors: [] };
  const errors = []; // [field, problem]
  const properties = schema.properties || {};
  for (const name of schema.required || []) {
    if (!(name in value)) errors.push([String(name), "is required"]);
  }
  const closed = "properties" in schema && (schema.additionalProperties ?? false) === false;
  for (const [name, v] of Object.entries(value)) {
    const rule = properties[name];
    if (!rule) {
      if (closed) errors.push([name, "is not an argument of this tool"]);
      continue;
    }
    const kinds = [].concat(rule.type || []);
    if (kinds.length && !kinds.some((k) => TYPES[k] && TYPES[k](v))) {
      errors.push([name, `must be of type ${kinds.join(" or ")}`]);
    }
  }
  // By field name, as the server lists them: the same edit reads the same in both places.
  errors.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return { value, errors: errors.map(([field, problem]) => `'${field.slice(0, 60)}' ${problem}`) };
}
