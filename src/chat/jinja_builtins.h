// Jinja2's built-in filters, tests, globals and the Python methods templates call on values
// (str.startswith, dict.items, ...), with the behaviour of Jinja2 3.1 under Hugging Face's settings:
// `tojson` is json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False),
// `raise_exception(msg)` aborts the render with msg, `strftime_now(fmt)` formats the local time, and
// the sandbox is immutable (list.append and friends are refused; range() is capped at 100000 items).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.h"

namespace ds::chat::jinja {

using FilterFn = Value (*)(Interp& in, const Value& v, CallArgs& args);
using TestFn = bool (*)(Interp& in, const Value& v, CallArgs& args);

bool has_filter(std::string_view name);
bool has_test(std::string_view name);
FilterFn find_filter(std::string_view name);  // nullptr if unknown
TestFn find_test(std::string_view name);

// Jinja's environment.getattr / getitem: obj.name tries attributes (methods) first, then items;
// obj[key] tries items first, then attributes. A miss gives an undefined value (with a hint),
// except on an undefined object, which raises.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// Python's getattr(obj, name) alone, for the `attr` filter: a dict's keys are not attributes.
Value get_python_attr(const Value& obj, const std::string& name);
// obj[start:stop:step] with Python semantics (lists, tuples, strings by code point).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// The globals every render sees: range, namespace, dict, joiner, cycler, raise_exception, strftime_now.
std::vector<std::pair<std::string, Value>> make_globals();

// Binds call arguments to named parameters, as Python does for a function def(p0, p1, ...):
// positionals first, then keywords by name; a missing parameter is nullopt. `fname` names the
// callee in errors (too many arguments, unknown or repeated keyword, missing required ones).
std::vector<std::optional<Value>> bind_args(const std::string& fname, CallArgs& args,
                                            const std::vector<std::string>& params, size_t n_required = 0);

// Python "%" string formatting (str % args) and str.format(*args, **kwargs).
std::string percent_format(const std::string& fmt, const Value& args);
std::string str_format(const std::string& fmt, const std::vector<Value>& args,
                       const std::vector<std::pair<std::string, Value>>& kwargs);

}  // namespace ds::chat::jinja
