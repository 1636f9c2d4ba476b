// Attribute / item / slice access, Python methods on str, dict and list, and the global functions.
// Filters and tests are in jinja_filters.cpp, "%" and str.format in jinja_format.cpp.
#include "chat/jinja_builtins.h"

#include <algorithm>
#include <ctime>

#include "chat/jinja_interp.h"
#include "chat/py_str.h"

namespace ds::chat::jinja {
namespace {

// Jinja's object_type_repr, as it appears in undefined-value messages: 'dict object', 'None'.
std::string obj_desc(const Value& v) {
  if (v.is_none()) return "'None'";
  return "'" + type_name(v) + " object'";
}

Value no_attr(const Value& obj, const std::string& name) {
  return Value::undefined(obj_desc(obj) + " has no attribute '" + name + "'");
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) +
                          "' object is unsafe (the template sandbox is immutable)");
}

const std::vector<std::string> kStrMethods = {
    "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "replace",
    "upper", "lower", "title", "capitalize", "swapcase", "casefold", "format", "join", "find", "rfind",
    "index", "rindex", "count", "isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace",
    "isupper", "islower", "center", "ljust", "rjust", "zfill", "partition", "rpartition",
    "removeprefix", "removesuffix"};
const std::vector<std::string> kDictMethods = {"items", "keys", "values", "get", "copy"};
const std::vector<std::string> kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};
const std::vector<std::string> kListMethods = {"index", "count", "copy"};
const std::vector<std::string> kListUnsafe = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};

bool in_list(const std::vector<std::string>& l, const std::string& s) {
  return std::find(l.begin(), l.end(), s) != l.end();
}

std::string str_arg(const std::optional<Value>& v, const char* what) {
  if (!v || !v->is_string()) fail(std::string(what) + " must be a str, not " + (v ? type_name(*v) : "nothing"));
  return v->str();
}
std::optional<std::string> opt_str(const std::optional<Value>& v, const char* what) {
  if (!v || v->is_none()) return std::nullopt;
  return str_arg(v, what);
}
int64_t int_arg(const std::optional<Value>& v, int64_t def, const char* what) {
  if (!v || v->is_none()) return def;
  if (!v->is_int() && !v->is_bool())
    fail("'" + type_name(*v) + "' object cannot be interpreted as an integer (" + what + ")");
  return v->get_int();
}

Value str_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, int where /*-1 left, 0 center, 1 right*/) {
  int64_t n = static_cast<int64_t>(py::length(s));
  if (width <= n) return s;
  if (py::length(fill) != 1) fail("the fill character must be exactly one character long");
  int64_t total = width - n;
  int64_t left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

Value str_method(Interp& in, const std::string& s, const std::string& m, CallArgs& args) {
  const std::string f = "str." + m;
  // As in CPython 3.11, only split / rsplit / splitlines (and format) take keyword arguments.
  if (!args.kw.empty() && m != "split" && m != "rsplit" && m != "splitlines" && m != "format")
    fail(f + "() takes no keyword arguments");
  if (m == "startswith" || m == "endswith") {
    auto a = bind_args(f, args, {"prefix", "start", "end"}, 1);
    std::u32string u = py::decode(s);
    int64_t n = static_cast<int64_t>(u.size());
    auto clamp = [&](int64_t i) { return i < 0 ? std::max<int64_t>(0, i + n) : std::min(i, n); };
    int64_t b = clamp(int_arg(a[1], 0, "start")), e = clamp(int_arg(a[2], n, "end"));
    std::string part = b < e ? py::encode(std::u32string_view(u).substr(b, e - b)) : std::string();
    std::vector<Value> cands = a[0]->is_list() && a[0]->is_tuple() ? a[0]->items() : std::vector<Value>{*a[0]};
    for (auto& c : cands) {
      if (!c.is_string()) fail(f + " first arg must be str or a tuple of str, not " + type_name(c));
      const std::string& p = c.str();
      bool hit = m == "startswith" ? part.compare(0, p.size(), p) == 0 && part.size() >= p.size()
                                   : part.size() >= p.size() && part.compare(part.size() - p.size(), p.size(), p) == 0;
      if (hit && (b <= e || p.empty())) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    auto a = bind_args(f, args, {"chars"});
    return Value::string(py::strip(s, opt_str(a[0], "chars"), m != "rstrip", m != "lstrip"));
  }
  if (m == "split" || m == "rsplit") {
    auto a = bind_args(f, args, {"sep", "maxsplit"});
    auto sep = opt_str(a[0], "sep");
    if (sep && sep->empty()) fail("empty separator");
    int64_t maxsplit = int_arg(a[1], -1, "maxsplit");
    return str_list(m == "split" ? py::split(s, sep, maxsplit) : py::rsplit(s, sep, maxsplit));
  }
  if (m == "splitlines") {
    auto a = bind_args(f, args, {"keepends"});
    return str_list(py::splitlines(s, a[0] && truthy(*a[0])));
  }
  if (m == "replace") {
    auto a = bind_args(f, args, {"old", "new", "count"}, 2);
    std::string r = py::replace(s, str_arg(a[0], "old"), str_arg(a[1], "new"), int_arg(a[2], -1, "count"));
    in.check_size(r.size());
    return Value::string(std::move(r));
  }
  if (m == "upper" || m == "lower" || m == "title" || m == "capitalize" || m == "swapcase" || m == "casefold") {
    bind_args(f, args, {});
    if (m == "upper") return Value::string(py::upper(s));
    if (m == "lower" || m == "casefold") return Value::string(py::lower(s));
    if (m == "title") return Value::string(py::title(s));
    if (m == "swapcase") return Value::string(py::swapcase(s));
    return Value::string(py::capitalize(s));
  }
  if (m == "format") {
    std::string r = str_format(s, args.pos, args.kw);
    in.check_size(r.size());
    return Value::string(std::move(r));
  }
  if (m == "join") {
    auto a = bind_args(f, args, {"iterable"}, 1);
    std::string out;
    size_t i = 0;
    for (auto& x : iterate(*a[0])) {
      if (!x.is_string())
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(x) + " found");
      if (i++) out += s;
      out += x.str();
      in.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    auto a = bind_args(f, args, {"sub"}, 1);
    std::string sub = str_arg(a[0], "sub");
    if (m == "count") return Value::integer(py::count(s, sub));
    int64_t r = py::find(s, sub, m[0] == 'r');
    if (r < 0 && (m == "index" || m == "rindex")) fail("substring not found");
    return Value::integer(r);
  }
  if (m.rfind("is", 0) == 0) {
    bind_args(f, args, {});
    std::u32string u = py::decode(s);
    if (u.empty()) return Value::boolean(false);
    bool any_cased = false, ok = true;
    for (char32_t c : u) {
      if (m == "isdigit" || m == "isdecimal" || m == "isnumeric") ok = ok && py::is_digit(c);
      else if (m == "isalpha") ok = ok && py::is_alpha(c);
      else if (m == "isalnum") ok = ok && py::is_alnum(c);
      else if (m == "isspace") ok = ok && py::is_space(c);
      else if (m == "isupper") { ok = ok && !py::is_cased_lower(c); any_cased |= py::is_cased_upper(c); }
      else if (m == "islower") { ok = ok && !py::is_cased_upper(c); any_cased |= py::is_cased_lower(c); }
    }
    return Value::boolean(ok && (m != "isupper" && m != "islower" ? true : any_cased));
  }
  if (m == "center" || m == "ljust" || m == "rjust") {
    auto a = bind_args(f, args, {"width", "fillchar"}, 1);
    int64_t w = int_arg(a[0], 0, "width");
    in.check_size(static_cast<size_t>(std::max<int64_t>(w, 0)));
    std::string fill = a[1] ? str_arg(a[1], "fillchar") : " ";
    return Value::string(pad(s, w, fill, m == "center" ? 0 : m == "ljust" ? -1 : 1));
  }
  if (m == "zfill") {
    auto a = bind_args(f, args, {"width"}, 1);
    int64_t w = int_arg(a[0], 0, "width");
    in.check_size(static_cast<size_t>(std::max<int64_t>(w, 0)));
    int64_t n = static_cast<int64_t>(py::length(s));
    if (w <= n) return Value::string(s);
    bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    std::string zeros(static_cast<size_t>(w - n), '0');
    return Value::string(sign ? s.substr(0, 1) + zeros + s.substr(1) : zeros + s);
  }
  if (m == "partition" || m == "rpartition") {
    auto a = bind_args(f, args, {"sep"}, 1);
    std::string sep = str_arg(a[0], "sep");
    if (sep.empty()) fail("empty separator");
    size_t p = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos) {
      auto e = Value::string("");
      return m == "partition" ? Value::list({Value::string(s), e, e}, true) : Value::list({e, e, Value::string(s)}, true);
    }
    return Value::list({Value::string(s.substr(0, p)), Value::string(sep), Value::string(s.substr(p + sep.size()))}, true);
  }
  if (m == "removeprefix" || m == "removesuffix") {
    auto a = bind_args(f, args, {"affix"}, 1);
    std::string x = str_arg(a[0], "affix");
    if (m == "removeprefix" && s.compare(0, x.size(), x) == 0 && s.size() >= x.size()) return Value::string(s.substr(x.size()));
    if (m == "removesuffix" && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0 && !x.empty())
      return Value::string(s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  fail("'str' object has no attribute '" + m + "'");
}

Value dict_method(const Value& d, const std::string& m, CallArgs& args) {
  const std::string f = "dict." + m;
  if (m == "get") {
    auto a = bind_args(f, args, {"key", "default"}, 1);
    const Value* v = d.dict().get(*a[0]);
    return v ? *v : (a[1] ? *a[1] : Value::none());
  }
  bind_args(f, args, {});
  if (m == "copy") return d;
  std::vector<Value> out;
  for (auto& [k, v] : d.dict().entries) {
    if (m == "items") out.push_back(Value::list({k, v}, true));
    else out.push_back(m == "keys" ? k : v);
  }
  return Value::list(std::move(out));
}

Value list_method(const Value& l, const std::string& m, CallArgs& args) {
  if (m == "copy") {
    bind_args("list.copy", args, {});
    return Value::list(l.items(), l.is_tuple());
  }
  auto a = bind_args(type_name(l) + "." + m, args, {"value"}, 1);
  int64_t n = 0;
  for (size_t i = 0; i < l.items().size(); ++i) {
    if (!equal(l.items()[i], *a[0])) continue;
    if (m == "index") return Value::integer(static_cast<int64_t>(i));
    ++n;
  }
  if (m == "index") fail(to_repr(*a[0]) + " is not in list");
  return Value::integer(n);
}

class BoundMethod : public Callable {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string repr() const override { return "<built-in method " + name_ + " of " + type_name(self_) + " object>"; }
  Value call(Interp& in, CallArgs& args) override {
    if (self_.is_string()) return str_method(in, self_.str(), name_, args);
    if (self_.is_dict()) return dict_method(self_, name_, args);
    return list_method(self_, name_, args);
  }

 private:
  Value self_;
  std::string name_;
};

class Builtin : public Callable {
 public:
  using Fn = Value (*)(Interp&, CallArgs&);
  Builtin(std::string name, Fn fn) : name_(std::move(name)), fn_(fn) {}
  std::string repr() const override { return "<function " + name_ + ">"; }
  Value call(Interp& in, CallArgs& args) override { return fn_(in, args); }

 private:
  std::string name_;
  Fn fn_;
};

class Joiner : public Callable {
 public:
  explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
  std::string repr() const override { return "<Joiner>"; }
  Value call(Interp&, CallArgs& args) override {
    bind_args("joiner", args, {});
    if (!used_) {
      used_ = true;
      return Value::string("");
    }
    return Value::string(sep_);
  }

 private:
  std::string sep_;
  bool used_ = false;
};

constexpr int64_t kMaxRange = 100000;  // Jinja's sandbox MAX_RANGE

Value g_range(Interp&, CallArgs& args) {
  if (!args.kw.empty()) fail("range() takes no keyword arguments");
  if (args.pos.empty() || args.pos.size() > 3) fail("range expected 1 to 3 arguments, got " + std::to_string(args.pos.size()));
  std::vector<std::optional<Value>> p(args.pos.begin(), args.pos.end());
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = int_arg(p[0], 0, "range");
  } else {
    start = int_arg(p[0], 0, "range");
    stop = int_arg(p[1], 0, "range");
    if (p.size() == 3) step = int_arg(p[2], 1, "range");
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                       : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (n > kMaxRange) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  std::vector<Value> items;
  for (int64_t i = 0; i < n; ++i) items.push_back(Value::integer(start + i * step));
  return Value::list(std::move(items));
}

DictObj dict_from_args(const std::string& fname, CallArgs& args) {
  DictObj d;
  if (args.pos.size() > 1) fail(fname + " expected at most 1 positional argument, got " + std::to_string(args.pos.size()));
  if (!args.pos.empty()) {
    const Value& src = args.pos[0];
    if (src.is_dict()) {
      for (auto& [k, v] : src.dict().entries) d.set(k, v);
    } else {
      for (auto& pair : iterate(src)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) fail(fname + ": each element must be a (key, value) pair");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.kw) d.set(Value::string(k), v);
  return d;
}

Value g_namespace(Interp& in, CallArgs& args) {
  auto ns = std::make_shared<NamespaceObj>();
  ns->attrs = dict_from_args("namespace", args);
  in.track(ns);
  return Value::ns(ns);
}

Value g_dict(Interp&, CallArgs& args) { return Value::dict(dict_from_args("dict", args)); }

Value g_raise(Interp&, CallArgs& args) {
  auto a = bind_args("raise_exception", args, {"message"}, 1);
  throw TemplateError{to_str(*a[0]), 0, true};
}

Value g_strftime(Interp&, CallArgs& args) {
  auto a = bind_args("strftime_now", args, {"format"}, 1);
  std::string fmt = str_arg(a[0], "format");
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[512];
  size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
  return Value::string(std::string(buf, n));
}

Value g_joiner(Interp&, CallArgs& args) {
  auto a = bind_args("joiner", args, {"sep"});
  return Value::func(std::make_shared<Joiner>(a[0] ? to_str(*a[0]) : ", "));
}

}  // namespace

std::vector<std::optional<Value>> bind_args(const std::string& fname, CallArgs& args,
                                            const std::vector<std::string>& params, size_t n_required) {
  std::vector<std::optional<Value>> out(params.size());
  if (args.pos.size() > params.size())
    fail(fname + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
         std::to_string(args.pos.size()) + " given)");
  for (size_t i = 0; i < args.pos.size(); ++i) out[i] = args.pos[i];
  for (auto& [k, v] : args.kw) {
    auto it = std::find(params.begin(), params.end(), k);
    if (it == params.end()) fail(fname + "() got an unexpected keyword argument '" + k + "'");
    auto& slot = out[static_cast<size_t>(it - params.begin())];
    if (slot) fail(fname + "() got multiple values for argument '" + k + "'");
    slot = v;
  }
  for (size_t i = 0; i < n_required; ++i)
    if (!out[i]) fail(fname + "() missing required argument '" + params[i] + "'");
  return out;
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: fail_undefined(obj);
    case Value::Kind::Dict: {
      if (in_list(kDictMethods, name)) return Value::func(std::make_shared<BoundMethod>(obj, name));
      if (in_list(kDictUnsafe, name)) return unsafe(obj, name);
      const Value* v = obj.dict().get(std::string_view(name));
      return v ? *v : no_attr(obj, name);
    }
    case Value::Kind::String:
      if (in_list(kStrMethods, name)) return Value::func(std::make_shared<BoundMethod>(obj, name));
      return no_attr(obj, name);
    case Value::Kind::List:
      if (in_list(kListMethods, name) && !(obj.is_tuple() && name == "copy"))
        return Value::func(std::make_shared<BoundMethod>(obj, name));
      if (!obj.is_tuple() && in_list(kListUnsafe, name)) return unsafe(obj, name);
      return no_attr(obj, name);
    case Value::Kind::Namespace: {
      const Value* v = obj.ns().attrs.get(std::string_view(name));
      return v ? *v : no_attr(obj, name);
    }
    case Value::Kind::Int:
    case Value::Kind::Bool:
    case Value::Kind::Float:
      if (name == "real") return obj.is_float() ? obj : Value::integer(obj.get_int());
      if (name == "imag") return obj.is_float() ? Value::number(0.0) : Value::integer(0);
      return no_attr(obj, name);
    default: return no_attr(obj, name);
  }
}

Value get_python_attr(const Value& obj, const std::string& name) {
  if (obj.is_dict() && !in_list(kDictMethods, name) && !in_list(kDictUnsafe, name)) return no_attr(obj, name);
  return get_attr(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    const Value* v = obj.dict().get(key);
    if (v) return *v;
  } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t n = obj.is_list() ? static_cast<int64_t>(obj.items().size()) : length(obj);
    int64_t i = key.get_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (obj.is_list()) return obj.items()[static_cast<size_t>(i)];
      std::u32string u = py::decode(obj.str());
      std::string s;
      py::append_utf8(s, u[static_cast<size_t>(i)]);
      return Value::string(std::move(s));
    }
    return Value::undefined(obj_desc(obj) + " has no element " + to_repr(key));
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(obj_desc(obj) + " has no element " + to_repr(key));
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto idx = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) fail(std::string("slice indices must be integers or None (") + what + ")");
    return v.get_int();
  };
  auto o_start = idx(start, "start"), o_stop = idx(stop, "stop"), o_step = idx(step, "step");
  int64_t st = o_step.value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  if (!obj.is_list() && !obj.is_string()) return Value::undefined(obj_desc(obj) + " cannot be sliced");
  std::u32string u;
  int64_t n;
  if (obj.is_string()) {
    u = py::decode(obj.str());
    n = static_cast<int64_t>(u.size());
  } else {
    n = static_cast<int64_t>(obj.items().size());
  }
  int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? n : n - 1;
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp(x, lower, upper);
  };
  int64_t b = adjust(o_start, st > 0 ? lower : upper), e = adjust(o_stop, st > 0 ? upper : lower);
  if (obj.is_string()) {
    std::u32string r;
    for (int64_t i = b; st > 0 ? i < e : i > e; i += st) r.push_back(u[static_cast<size_t>(i)]);
    return Value::string(py::encode(r));
  }
  std::vector<Value> r;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) r.push_back(obj.items()[static_cast<size_t>(i)]);
  return Value::list(std::move(r), obj.is_tuple());
}

std::vector<std::pair<std::string, Value>> make_globals() {
  auto fn = [](const char* name, Builtin::Fn f) {
    return std::pair<std::string, Value>(name, Value::func(std::make_shared<Builtin>(name, f)));
  };
  return {fn("range", g_range),          fn("namespace", g_namespace), fn("dict", g_dict),
          fn("raise_exception", g_raise), fn("strftime_now", g_strftime), fn("joiner", g_joiner)};
}

}  // namespace ds::chat::jinja
