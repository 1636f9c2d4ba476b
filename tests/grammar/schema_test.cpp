// Schemas compiled into grammars: instances are taken, near misses refused, bad or unsupported schemas give
// errors naming the path.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>

#include "grammar/matcher.h"
#include "grammar/schema.h"

namespace ds::grammar {
namespace {

using json = nlohmann::ordered_json;

Grammar compile(const std::string& schema) {
  auto r = compile_schema(json::parse(schema), "schema");
  if (auto* e = std::get_if<SchemaError>(&r)) {
    ADD_FAILURE() << e->message;
    return Grammar();
  }
  return std::get<Grammar>(std::move(r));
}

bool accepts(const Grammar& g, const std::string& doc) {
  Matcher m(g);
  return m.advance(doc) && m.complete();
}

SchemaError error_of(const std::string& schema) {
  auto r = compile_schema(json::parse(schema), "response_format.json_schema.schema");
  if (auto* e = std::get_if<SchemaError>(&r)) return *e;
  ADD_FAILURE() << "compiled: " << schema;
  return {};
}

// What pydantic writes for a model with a nested model, an optional field and an enum.
const char* kPydantic = R"({
  "$defs": {
    "Color": {"enum": ["red", "green"], "title": "Color", "type": "string"},
    "Pet": {"properties": {"name": {"title": "Name", "type": "string"},
                           "age": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null}},
            "required": ["name"], "title": "Pet", "type": "object", "additionalProperties": false}
  },
  "properties": {
    "owner": {"type": "string", "format": "email", "description": "ignored"},
    "color": {"$ref": "#/$defs/Color"},
    "pets": {"items": {"$ref": "#/$defs/Pet"}, "type": "array", "minItems": 1, "maxItems": 2},
    "ok": {"type": "boolean"}
  },
  "required": ["owner", "color", "pets", "ok"],
  "title": "Owner", "type": "object", "additionalProperties": false
})";

TEST(Schema, PydanticInstancesAndNearMisses) {
  Grammar g = compile(kPydantic);
  EXPECT_TRUE(accepts(g, R"({"owner":"a@b","color":"red","pets":[{"name":"x"}],"ok":true})"));
  EXPECT_TRUE(accepts(g, R"({"owner":"","color":"green","pets":[{"name":"x","age":3},{"name":"y","age":null}],"ok":false})"));
  EXPECT_TRUE(accepts(g, "{ \"owner\" : \"a\",\n \"color\":\"red\", \"pets\":[ {\"name\":\"x\"} ], \"ok\":true }"));
  const char* misses[] = {
      R"({"color":"red","owner":"a","pets":[{"name":"x"}],"ok":true})",  // out of declared order
      R"({"owner":"a","pets":[{"name":"x"}],"ok":true})",                // a required property missing
      R"({"owner":"a","color":"blue","pets":[{"name":"x"}],"ok":true})",  // not in the enum
      R"({"owner":"a","color":"red","pets":[],"ok":true})",              // minItems
      R"({"owner":"a","color":"red","pets":[{"name":"x"},{"name":"y"},{"name":"z"}],"ok":true})",  // maxItems
      R"({"owner":"a","color":"red","pets":[{"name":"x","age":1.5}],"ok":true})",  // integer
      R"({"owner":"a","color":"red","pets":[{"age":1}],"ok":true})",      // Pet.name required
      R"({"owner":"a","color":"red","pets":[{"name":"x"}],"ok":true,"extra":1})",  // undeclared
      R"({"owner":"a","color":"red","pets":[{"name":"x"}],"ok":1})",
      R"({"owner":1,"color":"red","pets":[{"name":"x"}],"ok":true})",
      R"({"ow ner":"a","color":"red","pets":[{"name":"x"}],"ok":true})",  // a declared key, but not exactly
      R"({" owner":"a","color":"red","pets":[{"name":"x"}],"ok":true})",
  };
  for (const char* m : misses) EXPECT_FALSE(accepts(g, m)) << m;
}

TEST(Schema, TypesEnumsConstAndNullable) {
  Grammar g = compile(R"({"type": ["string", "null"]})");
  EXPECT_TRUE(accepts(g, "\"x\""));
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_FALSE(accepts(g, "1"));
  g = compile(R"({"enum": [1, 12, "a", [1, 2], {"k": null}, true]})");
  for (const char* ok : {"1", "12", "\"a\"", "[1,2]", "{\"k\":null}", "true"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"123", "2", "\"b\"", "[1, 2]", "[1]", "false"}) EXPECT_FALSE(accepts(g, bad)) << bad;
  g = compile(R"({"const": "only"})");
  EXPECT_TRUE(accepts(g, "\"only\""));
  EXPECT_FALSE(accepts(g, "\"onl\""));
  g = compile(R"({"type": "integer", "nullable": true})");
  EXPECT_TRUE(accepts(g, "null"));
  EXPECT_TRUE(accepts(g, "-7"));
  EXPECT_FALSE(accepts(g, "7e1"));
  g = compile(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_FALSE(accepts(g, "\"a\""));
  EXPECT_TRUE(accepts(g, "\"ab\""));
  EXPECT_TRUE(accepts(g, "\"\\u00e9\xc3\xa9\\ud83d\\ude00\""));  // three characters: escapes and UTF-8 count once
  EXPECT_FALSE(accepts(g, "\"abcd\""));
}

TEST(Schema, LargeEnum) {
  json values = json::array();
  for (int i = 0; i < 1000; i++) values.push_back("v" + std::to_string(i));
  for (int i = 0; i < 100; i++) values.push_back(i * 7);
  auto r = compile_schema(json{{"enum", values}}, "schema");
  ASSERT_TRUE(std::holds_alternative<Grammar>(r));
  const Grammar& g = std::get<Grammar>(r);
  for (const json& v : values) EXPECT_TRUE(accepts(g, v.dump())) << v.dump();
  for (const char* bad : {"\"v1000\"", "\"v\"", "\"v01\"", "1", "700", "69", "\"w1\""}) EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(Schema, OptionalPropertiesMaySkipButKeepOrder) {
  Grammar g = compile(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                          "c": {"type": "integer"}}, "required": ["c"]})");
  for (const char* ok : {"{\"c\":1}", "{\"a\":1,\"c\":2}", "{\"b\":1,\"c\":2}", "{\"a\":1,\"b\":2,\"c\":3}"})
    EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"{}", "{\"a\":1}", "{\"c\":1,\"a\":2}", "{\"a\":1,\"a\":2,\"c\":3}", "{\"ab\":1,\"c\":2}"})
    EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(Schema, FreeObjectsAndEmptyOnes) {
  Grammar g = compile(R"({"type": "object", "additionalProperties": {"type": "number"}})");
  EXPECT_TRUE(accepts(g, "{\"x\":1,\"y\":2.5}"));
  EXPECT_FALSE(accepts(g, "{\"x\":\"s\"}"));
  g = compile(R"({"type": "object", "additionalProperties": false})");
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_FALSE(accepts(g, "{\"x\":1}"));
  g = compile("{}");
  EXPECT_TRUE(accepts(g, "[1,\"a\",{}]"));
}

TEST(Schema, RecursiveReferences) {
  Grammar g = compile(R"({"$ref": "#/definitions/Node", "definitions": {"Node": {"type": "object",
      "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/definitions/Node"}, {"type": "null"}]}},
      "required": ["v", "next"]}}})");
  EXPECT_TRUE(accepts(g, R"({"v":1,"next":{"v":2,"next":null}})"));
  EXPECT_FALSE(accepts(g, R"({"v":1,"next":{"v":2}})"));
  g = compile(R"({"type": "array", "items": {"$ref": "#"}, "maxItems": 2})");
  EXPECT_TRUE(accepts(g, "[[],[[]]]"));
  EXPECT_FALSE(accepts(g, "[1]"));
}

TEST(Schema, NestedAlternativesAreFlattenedAndBounded) {
  // A0 .. A12, each anyOf [previous, previous]: 4096 paths to two leaves unless flattened.
  json defs = json::object();
  defs["A0"] = json::parse(R"({"anyOf": [{"type": "string"}, {"type": "integer"}]})");
  for (int i = 1; i <= 12; i++) {
    const std::string prev = "#/$defs/A" + std::to_string(i - 1);
    defs["A" + std::to_string(i)] = {{"anyOf", json::array({{{"$ref", prev}}, {{"$ref", prev}}, {{"type", "null"}}})}};
  }
  json schema = {{"$defs", defs}, {"$ref", "#/$defs/A12"}};
  auto r = compile_schema(schema, "schema");
  ASSERT_TRUE(std::holds_alternative<Grammar>(r));
  const Grammar& g = std::get<Grammar>(r);
  for (const Node& n : g.nodes)
    for (int32_t a : n.alts) EXPECT_NE(g.nodes[a].kind, Kind::AnyOf);  // one level of alternatives
  EXPECT_EQ(g.nodes[g.root].alts.size(), 3u);                          // string, integer, null
  for (const char* ok : {"12", "\"s\"", "null"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  EXPECT_FALSE(accepts(g, "1.5"));
  // More than 256 alternatives once flattened is a 400.
  json many = json::array();
  for (int i = 0; i < 300; i++) many.push_back({{"const", i}});
  auto e = compile_schema(json{{"anyOf", many}}, "response_format.json_schema.schema");
  ASSERT_TRUE(std::holds_alternative<SchemaError>(e));
  EXPECT_EQ(std::get<SchemaError>(e).path, "response_format.json_schema.schema.anyOf");
}

TEST(Schema, ErrorsNameThePath) {
  struct Case {
    const char* schema;
    const char* path;
  };
  const Case cases[] = {
      {R"({"properties": {"age": {"type": "int"}}})", "response_format.json_schema.schema.properties.age.type"},
      {R"({"type": 3})", "response_format.json_schema.schema.type"},
      {R"({"type": ["string", "date"]})", "response_format.json_schema.schema.type[1]"},
      {R"({"properties": {"s": {"type": "string", "pattern": "^a"}}})",
       "response_format.json_schema.schema.properties.s.pattern"},
      {R"({"type": "integer", "minimum": 0})", "response_format.json_schema.schema.minimum"},
      {R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})",
       "response_format.json_schema.schema.uniqueItems"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "response_format.json_schema.schema.required"},
      {R"({"$ref": "#/$defs/Missing"})", "response_format.json_schema.schema.$ref"},
      {R"({"$ref": "http://x/y"})", "response_format.json_schema.schema.$ref"},
      {R"({"$defs": {"A": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"})", "response_format.json_schema.schema.$defs.A"},
      {R"({"$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}, "$ref": "#/$defs/A"})",
       "response_format.json_schema.schema.$defs.A"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "response_format.json_schema.schema.minItems"},
      {R"({"type": "array", "maxItems": -1})", "response_format.json_schema.schema.maxItems"},
      {R"({"anyOf": []})", "response_format.json_schema.schema.anyOf"},
      {R"({"enum": []})", "response_format.json_schema.schema.enum"},
      {R"({"properties": {"x": false}})", "response_format.json_schema.schema.properties.x"},
      {R"({"allOf": [{}, {}]})", "response_format.json_schema.schema.allOf"},
      {R"("string")", "response_format.json_schema.schema"},
  };
  for (const Case& c : cases) {
    const SchemaError e = error_of(c.schema);
    EXPECT_EQ(e.path, c.path) << c.schema << ": " << e.message;
    EXPECT_NE(e.message.find(c.path), std::string::npos) << e.message;
  }
}

// Schemas built to cost more than they weigh: each is refused (or compiled) quickly. Before the work bound, the
// first three took seconds to minutes (required scanned every property for every name; a type array compiled its
// 2,000-property object again per entry; a type array of leaves added no node, so the node bound never came).
TEST(Schema, CompileWorkIsBounded) {
  auto timed = [](const json& schema, bool want_error) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = compile_schema(schema, "schema");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(std::holds_alternative<SchemaError>(r), want_error);
    if (auto* e = std::get_if<SchemaError>(&r)) {
      EXPECT_NE(e->message.find("too large"), std::string::npos) << e->message;
    }
    return ms;
  };
  json props = json::object(), required = json::array();
  for (int i = 0; i < 5000; i++) props["p" + std::to_string(i)] = {{"type", "number"}}, required.push_back("p" + std::to_string(i));
  EXPECT_LT(timed({{"type", "object"}, {"properties", props}, {"required", required}}, false), 500);
  json repeated = json::array();
  for (int i = 0; i < 300000; i++) repeated.push_back("p4999");
  EXPECT_LT(timed({{"type", "object"}, {"properties", props}, {"required", repeated}}, true), 500);
  json objects = json::array();
  for (int i = 0; i < 3000; i++) objects.push_back("object");
  EXPECT_LT(timed({{"type", objects}, {"properties", props}}, true), 500);
  json leaves = json::array(), strings = json::array(), values = json::array();
  for (int i = 0; i < 300000; i++) leaves.push_back("string"), strings.push_back({{"type", "number"}}), values.push_back(i);
  EXPECT_LT(timed({{"type", leaves}}, true), 500);
  EXPECT_LT(timed({{"anyOf", strings}}, true), 500);
  EXPECT_LT(timed({{"enum", values}}, true), 500);
}

// A chain of 9,000 alternatives through references (each a one-branch anyOf): checked and flattened without
// recursion (a recursive walk as deep as the node bound could overflow a server thread's stack).
TEST(Schema, LongChainsOfAlternatives) {
  const int n = 9000;
  json defs = json::object(), props = json::object();
  for (int i = 0; i < n; i++)
    defs["d" + std::to_string(i)] = {{"anyOf", json::array({{{"$ref", "#/$defs/d" + std::to_string(i + 1)}}})}};
  defs["d" + std::to_string(n)] = {{"type", "string"}};
  for (int i = n; i >= 0; i--) props["p" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i)}};
  Grammar g = compile(json{{"$defs", defs}, {"properties", props}}.dump());
  EXPECT_TRUE(accepts(g, R"({"p9000":"a","p8999":"b"})"));
  EXPECT_FALSE(accepts(g, R"({"p8999":1})"));
}

// A schema whose instances cannot nest within the matcher's 64 containers (or have no finite instance at all) is
// a 400 naming the schema; before, it compiled and the model wrote into it until no token could continue.
TEST(Schema, SchemasWithoutAReachableInstanceAreRefused) {
  const char* refused[] = {
      R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})",
      R"({"type": "array", "items": {"$ref": "#"}, "minItems": 1})",
      R"({"$defs": {"A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}, "required": ["b"]},
                    "B": {"type": "array", "items": {"$ref": "#/$defs/A"}, "minItems": 2}},
          "type": "object", "properties": {"x": {"type": "integer"}, "a": {"$ref": "#/$defs/A"}}})",
      R"({"anyOf": [{"type": "null"}, {"type": "object", "properties": {"n": {"$ref": "#/anyOf/1"}}}]})",
  };
  // (the last one: "#/anyOf/1" is not a supported reference; refused for that)
  for (const char* s : refused) {
    auto r = compile_schema(json::parse(s), "schema");
    EXPECT_TRUE(std::holds_alternative<SchemaError>(r)) << s;
  }
  SchemaError e = error_of(R"({"type": "object", "properties": {"opt": {"$ref": "#/$defs/Loop"}},
      "$defs": {"Loop": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Loop"}}, "required": ["next"]}}})");
  EXPECT_EQ(e.path, "response_format.json_schema.schema.$defs.Loop") << e.message;
  EXPECT_NE(e.message.find("64 containers"), std::string::npos) << e.message;
  // 64 nested arrays of at least one item fit; 65 do not.
  std::string s = R"({"type": "string"})";
  for (int i = 0; i < 64; i++) s = R"({"type": "array", "minItems": 1, "items": )" + s + "}";
  Grammar g = compile(s);
  EXPECT_TRUE(accepts(g, std::string(64, '[') + "\"x\"" + std::string(64, ']')));
  s = R"({"$defs": {"d": )" + s + R"(}, "type": "array", "minItems": 1, "items": {"$ref": "#/$defs/d"}})";
  EXPECT_TRUE(std::holds_alternative<SchemaError>(compile_schema(json::parse(s), "schema")));
  // Recursion with a way out stays allowed.
  g = compile(R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
                  "required": ["next"]})");
  EXPECT_TRUE(accepts(g, R"({"next":{"next":null}})"));
}

}  // namespace
}  // namespace ds::grammar
