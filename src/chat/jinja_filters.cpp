// Jinja2 3.1's built-in filters and tests (the ones chat templates use), with Hugging Face's tojson.
#include <algorithm>
#include <cmath>
#include <map>

#include "chat/jinja_builtins.h"
#include "chat/jinja_interp.h"
#include "chat/py_str.h"

namespace ds::chat::jinja {
namespace {

using Args = std::vector<std::optional<Value>>;

bool opt_true(const std::optional<Value>& v) { return v && truthy(*v); }
std::string opt_string(const std::optional<Value>& v, const std::string& def) { return v ? to_str(*v) : def; }
int64_t opt_int(const std::optional<Value>& v, int64_t def, const char* what) {
  if (!v) return def;
  if (!v->is_int() && !v->is_bool()) fail(std::string(what) + ": expected an integer, got " + type_name(*v));
  return v->get_int();
}

// Jinja's make_attrgetter: "a.b.0" walks items / attributes; numeric parts index.
Value attr_path(const Value& obj, const std::string& path, const std::optional<Value>& def = std::nullopt) {
  Value v = obj;
  for (auto& part : py::split(path, std::string("."), -1)) {
    auto n = py::parse_int(part, 10);
    bool numeric = n && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = get_item(v, numeric ? Value::integer(*n) : Value::string(part));
    if (v.is_undefined() && def) return *def;
  }
  return v;
}

Value lowered(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value::string(py::lower(v.str())) : v;
}

// ---- filters ----

Value f_abs(Interp&, const Value& v, CallArgs& a) {
  bind_args("abs", a, {});
  if (v.is_float()) return Value::number(std::fabs(v.get_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.get_int() == INT64_MIN) fail("integer overflow");
    return Value::integer(std::llabs(v.get_int()));
  }
  if (v.is_undefined()) fail_undefined(v);
  fail("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("attr", a, {"name"}, 1);
  return get_python_attr(v, to_str(*p[0]));
}

Value f_batch(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("batch", a, {"linecount", "fill_with"}, 1);
  int64_t n = opt_int(p[0], 1, "batch");
  if (n <= 0) fail("batch: linecount must be positive");
  std::vector<Value> out, cur;
  for (auto& x : iterate(v)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::exchange(cur, {})));
  }
  if (!cur.empty()) {
    if (p[1])
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*p[1]);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_capitalize(Interp&, const Value& v, CallArgs& a) {
  bind_args("capitalize", a, {});
  return Value::string(py::capitalize(to_str(v)));
}

Value f_center(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("center", a, {"width"});
  int64_t w = opt_int(p[0], 80, "center");
  in.check_size(static_cast<size_t>(std::max<int64_t>(w, 0)));
  std::string s = to_str(v);
  int64_t n = static_cast<int64_t>(py::length(s));
  if (w <= n) return Value::string(s);
  int64_t total = w - n, left = total / 2 + (total & w & 1);
  return Value::string(std::string(left, ' ') + s + std::string(total - left, ' '));
}

Value f_default(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (opt_true(p[1]) && !truthy(v))) return p[0] ? *p[0] : Value::string("");
  return v;
}

Value f_dictsort(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail("dictsort: expected a mapping, got " + type_name(v));
  bool cs = opt_true(p[0]);
  std::string by = opt_string(p[1], "key");
  if (by != "key" && by != "value") fail("dictsort: You can only sort by either 'key' or 'value'");
  int pos = by == "key" ? 0 : 1;
  auto entries = v.dict().entries;
  std::stable_sort(entries.begin(), entries.end(), [&](auto& x, auto& y) {
    const Value& a1 = pos ? x.second : x.first;
    const Value& b1 = pos ? y.second : y.first;
    return less(lowered(a1, cs), lowered(b1, cs));
  });
  if (opt_true(p[2])) std::reverse(entries.begin(), entries.end());
  std::vector<Value> out;
  for (auto& [k, x] : entries) out.push_back(Value::list({k, x}, true));
  return Value::list(std::move(out));
}

Value f_escape(Interp&, const Value& v, CallArgs& a) {
  bind_args("escape", a, {});
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value::string(std::move(out));
}

Value f_first(Interp&, const Value& v, CallArgs& a) {
  bind_args("first", a, {});
  if (v.is_string() || v.is_list() || v.is_dict()) {
    std::vector<Value> it = iterate(v);
    if (!it.empty()) return it.front();
  } else if (!v.is_undefined()) {
    iterate(v);  // raises "not iterable"
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interp&, const Value& v, CallArgs& a) {
  bind_args("last", a, {});
  if (v.is_undefined()) return Value::undefined("No last item, sequence was empty.");
  std::vector<Value> it = iterate(v);
  if (!it.empty()) return it.back();
  return Value::undefined("No last item, sequence was empty.");
}

Value f_float(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("float", a, {"default"});
  Value def = p[0] ? *p[0] : Value::number(0.0);
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value::number(v.get_float());
  if (v.is_string()) {
    auto f = py::parse_float(v.str());
    return f ? Value::number(*f) : def;
  }
  return def;
}

Value f_int(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("int", a, {"default", "base"});
  Value def = p[0] ? *p[0] : Value::integer(0);
  int64_t base = opt_int(p[1], 10, "int");
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int() || v.is_bool()) return Value::integer(v.get_int());
  if (v.is_float()) {
    double f = v.get_float();
    if (std::isnan(f) || std::isinf(f)) fail("cannot convert float " + py::float_repr(f) + " to integer");
    if (std::fabs(f) >= 9.2e18) fail("integer overflow");
    return Value::integer(static_cast<int64_t>(std::trunc(f)));
  }
  if (v.is_string()) {
    if (auto i = py::parse_int(v.str(), static_cast<int>(base))) return Value::integer(*i);
    if (auto f = py::parse_float(v.str()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18)
      return Value::integer(static_cast<int64_t>(std::trunc(*f)));
  }
  return def;
}

Value f_indent(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("indent", a, {"width", "first", "blank"});
  std::string ind = p[0] && p[0]->is_string() ? p[0]->str() : std::string(static_cast<size_t>(std::max<int64_t>(0, opt_int(p[0], 4, "indent"))), ' ');
  std::vector<std::string> lines = py::splitlines(to_str(v) + "\n", false);
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      rv += "\n";
      if (opt_true(p[2]) || !lines[i].empty()) rv += ind;
    }
    rv += lines[i];
    in.check_size(rv.size());
  }
  if (opt_true(p[1])) rv = ind + rv;
  return Value::string(std::move(rv));
}

Value f_items(Interp&, const Value& v, CallArgs& a) {
  bind_args("items", a, {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (auto& [k, x] : v.dict().entries) out.push_back(Value::list({k, x}, true));
  return Value::list(std::move(out));
}

Value f_join(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("join", a, {"d", "attribute"});
  std::string sep = opt_string(p[0], "");
  std::string out;
  bool first = true;
  for (auto& x : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(p[1] && !p[1]->is_none() ? attr_path(x, to_str(*p[1])) : x);
    in.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_length(Interp&, const Value& v, CallArgs& a) {
  bind_args("length", a, {});
  return Value::integer(length(v));
}

Value f_list(Interp&, const Value& v, CallArgs& a) {
  bind_args("list", a, {});
  return Value::list(iterate(v));
}

Value f_lower(Interp&, const Value& v, CallArgs& a) {
  bind_args("lower", a, {});
  return Value::string(py::lower(to_str(v)));
}

Value f_upper(Interp&, const Value& v, CallArgs& a) {
  bind_args("upper", a, {});
  return Value::string(py::upper(to_str(v)));
}

Value f_title(Interp&, const Value& v, CallArgs& a) {
  bind_args("title", a, {});
  // Jinja's own title: words start after '-', whitespace, '(', '{', '[', '<'.
  std::u32string u = py::decode(to_str(v));
  bool start = true;
  for (auto& c : u) {
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c);
    if (sep) {
      start = true;
      continue;
    }
    c = start ? py::to_upper(c) : py::to_lower(c);
    start = false;
  }
  return Value::string(py::encode(u));
}

Value f_map(Interp& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  std::optional<Value> attribute, def;
  for (auto& [k, x] : a.kw) {
    if (k == "attribute") attribute = x;
    else if (k == "default") def = x;
  }
  if (attribute) {
    if (!a.pos.empty()) fail("map: positional arguments are not allowed with 'attribute'");
    for (auto& x : iterate(v)) out.push_back(attr_path(x, to_str(*attribute), def));
    return Value::list(std::move(out));
  }
  if (a.pos.empty()) fail("map requires a filter argument");
  std::string name = to_str(a.pos[0]);
  FilterFn fn = find_filter(name);
  if (!fn) fail("no filter named '" + name + "'");
  for (auto& x : iterate(v)) {
    CallArgs rest{std::vector<Value>(a.pos.begin() + 1, a.pos.end()), a.kw};
    out.push_back(fn(in, x, rest));
  }
  return Value::list(std::move(out));
}

Value minmax(const Value& v, CallArgs& a, bool is_max) {
  auto p = bind_args(is_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  bool cs = opt_true(p[0]);
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) { return lowered(p[1] ? attr_path(x, to_str(*p[1])) : x, cs); };
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i)
    if (is_max ? less(key(items[best]), key(items[i])) : less(key(items[i]), key(items[best]))) best = i;
  return items[best];
}
Value f_max(Interp&, const Value& v, CallArgs& a) { return minmax(v, a, true); }
Value f_min(Interp&, const Value& v, CallArgs& a) { return minmax(v, a, false); }

// select / reject / selectattr / rejectattr
Value select_impl(Interp& in, const Value& v, CallArgs& a, bool attr, bool keep) {
  size_t k = 0;
  std::string attribute;
  if (attr) {
    if (a.pos.empty()) fail("missing parameter for attribute name");
    attribute = to_str(a.pos[k++]);
  }
  TestFn test = nullptr;
  if (k < a.pos.size()) {
    std::string name = to_str(a.pos[k++]);
    test = find_test(name);
    if (!test) fail("no test named '" + name + "'");
  }
  std::vector<Value> out;
  for (auto& x : iterate(v)) {
    Value subject = attr ? attr_path(x, attribute) : x;
    bool r;
    if (test) {
      CallArgs rest{std::vector<Value>(a.pos.begin() + static_cast<long>(k), a.pos.end()), a.kw};
      r = test(in, subject, rest);
    } else {
      r = truthy(subject);
    }
    if (r == keep) out.push_back(x);
  }
  return Value::list(std::move(out));
}
Value f_select(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_replace(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("replace", a, {"old", "new", "count"}, 2);
  int64_t count = p[2] && !p[2]->is_none() ? opt_int(p[2], -1, "replace") : -1;
  std::string r = py::replace(to_str(v), to_str(*p[0]), to_str(*p[1]), count);
  in.check_size(r.size());
  return Value::string(std::move(r));
}

Value f_reverse(Interp&, const Value& v, CallArgs& a) {
  bind_args("reverse", a, {});
  if (v.is_string()) {
    std::u32string u = py::decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value::string(py::encode(u));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_round(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("round", a, {"precision", "method"});
  int64_t prec = opt_int(p[0], 0, "round");
  std::string method = opt_string(p[1], "common");
  if (method != "common" && method != "ceil" && method != "floor")
    fail("round: method must be 'common', 'ceil' or 'floor'");
  if (!v.is_number()) fail("round: expected a number, got " + type_name(v));
  if (method == "common" && !v.is_float()) return Value::integer(v.get_int());
  double x = v.get_float();
  if (method != "common") {
    double m = std::pow(10.0, static_cast<double>(prec));
    return Value::number((method == "ceil" ? std::ceil(x * m) : std::floor(x * m)) / m);
  }
  if (!std::isfinite(x)) return Value::number(x);
  // Python's round(x, n): correctly rounded decimal, ties to even (printf rounds the exact value).
  if (prec > 300) return Value::number(x);
  if (prec < -300) return Value::number(std::copysign(0.0, x));
  if (prec >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), x);
    return Value::number(std::strtod(buf, nullptr));
  }
  double m = std::pow(10.0, static_cast<double>(-prec));
  return Value::number(std::nearbyint(x / m) * m);
}

Value f_safe(Interp&, const Value& v, CallArgs& a) {
  bind_args("safe", a, {});
  return v.is_string() ? v : Value::string(to_str(v));
}

Value f_sort(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("sort", a, {"reverse", "case_sensitive", "attribute"});
  bool rev = opt_true(p[0]), cs = opt_true(p[1]);
  std::vector<Value> items = iterate(v);
  auto key = [&](const Value& x) { return lowered(p[2] && !p[2]->is_none() ? attr_path(x, to_str(*p[2])) : x, cs); };
  std::stable_sort(items.begin(), items.end(),
                   [&](const Value& x, const Value& y) { return rev ? less(key(y), key(x)) : less(key(x), key(y)); });
  return Value::list(std::move(items));
}

Value f_string(Interp&, const Value& v, CallArgs& a) {
  bind_args("string", a, {});
  return v.is_string() ? v : Value::string(to_str(v));
}

Value f_sum(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args("sum", a, {"attribute", "start"});
  Value total = p[1] ? *p[1] : Value::integer(0);
  for (auto& x : iterate(v)) total = binary_op(in, "+", total, p[0] ? attr_path(x, to_str(*p[0])) : x);
  return total;
}

Value f_tojson(Interp& in, const Value& v, CallArgs& a) {
  // Hugging Face: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  auto p = bind_args("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = opt_true(p[0]);
  o.sort_keys = opt_true(p[3]);
  if (p[1] && !p[1]->is_none()) {
    if (p[1]->is_string()) {
      o.indent_str = p[1]->str();
    } else {
      o.indent_str = std::string(static_cast<size_t>(std::clamp<int64_t>(opt_int(p[1], 0, "tojson indent"), 0, 1000)), ' ');
    }
    o.indent = 1;
    o.item_sep = ",";
  }
  if (p[2] && !p[2]->is_none()) {
    std::vector<Value> seps = iterate(*p[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string())
      fail("tojson: separators must be an (item_separator, key_separator) pair of strings");
    o.item_sep = seps[0].str();
    o.key_sep = seps[1].str();
  }
  std::string s = to_json(v, o);
  in.check_size(s.size());
  return Value::string(std::move(s));
}

Value f_trim(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("trim", a, {"chars"});
  std::optional<std::string> chars;
  if (p[0] && !p[0]->is_none()) chars = to_str(*p[0]);
  return Value::string(py::strip(to_str(v), chars, true, true));
}

Value f_truncate(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("truncate", a, {"length", "killwords", "end", "leeway"});
  int64_t len = opt_int(p[0], 255, "truncate");
  std::string end = opt_string(p[2], "...");
  int64_t leeway = opt_int(p[3], 5, "truncate");
  int64_t end_len = static_cast<int64_t>(py::length(end));
  if (len < end_len) fail("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(len));
  std::u32string u = py::decode(to_str(v));
  if (static_cast<int64_t>(u.size()) <= len + leeway) return Value::string(py::encode(u));
  std::string head = py::encode(u.substr(0, static_cast<size_t>(len - end_len)));
  if (opt_true(p[1])) return Value::string(head + end);
  return Value::string(py::rsplit(head, std::string(" "), 1)[0] + end);
}

Value f_unique(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args("unique", a, {"case_sensitive", "attribute"});
  bool cs = opt_true(p[0]);
  std::vector<Value> out, seen;
  for (auto& x : iterate(v)) {
    Value k = lowered(p[1] && !p[1]->is_none() ? attr_path(x, to_str(*p[1])) : x, cs);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Interp&, const Value& v, CallArgs& a) {
  bind_args("wordcount", a, {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : py::decode(to_str(v))) {
    bool w = py::is_alnum(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_format(Interp&, const Value& v, CallArgs& a) {
  if (!a.kw.empty() && !a.pos.empty()) fail("can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.kw.empty()) {
    DictObj d;
    for (auto& [k, x] : a.kw) d.set(Value::string(k), x);
    args = Value::dict(std::move(d));
  } else {
    args = Value::list(a.pos, true);
  }
  return Value::string(percent_format(to_str(v), args));
}

// ---- tests ----

bool t_defined(Interp&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interp&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interp&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(Interp&, const Value& v, CallArgs&) { return v.is_bool() && v.get_bool(); }
bool t_false(Interp&, const Value& v, CallArgs&) { return v.is_bool() && !v.get_bool(); }
bool t_integer(Interp&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interp&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_number(Interp&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Interp&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Interp&, const Value& v, CallArgs&) { return v.is_dict(); }
// Python: len() and __getitem__ work (str, list, tuple, dict; Jinja's Undefined too).
bool t_sequence(Interp&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_iterable(Interp&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}
bool t_callable(Interp&, const Value& v, CallArgs&) { return v.is_func(); }
bool t_escaped(Interp&, const Value&, CallArgs&) { return false; }
bool t_lower(Interp&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return py::lower(s) == s;
}
bool t_upper(Interp&, const Value& v, CallArgs&) {
  std::string s = to_str(v);
  return py::upper(s) == s;
}
int64_t int_subject(const Value& v, const char* test) {
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_int() && !v.is_bool()) fail(std::string("test '") + test + "' needs an integer, got " + type_name(v));
  return v.get_int();
}
bool t_odd(Interp&, const Value& v, CallArgs&) { return (int_subject(v, "odd") & 1) != 0; }
bool t_even(Interp&, const Value& v, CallArgs&) { return (int_subject(v, "even") & 1) == 0; }
Value one_arg(CallArgs& a, const char* name) {
  auto p = bind_args(name, a, {"other"}, 1);
  return *p[0];
}
bool t_divisibleby(Interp& in, const Value& v, CallArgs& a) {
  Value d = one_arg(a, "divisibleby");
  return equal(binary_op(in, "%", v, d), Value::integer(0));
}
bool t_eq(Interp&, const Value& v, CallArgs& a) { return equal(v, one_arg(a, "eq")); }
bool t_ne(Interp&, const Value& v, CallArgs& a) { return !equal(v, one_arg(a, "ne")); }
bool t_lt(Interp&, const Value& v, CallArgs& a) { return less(v, one_arg(a, "lt")); }
bool t_gt(Interp&, const Value& v, CallArgs& a) { return less(one_arg(a, "gt"), v); }
bool t_le(Interp&, const Value& v, CallArgs& a) {
  Value o = one_arg(a, "le");
  return less(v, o) || equal(v, o);
}
bool t_ge(Interp&, const Value& v, CallArgs& a) {
  Value o = one_arg(a, "ge");
  return less(o, v) || equal(v, o);
}
bool t_in(Interp&, const Value& v, CallArgs& a) { return contains(one_arg(a, "in"), v); }
bool t_sameas(Interp&, const Value& v, CallArgs& a) {
  Value o = one_arg(a, "sameas");
  if (v.kind() != o.kind()) return false;
  if (v.is_none() || v.is_undefined()) return true;
  if (v.is_bool()) return v.get_bool() == o.get_bool();
  if (v.is_int()) return v.get_int() == o.get_int() && v.get_int() >= -5 && v.get_int() <= 256;  // CPython small ints
  if (v.is_float()) return false;
  return v.identity() == o.identity();
}
bool t_filter(Interp&, const Value& v, CallArgs&) { return v.is_string() && has_filter(v.str()); }
bool t_test(Interp&, const Value& v, CallArgs&) { return v.is_string() && has_test(v.str()); }

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const std::map<std::string, FilterFn, std::less<>> m = {
      {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize},
      {"center", f_center}, {"count", f_length}, {"d", f_default}, {"default", f_default},
      {"dictsort", f_dictsort}, {"e", f_escape}, {"escape", f_escape}, {"first", f_first},
      {"float", f_float}, {"forceescape", f_escape}, {"format", f_format}, {"indent", f_indent},
      {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length},
      {"list", f_list}, {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min},
      {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
      {"round", f_round}, {"safe", f_safe}, {"select", f_select}, {"selectattr", f_selectattr},
      {"sort", f_sort}, {"string", f_string}, {"sum", f_sum}, {"title", f_title}, {"tojson", f_tojson},
      {"trim", f_trim}, {"truncate", f_truncate}, {"unique", f_unique}, {"upper", f_upper},
      {"wordcount", f_wordcount}};
  return m;
}

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> m = {
      {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
      {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"escaped", t_escaped}, {"even", t_even},
      {"false", t_false}, {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {">=", t_ge},
      {"gt", t_gt}, {">", t_gt}, {"greaterthan", t_gt}, {"in", t_in}, {"integer", t_integer},
      {"iterable", t_iterable}, {"le", t_le}, {"<=", t_le}, {"lower", t_lower}, {"lt", t_lt}, {"<", t_lt},
      {"lessthan", t_lt}, {"mapping", t_mapping}, {"ne", t_ne}, {"!=", t_ne}, {"none", t_none},
      {"number", t_number}, {"odd", t_odd}, {"sameas", t_sameas}, {"sequence", t_sequence},
      {"string", t_string}, {"test", t_test}, {"true", t_true}, {"undefined", t_undefined}, {"upper", t_upper}};
  return m;
}

}  // namespace

bool has_filter(std::string_view name) { return filters().count(name) > 0; }
bool has_test(std::string_view name) { return tests().count(name) > 0; }
FilterFn find_filter(std::string_view name) {
  auto it = filters().find(name);
  return it == filters().end() ? nullptr : it->second;
}
TestFn find_test(std::string_view name) {
  auto it = tests().find(name);
  return it == tests().end() ? nullptr : it->second;
}

}  // namespace ds::chat::jinja
