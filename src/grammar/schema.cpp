#include "grammar/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace ds::grammar {

namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxSchemaDepth = 64;
constexpr size_t kMaxNodes = 20000;
constexpr size_t kMaxAlternatives = 256;  // after flattening: each is tried at a value's first byte

const std::set<std::string> kRefused = {
    "pattern", "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired",
    "dependentSchemas", "dependencies", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "contains", "minContains", "maxContains", "prefixItems", "additionalItems", "unevaluatedProperties",
    "unevaluatedItems", "not", "if", "then", "else"};

struct Fail {
  SchemaError e;
};

class Compiler {
 public:
  Compiler(const json& root, std::string path) : root_(root), root_path_(std::move(path)) {}

  Grammar run() {
    g_.root = compile(root_, root_path_, 0);
    check_cycles();
    flatten();
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& path, const std::string& what) {
    throw Fail{{fmt::format("'{}': {}", path, what), path}};
  }

  int32_t add(Node n, const std::string& path) {
    if (g_.nodes.size() >= kMaxNodes) fail(path, fmt::format("the schema is too large (over {} nodes)", kMaxNodes));
    const int32_t id = g_.add(std::move(n));
    paths_.resize(g_.nodes.size());
    paths_[id] = path;
    return id;
  }

  uint32_t count(const json& v, const std::string& path) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1000000)
      fail(path, "must be an integer from 0 to 1000000");
    return static_cast<uint32_t>(v.get<int64_t>());
  }

  // Leaves with the same content are one node (alternatives then merge: {"type": "null"} written twice is one).
  int32_t literal(std::vector<std::string> lits, const std::string& path) {
    std::sort(lits.begin(), lits.end());
    lits.erase(std::unique(lits.begin(), lits.end()), lits.end());
    std::string key;
    for (const std::string& l : lits) key += l + '\0';
    if (auto it = leaves_.find(key); it != leaves_.end()) return it->second;
    Node n;
    n.kind = Kind::Literal;
    n.literals = std::move(lits);
    return leaves_[key] = add(std::move(n), path);
  }

  int32_t ref(const json& r, const std::string& path, int depth) {
    if (!r.is_string()) fail(path, "must be a string");
    const std::string s = r.get<std::string>();
    if (auto it = refs_.find(s); it != refs_.end()) return it->second;
    const json* target = nullptr;
    std::string tpath;
    if (s == "#") {
      target = &root_;
      tpath = root_path_;
    } else {
      for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        const std::string p = prefix;
        if (s.rfind(p, 0) != 0) continue;
        const std::string name = s.substr(p.size());
        const std::string defs = p == "#/$defs/" ? "$defs" : "definitions";
        auto d = root_.find(defs);
        if (d != root_.end() && d->is_object() && d->contains(name)) {
          target = &(*d)[name];
          tpath = root_path_ + "." + defs + "." + name;
        }
      }
    }
    if (!target)
      fail(path, fmt::format("'{}' is not supported or not found (\"#\", \"#/$defs/NAME\" or \"#/definitions/NAME\")", s));
    // A placeholder first, so that a recursive reference finds it; the compiled node is copied into it.
    Node placeholder;
    placeholder.kind = Kind::AnyOf;
    const int32_t id = add(placeholder, tpath);
    refs_[s] = id;
    const int32_t body = compile(*target, tpath, depth + 1);
    g_.nodes[id] = g_.nodes[body];
    return id;
  }

  int32_t any_of(const json& alts, const std::string& path, int depth) {
    if (!alts.is_array() || alts.empty()) fail(path, "must be a non-empty array of schemas");
    Node n;
    n.kind = Kind::AnyOf;
    for (size_t i = 0; i < alts.size(); i++) n.alts.push_back(compile(alts[i], fmt::format("{}[{}]", path, i), depth + 1));
    return add(std::move(n), path);
  }

  int32_t object(const json& s, const std::string& path, int depth) {
    Node n;
    n.kind = Kind::Object;
    std::set<std::string> declared;
    if (auto p = s.find("properties"); p != s.end()) {
      if (!p->is_object()) fail(path + ".properties", "must be an object of schemas");
      for (auto& [k, v] : p->items()) {
        Property prop;
        prop.key = json(k).dump();
        prop.node = compile(v, path + ".properties." + k, depth + 1);
        n.props.push_back(std::move(prop));
        declared.insert(k);
      }
    }
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) fail(path + ".required", "must be an array of property names");
      for (const json& k : *r) {
        if (!k.is_string() || !declared.count(k.get<std::string>()))
          fail(path + ".required", fmt::format("names {}, which is not in 'properties' (only declared properties "
                                               "are generated)", k.dump()));
        for (Property& p : n.props)
          if (p.key == k.dump()) p.required = true;
      }
    }
    if (n.props.empty()) {
      auto a = s.find("additionalProperties");
      if (a == s.end() || (a->is_boolean() && a->get<bool>())) n.additional = Grammar::kAny;
      else if (a->is_boolean()) n.additional = -1;
      else n.additional = compile(*a, path + ".additionalProperties", depth + 1);
    }
    return add(std::move(n), path);
  }

  int32_t array(const json& s, const std::string& path, int depth) {
    Node n;
    n.kind = Kind::Array;
    n.items = Grammar::kAny;
    if (auto it = s.find("items"); it != s.end()) {
      if (it->is_array()) fail(path + ".items", "an array of schemas (tuple validation) is not supported");
      n.items = compile(*it, path + ".items", depth + 1);
    }
    if (auto it = s.find("minItems"); it != s.end()) n.min_items = count(*it, path + ".minItems");
    if (auto it = s.find("maxItems"); it != s.end()) n.max_items = count(*it, path + ".maxItems");
    if (n.min_items > n.max_items) fail(path + ".minItems", "is larger than maxItems");
    return add(std::move(n), path);
  }

  int32_t string(const json& s, const std::string& path) {
    Node n;
    n.kind = Kind::String;
    if (auto it = s.find("minLength"); it != s.end()) n.min_items = count(*it, path + ".minLength");
    if (auto it = s.find("maxLength"); it != s.end()) n.max_items = count(*it, path + ".maxLength");
    if (n.min_items > n.max_items) fail(path + ".minLength", "is larger than maxLength");
    if (n.min_items == 0 && n.max_items == UINT32_MAX) return Grammar::kString;
    return add(std::move(n), path);
  }

  int32_t of_type(const std::string& t, const json& s, const std::string& path, const std::string& tpath, int depth) {
    if (t == "string") return string(s, path);
    if (t == "number") return Grammar::kNumber;
    if (t == "integer") {
      if (auto it = leaves_.find("integer"); it != leaves_.end()) return it->second;  // not a literal's key (no \0)
      Node n;
      n.kind = Kind::Integer;
      return leaves_["integer"] = add(std::move(n), path);
    }
    if (t == "boolean") return literal({"false", "true"}, path);
    if (t == "null") return literal({"null"}, path);
    if (t == "object") return object(s, path, depth);
    if (t == "array") return array(s, path, depth);
    fail(tpath, fmt::format("unknown type \"{}\" (string, number, integer, boolean, null, object or array)", t));
  }

  int32_t compile(const json& s, const std::string& path, int depth) {
    if (depth > kMaxSchemaDepth) fail(path, fmt::format("the schema nests deeper than {} levels", kMaxSchemaDepth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "the schema false allows no value");
      return Grammar::kAny;
    }
    if (!s.is_object()) fail(path, fmt::format("a schema must be an object or a boolean, got {}", s.type_name()));
    for (auto& [k, v] : s.items()) {
      if (kRefused.count(k)) fail(path + "." + k, "this keyword is not supported by constrained generation");
      if (k == "uniqueItems" && !(v.is_boolean() && !v.get<bool>()))
        fail(path + "." + k, "this keyword is not supported by constrained generation");
    }
    if (auto r = s.find("$ref"); r != s.end()) return ref(*r, path + ".$ref", depth);
    int32_t id;
    if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array() || e->empty()) fail(path + ".enum", "must be a non-empty array");
      std::vector<std::string> lits;
      for (const json& v : *e) lits.push_back(v.dump());
      id = literal(std::move(lits), path + ".enum");
    } else if (auto c = s.find("const"); c != s.end()) {
      id = literal({c->dump()}, path + ".const");
    } else if (auto a = s.find("anyOf"); a != s.end()) {
      id = any_of(*a, path + ".anyOf", depth);
    } else if (auto o = s.find("oneOf"); o != s.end()) {
      id = any_of(*o, path + ".oneOf", depth);
    } else if (auto all = s.find("allOf"); all != s.end()) {
      if (!all->is_array() || all->size() != 1) fail(path + ".allOf", "only an allOf of exactly one schema is supported");
      id = compile((*all)[0], path + ".allOf[0]", depth + 1);
    } else if (auto t = s.find("type"); t != s.end()) {
      const std::string tpath = path + ".type";
      if (t->is_string()) {
        id = of_type(t->get<std::string>(), s, path, tpath, depth);
      } else if (t->is_array() && !t->empty()) {
        Node n;
        n.kind = Kind::AnyOf;
        for (size_t i = 0; i < t->size(); i++) {
          if (!(*t)[i].is_string()) fail(fmt::format("{}[{}]", tpath, i), "must be a type name");
          n.alts.push_back(of_type((*t)[i].get<std::string>(), s, path, fmt::format("{}[{}]", tpath, i), depth));
        }
        id = add(std::move(n), path);
      } else {
        fail(tpath, "must be a type name or a non-empty array of type names");
      }
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      id = object(s, path, depth);
    } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
      id = array(s, path, depth);
    } else {
      id = Grammar::kAny;
    }
    if (auto nl = s.find("nullable"); nl != s.end() && nl->is_boolean() && nl->get<bool>()) {
      Node n;
      n.kind = Kind::AnyOf;
      n.alts = {id, literal({"null"}, path + ".nullable")};
      id = add(std::move(n), path);
    }
    return id;
  }

  // Alternatives are expanded before any byte is read: a cycle through them alone would never end, and an empty
  // one (a reference to itself) allows nothing.
  void check_cycles() {
    std::vector<uint8_t> mark(g_.nodes.size(), 0);  // 0 new, 1 on the path, 2 done
    std::function<void(int32_t)> visit = [&](int32_t id) {
      const Node& n = g_.nodes[id];
      if (n.kind != Kind::AnyOf) return;
      if (mark[id] == 2) return;
      const std::string& p = id < static_cast<int32_t>(paths_.size()) ? paths_[id] : root_path_;
      if (mark[id] == 1) fail(p, "refers to itself through references or alternatives without any value in between");
      if (n.alts.empty()) fail(p, "refers to itself without any value in between");
      mark[id] = 1;
      for (int32_t a : n.alts) visit(a);
      mark[id] = 2;
    };
    for (size_t i = 0; i < g_.nodes.size(); i++) visit(static_cast<int32_t>(i));
  }

  // Alternatives of alternatives become one list (no duplicates), so that a value's first byte tries each
  // alternative once instead of walking nested anyOfs (whose product could be huge). Runs after check_cycles.
  void flatten() {
    std::vector<std::vector<int32_t>> flat(g_.nodes.size());
    std::vector<uint8_t> done(g_.nodes.size(), 0);
    std::function<const std::vector<int32_t>&(int32_t)> expand = [&](int32_t id) -> const std::vector<int32_t>& {
      if (done[id]) return flat[id];
      std::vector<int32_t> out;
      for (int32_t a : g_.nodes[id].alts) {
        if (g_.nodes[a].kind == Kind::AnyOf) {
          for (int32_t x : expand(a))
            if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
        } else if (std::find(out.begin(), out.end(), a) == out.end()) {
          out.push_back(a);
        }
        if (out.size() > kMaxAlternatives)
          fail(id < static_cast<int32_t>(paths_.size()) ? paths_[id] : root_path_,
               fmt::format("more than {} alternatives (anyOf / oneOf / type arrays, nested ones counted out)",
                           kMaxAlternatives));
      }
      flat[id] = std::move(out);
      done[id] = 1;
      return flat[id];
    };
    for (size_t i = 0; i < g_.nodes.size(); i++)
      if (g_.nodes[i].kind == Kind::AnyOf) expand(static_cast<int32_t>(i));
    for (size_t i = 0; i < g_.nodes.size(); i++)
      if (g_.nodes[i].kind == Kind::AnyOf) g_.nodes[i].alts = flat[i];
  }

  const json& root_;
  std::string root_path_;
  Grammar g_;
  std::vector<std::string> paths_;
  std::map<std::string, int32_t> refs_;
  std::map<std::string, int32_t> leaves_;
};

}  // namespace

std::variant<Grammar, SchemaError> compile_schema(const nlohmann::ordered_json& schema, const std::string& path) {
  try {
    return Compiler(schema, path).run();
  } catch (const Fail& f) {
    return f.e;
  }
}

}  // namespace ds::grammar
