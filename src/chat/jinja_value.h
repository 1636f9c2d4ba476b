// The Jinja interpreter's value type, with Python's semantics (what Jinja2 inherits): none, bool,
// int (int64), float, str (UTF-8, code-point semantics), list / tuple, dict (insertion-ordered),
// callables (macros, builtins, bound methods), namespace, and undefined (Jinja2's default Undefined:
// prints as "", is falsy, iterates as empty, and raises when an attribute, item, call or arithmetic
// is tried on it). Lists, dicts and strings are shared and immutable (Hugging Face renders in an
// ImmutableSandboxedEnvironment); only a namespace's attributes can change.
// Errors inside the interpreter are thrown as TemplateError and become ds::Error at the API edge
// (chat_template.cpp): an evaluator that is recursive over the AST reads far more plainly that way.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ds::chat::jinja {

struct TemplateError {
  std::string message;
  int line = 0;         // 0 = not known yet (filled in by the interpreter)
  bool raised = false;  // from raise_exception(): the message is the template's own words
};
[[noreturn]] void fail(std::string message);

class Value;
struct ListObj;
struct DictObj;
struct NamespaceObj;
class Callable;
class Interp;

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Func, Namespace };

  Value() : i_(0) {}  // undefined
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(DictObj d);
  static Value func(std::shared_ptr<Callable> f);
  static Value ns(std::shared_ptr<NamespaceObj> n);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }  // list or tuple
  bool is_tuple() const;
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_func() const { return kind_ == Kind::Func; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }

  bool get_bool() const { return b_; }
  int64_t get_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }  // Int or Bool
  double get_float() const;  // any number
  const std::string& str() const;
  const std::vector<Value>& items() const;
  const DictObj& dict() const;
  Callable& fn() const;
  NamespaceObj& ns() const;
  std::string undefined_hint() const;
  const void* identity() const { return p_.get(); }
  int depth() const;  // nesting depth of lists / dicts / namespaces (0 for scalars)

 private:
  Kind kind_ = Kind::Undefined;
  union {
    bool b_;
    int64_t i_;
    double f_;
  };
  std::shared_ptr<void> p_;
};

// Containers record their nesting depth and refuse to nest deeper than kMaxDepth, so that printing,
// comparing and freeing them can never exhaust the C++ stack.
constexpr int kMaxDepth = 256;

struct ListObj {
  std::vector<Value> items;
  bool tuple = false;
  int depth = 1;
};

// Insertion-ordered mapping with Python key equality (1 == 1.0 == True); string keys are indexed.
struct DictObj {
  std::vector<std::pair<Value, Value>> entries;
  const Value* get(const Value& key) const;
  const Value* get(std::string_view key) const;
  void set(Value key, Value v);
  int depth = 1;

 private:
  std::unordered_map<std::string, size_t> str_index_;
};

struct NamespaceObj {
  DictObj attrs;
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string repr() const = 0;
  virtual Value call(Interp& in, CallArgs& args) = 0;
};

// Python semantics.
bool truthy(const Value& v);
std::string to_str(const Value& v);   // str(v); undefined -> ""
std::string to_repr(const Value& v);  // repr(v)
std::string type_name(const Value& v);  // 'str', 'int', 'NoneType', 'dict', ...
bool equal(const Value& a, const Value& b);
// a <op> b for op in < <= > >=; TypeError between unorderable types.
bool less(const Value& a, const Value& b);
int64_t length(const Value& v);                  // len(v); undefined -> 0
std::vector<Value> iterate(const Value& v);      // iter(v) materialised: str -> chars, dict -> keys
bool contains(const Value& container, const Value& item);  // item in container
[[noreturn]] void fail_undefined(const Value& v);  // raises the undefined value's error

Value from_json(const nlohmann::ordered_json& j);

struct JsonOptions {
  bool ensure_ascii = false;
  int indent = -1;  // < 0: no newlines
  std::string indent_str;  // used when indent >= 0 (indent spaces, or a given string)
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
// Python json.dumps(v, ...) (raises for undefined / callables / namespaces, as json does).
std::string to_json(const Value& v, const JsonOptions& opt);

}  // namespace ds::chat::jinja
