#include "chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "chat/py_str.h"
#include "core/escape.h"

namespace ds::chat::jinja {

void fail(std::string message) { throw TemplateError{std::move(message), 0, false}; }

// ---- Value construction and access ----

Value Value::undefined(std::string hint) {
  Value v;
  v.p_ = std::make_shared<std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.p_ = std::make_shared<std::string>(std::move(s));
  return v;
}
Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::List;
  int d = 1;
  for (auto& x : items) d = std::max(d, x.depth() + 1);
  if (d > kMaxDepth) fail("value nested deeper than " + std::to_string(kMaxDepth) + " levels");
  v.p_ = std::make_shared<ListObj>(ListObj{std::move(items), tuple, d});
  return v;
}
Value Value::dict(DictObj d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.p_ = std::make_shared<DictObj>(std::move(d));
  return v;
}
Value Value::func(std::shared_ptr<Callable> f) {
  Value v;
  v.kind_ = Kind::Func;
  v.p_ = std::move(f);
  return v;
}
Value Value::ns(std::shared_ptr<NamespaceObj> n) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.p_ = std::move(n);
  return v;
}

int Value::depth() const {
  switch (kind_) {
    case Kind::List: return static_cast<const ListObj*>(p_.get())->depth;
    case Kind::Dict: return static_cast<const DictObj*>(p_.get())->depth;
    case Kind::Namespace: return static_cast<const NamespaceObj*>(p_.get())->attrs.depth;
    default: return 0;
  }
}

bool Value::is_tuple() const { return kind_ == Kind::List && static_cast<const ListObj*>(p_.get())->tuple; }
double Value::get_float() const {
  return kind_ == Kind::Float ? f_ : static_cast<double>(get_int());
}
const std::string& Value::str() const { return *static_cast<const std::string*>(p_.get()); }
const std::vector<Value>& Value::items() const { return static_cast<const ListObj*>(p_.get())->items; }
const DictObj& Value::dict() const { return *static_cast<const DictObj*>(p_.get()); }
Callable& Value::fn() const { return *static_cast<Callable*>(p_.get()); }
NamespaceObj& Value::ns() const { return *static_cast<NamespaceObj*>(p_.get()); }
std::string Value::undefined_hint() const {
  return p_ ? *static_cast<const std::string*>(p_.get()) : std::string("value is undefined");
}

// ---- DictObj ----

const Value* DictObj::get(std::string_view key) const {
  auto it = str_index_.find(std::string(key));
  return it == str_index_.end() ? nullptr : &entries[it->second].second;
}

const Value* DictObj::get(const Value& key) const {
  if (key.is_string()) return get(std::string_view(key.str()));
  for (auto& [k, v] : entries)
    if (!k.is_string() && equal(k, key)) return &v;
  return nullptr;
}

void DictObj::set(Value key, Value v) {
  int d = std::max(key.depth(), v.depth()) + 1;
  if (d > kMaxDepth) fail("value nested deeper than " + std::to_string(kMaxDepth) + " levels");
  depth = std::max(depth, d);
  if (key.is_string()) {
    auto [it, inserted] = str_index_.emplace(key.str(), entries.size());
    if (inserted)
      entries.emplace_back(std::move(key), std::move(v));
    else
      entries[it->second].second = std::move(v);
    return;
  }
  for (auto& [k, old] : entries)
    if (!k.is_string() && equal(k, key)) {
      old = std::move(v);
      return;
    }
  entries.emplace_back(std::move(key), std::move(v));
}

// ---- Python semantics ----

void fail_undefined(const Value& v) { fail(v.undefined_hint()); }

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.get_bool();
    case Value::Kind::Int: return v.get_int() != 0;
    case Value::Kind::Float: return v.get_float() != 0.0;
    case Value::Kind::String: return !v.str().empty();
    case Value::Kind::List: return !v.items().empty();
    case Value::Kind::Dict: return !v.dict().entries.empty();
    default: return true;
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Func: return "function";
    case Value::Kind::Namespace: return "Namespace";
  }
  return "object";
}

static std::string repr_impl(const Value& v, bool top_str, int level = 0) {
  if (level > kMaxDepth + 8) fail("value nested too deeply to print (a namespace that contains itself?)");
  switch (v.kind()) {
    case Value::Kind::Undefined: return top_str ? "" : "Undefined";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.get_bool() ? "True" : "False";
    case Value::Kind::Int: return py::int_str(v.get_int());
    case Value::Kind::Float: return py::float_repr(v.get_float());
    case Value::Kind::String: return top_str ? v.str() : py::repr(v.str());
    case Value::Kind::List: {
      const auto& it = v.items();
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < it.size(); ++i) {
        if (i) out += ", ";
        out += repr_impl(it[i], false, level + 1);
      }
      if (v.is_tuple() && it.size() == 1) out += ",";
      out += v.is_tuple() ? ")" : "]";
      return out;
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (auto& [k, x] : v.dict().entries) {
        if (!first) out += ", ";
        first = false;
        out += repr_impl(k, false, level + 1) + ": " + repr_impl(x, false, level + 1);
      }
      return out + "}";
    }
    case Value::Kind::Func: return v.fn().repr();
    case Value::Kind::Namespace: return "<Namespace " + repr_impl(Value::dict(v.ns().attrs), false, level + 1) + ">";
  }
  return "";
}

std::string to_str(const Value& v) { return repr_impl(v, true); }
std::string to_repr(const Value& v) { return repr_impl(v, false); }

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.get_float() == b.get_float();
    return a.get_int() == b.get_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined: case K::None: return true;
    case K::String: return a.str() == b.str();
    case K::List: {
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case K::Dict: {
      if (a.dict().entries.size() != b.dict().entries.size()) return false;
      for (auto& [k, v] : a.dict().entries) {
        const Value* o = b.dict().get(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.get_float() < b.get_float();
    return a.get_int() < b.get_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order = code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<int64_t>(py::length(v.str()));
    case Value::Kind::List: return static_cast<int64_t>(v.items().size());
    case Value::Kind::Dict: return static_cast<int64_t>(v.dict().entries.size());
    default: fail("object of type '" + type_name(v) + "' has no len()");
  }
}

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::Undefined: return out;
    case Value::Kind::String:
      for (char32_t c : py::decode(v.str())) {
        std::string s;
        py::append_utf8(s, c);
        out.push_back(Value::string(std::move(s)));
      }
      return out;
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict:
      for (auto& e : v.dict().entries) out.push_back(e.first);
      return out;
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

bool contains(const Value& c, const Value& item) {
  switch (c.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not " + type_name(item));
      return c.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      for (auto& x : c.items())
        if (equal(x, item)) return true;
      return false;
    case Value::Kind::Dict: return c.dict().get(item) != nullptr;
    default: fail("argument of type '" + type_name(c) + "' is not iterable");
  }
}

static Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  // Deeper input than any conversation needs would only risk the C++ stack.
  if (depth > 256) fail("input data nested deeper than 256 levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));  // beyond int64: no big integers here
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (auto& x : j) items.push_back(from_json_at(x, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictObj d;
      for (auto& [k, x] : j.items()) d.set(Value::string(k), from_json_at(x, depth + 1));
      return Value::dict(std::move(d));
    }
    default: return Value::none();  // binary / discarded: not produced by the JSON parser
  }
}

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

// ---- json.dumps ----

static void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  append_quoted(out, s, ensure_ascii ? QuoteStyle::JsonAscii : QuoteStyle::Json);
}

static std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return py::float_repr(f);
}

static void json_value(std::string& out, const Value& v, const JsonOptions& o, int level) {
  if (level > kMaxDepth + 8) fail("value nested too deeply for JSON");
  auto newline = [&](int lvl) {
    if (o.indent < 0) return;
    out.push_back('\n');
    for (int i = 0; i < lvl; ++i) out += o.indent_str;
  };
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.get_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += py::int_str(v.get_int()); return;
    case Value::Kind::Float: out += json_float(v.get_float()); return;
    case Value::Kind::String: json_string(out, v.str(), o.ensure_ascii); return;
    case Value::Kind::List: {
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      bool first = true;
      for (auto& x : v.items()) {
        if (!first) out += o.item_sep;
        first = false;
        newline(level + 1);
        json_value(out, x, o, level + 1);
      }
      newline(level);
      out.push_back(']');
      return;
    }
    case Value::Kind::Dict: {
      if (v.dict().entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> es;
      for (auto& e : v.dict().entries) es.push_back(&e);
      if (o.sort_keys)
        std::stable_sort(es.begin(), es.end(), [](auto* a, auto* b) { return less(a->first, b->first); });
      out.push_back('{');
      bool first = true;
      for (auto* e : es) {
        const Value& k = e->first;
        std::string key;
        if (k.is_string()) key = k.str();
        else if (k.is_bool()) key = k.get_bool() ? "true" : "false";
        else if (k.is_int()) key = py::int_str(k.get_int());
        else if (k.is_float()) key = json_float(k.get_float());
        else if (k.is_none()) key = "null";
        else fail("keys must be str, int, float, bool or None, not " + type_name(k));
        if (!first) out += o.item_sep;
        first = false;
        newline(level + 1);
        json_string(out, key, o.ensure_ascii);
        out += o.key_sep;
        json_value(out, e->second, o, level + 1);
      }
      newline(level);
      out.push_back('}');
      return;
    }
    default: fail("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

std::string to_json(const Value& v, const JsonOptions& opt) {
  std::string out;
  json_value(out, v, opt, 0);
  return out;
}

}  // namespace ds::chat::jinja
