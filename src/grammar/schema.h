// JSON schema -> Grammar, for response_format json_schema. The subset:
//   enforced: type (one or an array of: string, number, integer, boolean, null, object, array),
//     properties + required (declared properties are generated in declared order; required ones always
//     appear, optional ones may be left out), additionalProperties (only for objects without properties:
//     false gives {}, a schema types the values of any keys, absent / true allows any keys and values;
//     beside properties it is ignored: only declared properties are generated, which every value of
//     additionalProperties allows), items, minItems, maxItems, minLength, maxLength, enum, const, anyOf,
//     oneOf (as anyOf: exclusivity is not checked), allOf with one schema, nullable (OpenAPI: true adds
//     null), $ref to "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed; a cycle that
//     consumes no input is refused). Enum and const values are generated in their canonical
//     serialisation (nlohmann's dump(): no spaces, minimal escapes). "integer" allows no fraction or
//     exponent. Schema true / {} is any value.
//   ignored (they do not restrict what is valid, or are documented as not checked): title,
//     description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly,
//     discriminator, format (not checked: "date-time", "email", ... are plain strings), contentEncoding,
//     contentMediaType, $defs / definitions (used through $ref), uniqueItems false, and any keyword this
//     list does not name.
//   refused (400 naming the keyword's path): pattern, patternProperties, propertyNames, minProperties,
//     maxProperties, dependentRequired, dependentSchemas, dependencies, minimum, maximum,
//     exclusiveMinimum, exclusiveMaximum, multipleOf, uniqueItems true, contains, minContains,
//     maxContains, prefixItems, items as an array, additionalItems, unevaluatedProperties,
//     unevaluatedItems, not, if / then / else, allOf with several schemas, $ref elsewhere.
// Bounds (400): 20,000 nodes, nesting 64, 256 alternatives once nested ones are flattened into one list,
// 200,000 units of compile work (schemas, keys of schema objects, type names, enum values, required names);
// every part the root reaches must have an instance within the matcher's 64 nested containers (a required
// property or minItems > 0 leading back to its own schema has none).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <variant>

#include "grammar/grammar.h"

namespace ds::grammar {

struct SchemaError {
  std::string message;  // names the path
  std::string path;     // e.g. "response_format.json_schema.schema.properties.age.type"
};

// `path` names `schema` in errors (the request field it came from).
std::variant<Grammar, SchemaError> compile_schema(const nlohmann::ordered_json& schema, const std::string& path);

// compile_schema calls so far in this process (tests: a schema the server has cached is not compiled again).
uint64_t schemas_compiled();

}  // namespace ds::grammar
