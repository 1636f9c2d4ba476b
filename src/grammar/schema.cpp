#include "grammar/schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <unordered_map>

#include "grammar/matcher.h"

namespace ds::grammar {

namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxSchemaDepth = 64;
constexpr size_t kMaxNodes = 20000;
constexpr size_t kMaxAlternatives = 256;  // after flattening: each is tried at a value's first byte
// Compile work, so that no schema costs more than some tens of ms to compile or refuse: one unit per schema
// compiled, per key of its object (the keyword lookups scan them), per type name, enum value and required name.
// The node bound alone does not bound it: a type array can compile the same object again and again, and
// leaves (a string, a number) add no node.
constexpr size_t kMaxWork = 200000;

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
    flatten(alternatives_in_order());
    check_depth();
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

  void spend(size_t units, const std::string& path) {
    work_ += units;
    if (work_ > kMaxWork)
      fail(path, fmt::format("the schema is too large to compile (over {} schemas, keywords, type names, enum values "
                             "and required names in all)", kMaxWork));
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
      index_defs(path);
      for (const char* defs : {"$defs", "definitions"}) {
        const std::string p = fmt::format("#/{}/", defs);
        if (s.rfind(p, 0) != 0) continue;
        const std::string name = s.substr(p.size());
        if (auto it = defs_.find(std::string(defs) + '/' + name); it != defs_.end()) {
          target = it->second;
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

  // "$defs/NAME" and "definitions/NAME" -> the schema, built at the first reference (an ordered_json object
  // looks keys up one by one: thousands of references to thousands of definitions would be quadratic).
  void index_defs(const std::string& path) {
    if (defs_indexed_) return;
    defs_indexed_ = true;
    for (const char* defs : {"$defs", "definitions"}) {
      auto d = root_.find(defs);
      if (d == root_.end() || !d->is_object()) continue;
      spend(d->size(), path);
      for (auto& [name, v] : d->items()) defs_.emplace(std::string(defs) + '/' + name, &v);
    }
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
    std::unordered_map<std::string, size_t> declared;  // name -> index in n.props
    if (auto p = s.find("properties"); p != s.end()) {
      if (!p->is_object()) fail(path + ".properties", "must be an object of schemas");
      for (auto& [k, v] : p->items()) {
        Property prop;
        prop.key = json(k).dump();
        prop.node = compile(v, path + ".properties." + k, depth + 1);
        n.props.push_back(std::move(prop));
        declared[k] = n.props.size() - 1;
      }
    }
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) fail(path + ".required", "must be an array of property names");
      spend(r->size(), path + ".required");
      for (const json& k : *r) {
        auto it = k.is_string() ? declared.find(k.get<std::string>()) : declared.end();
        if (it == declared.end())
          fail(path + ".required", fmt::format("names {}, which is not in 'properties' (only declared properties "
                                               "are generated)", k.dump()));
        n.props[it->second].required = true;
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
    spend(1 + s.size(), tpath);  // string, object and array look their keywords up in s
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
    spend(1 + s.size(), path);
    for (auto& [k, v] : s.items()) {
      if (kRefused.count(k)) fail(path + "." + k, "this keyword is not supported by constrained generation");
      if (k == "uniqueItems" && !(v.is_boolean() && !v.get<bool>()))
        fail(path + "." + k, "this keyword is not supported by constrained generation");
    }
    if (auto r = s.find("$ref"); r != s.end()) return ref(*r, path + ".$ref", depth);
    int32_t id;
    if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array() || e->empty()) fail(path + ".enum", "must be a non-empty array");
      spend(e->size(), path + ".enum");
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

  const std::string& path_of(int32_t id) const {
    return id < static_cast<int32_t>(paths_.size()) && !paths_[id].empty() ? paths_[id] : root_path_;
  }

  // The AnyOf nodes, each after the AnyOf nodes among its alternatives. Alternatives are expanded before any
  // byte is read: a cycle through them alone would never end, and an empty one (a reference to itself) allows
  // nothing. Iterative: a chain of alternatives can be as long as the node bound (too deep for the stack).
  std::vector<int32_t> alternatives_in_order() {
    std::vector<uint8_t> mark(g_.nodes.size(), 0);  // 0 new, 1 on the path, 2 done
    std::vector<int32_t> order;
    std::vector<std::pair<int32_t, size_t>> walk;  // a node on the path, its next alternative
    auto enter = [&](int32_t id) {
      if (g_.nodes[id].alts.empty()) fail(path_of(id), "refers to itself without any value in between");
      mark[id] = 1;
      walk.emplace_back(id, 0);
    };
    for (size_t i = 0; i < g_.nodes.size(); i++) {
      if (g_.nodes[i].kind != Kind::AnyOf || mark[i]) continue;
      enter(static_cast<int32_t>(i));
      while (!walk.empty()) {
        const int32_t id = walk.back().first;
        const std::vector<int32_t>& alts = g_.nodes[id].alts;
        if (walk.back().second == alts.size()) {
          mark[id] = 2;
          order.push_back(id);
          walk.pop_back();
          continue;
        }
        const int32_t a = alts[walk.back().second++];
        if (g_.nodes[a].kind != Kind::AnyOf || mark[a] == 2) continue;
        if (mark[a] == 1)
          fail(path_of(a), "refers to itself through references or alternatives without any value in between");
        enter(a);
      }
    }
    return order;
  }

  // Alternatives of alternatives become one list (no duplicates), so that a value's first byte tries each
  // alternative once instead of walking nested anyOfs (whose product could be huge). `order`: the AnyOf nodes,
  // nested ones first.
  void flatten(const std::vector<int32_t>& order) {
    std::vector<int32_t> seen(g_.nodes.size(), -1);  // seen[x] == id: x is in id's list already
    for (int32_t id : order) {
      std::vector<int32_t> out;
      auto put = [&](int32_t x) {
        if (seen[x] == id) return;
        seen[x] = id;
        out.push_back(x);
        if (out.size() > kMaxAlternatives)
          fail(path_of(id), fmt::format("more than {} alternatives (anyOf / oneOf / type arrays, nested ones counted "
                                        "out)", kMaxAlternatives));
      };
      for (int32_t a : g_.nodes[id].alts) {
        if (g_.nodes[a].kind == Kind::AnyOf) {
          for (int32_t x : g_.nodes[a].alts) put(x);  // flattened already
        } else {
          put(a);
        }
      }
      g_.nodes[id].alts = std::move(out);
    }
  }

  // Every node the root reaches must have an instance within the matcher's nesting bound: a required property or
  // minItems > 0 that leads back to its own schema has no finite instance at all, and the model would write
  // into it until no token could continue. The fewest nested containers of each node's instances, smallest
  // first (an object needs all its required properties, an array with minItems > 0 its items, an alternative
  // any one).
  void check_depth() {
    constexpr int kTooDeep = Matcher::kMaxDepth + 1;
    const size_t N = g_.nodes.size();
    std::vector<std::vector<int32_t>> users(N);  // users[c]: the nodes whose fewest containers depend on c
    std::vector<uint32_t> need(N, 0);
    std::vector<std::vector<int32_t>> bucket(kTooDeep);
    std::vector<int> best(N, kTooDeep);
    auto offer = [&](int32_t id, int v) {
      if (v < best[id]) best[id] = v, bucket[v].push_back(id);
    };
    for (size_t i = 0; i < N; i++) {
      const Node& n = g_.nodes[i];
      const int32_t id = static_cast<int32_t>(i);
      if (n.kind == Kind::Object) {
        for (const Property& p : n.props)
          if (p.required) users[p.node].push_back(id), need[i]++;
        if (need[i] == 0) offer(id, 1);
      } else if (n.kind == Kind::Array) {
        if (n.min_items == 0) offer(id, 1);
        else users[n.items].push_back(id), need[i] = 1;
      } else if (n.kind == Kind::AnyOf) {
        for (int32_t a : n.alts) users[a].push_back(id);
      } else {
        offer(id, 0);
      }
    }
    std::vector<uint8_t> done(N, 0);
    for (int v = 0; v < kTooDeep; v++) {
      for (size_t k = 0; k < bucket[v].size(); k++) {  // an alternative may join this bucket while it is read
        const int32_t id = bucket[v][k];
        if (done[id]) continue;
        done[id] = 1;
        for (int32_t u : users[id]) {
          if (done[u]) continue;
          const Kind kind = g_.nodes[u].kind;
          if (kind == Kind::AnyOf) offer(u, v);
          else if (kind == Kind::Array || --need[u] == 0) {  // an object's last required property: the deepest
            if (v + 1 < kTooDeep) offer(u, v + 1);
          }
        }
      }
    }
    std::vector<uint8_t> seen(N, 0);
    std::vector<int32_t> todo = {g_.root};
    seen[g_.root] = 1;
    while (!todo.empty()) {
      const int32_t id = todo.back();
      todo.pop_back();
      if (!done[id])
        fail(path_of(id), fmt::format("no instance of this schema nests at most {} containers deep (a required "
                                      "property or minItems > 0 leads back to it, or it nests too deep)",
                                      Matcher::kMaxDepth));
      const Node& n = g_.nodes[id];
      auto go = [&](int32_t c) {
        if (c >= 0 && !seen[c]) seen[c] = 1, todo.push_back(c);
      };
      for (const Property& p : n.props) go(p.node);
      if (n.kind == Kind::Object) go(n.additional);
      if (n.kind == Kind::Array) go(n.items);
      for (int32_t a : n.alts) go(a);
    }
  }

  const json& root_;
  std::string root_path_;
  Grammar g_;
  std::vector<std::string> paths_;
  std::map<std::string, int32_t> refs_;
  std::map<std::string, int32_t> leaves_;
  std::unordered_map<std::string, const json*> defs_;  // "$defs/NAME", "definitions/NAME"
  bool defs_indexed_ = false;
  size_t work_ = 0;
};

}  // namespace

namespace {
std::atomic<uint64_t> n_compiled{0};
}  // namespace

uint64_t schemas_compiled() { return n_compiled.load(); }

std::variant<Grammar, SchemaError> compile_schema(const nlohmann::ordered_json& schema, const std::string& path) {
  n_compiled++;
  try {
    return Compiler(schema, path).run();
  } catch (const Fail& f) {
    return f.e;
  }
}

}  // namespace ds::grammar
