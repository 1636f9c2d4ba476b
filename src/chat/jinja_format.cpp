// Python string formatting for templates: "fmt % args" (and the `format` filter) and str.format().
// Covers the conversions templates use: %s %r %d %i %f %e %g %x %o %c %% with flags, width and
// precision; "{}", "{0}", "{name}", "{0.attr}", "{0[key]}", "!r"/"!s" and format specs
// [[fill]align][sign][#][0][width][,|_][.precision][type].
#include <cmath>
#include <cstdio>

#include "chat/jinja_builtins.h"
#include "chat/py_str.h"

namespace ds::chat::jinja {
namespace {

struct Spec {
  std::string fill = " ";
  char align = 0;  // < > ^ =
  char sign = '-';
  bool alt = false;
  int64_t width = 0;
  char grouping = 0;
  int64_t precision = -1;
  char type = 0;
};

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out.push_back(sep);
    out.push_back(digits[i]);
  }
  return out;
}

std::string pad_to(const std::string& sign, const std::string& body, const Spec& s, char default_align) {
  char align = s.align ? s.align : default_align;
  int64_t len = static_cast<int64_t>(py::length(sign) + py::length(body));
  if (len >= s.width) return sign + body;
  int64_t total = s.width - len;
  auto fill = [&](int64_t n) {
    std::string f;
    for (int64_t i = 0; i < n; ++i) f += s.fill;
    return f;
  };
  switch (align) {
    case '<': return sign + body + fill(total);
    case '^': return fill(total / 2) + sign + body + fill(total - total / 2);
    case '=': return sign + fill(total) + body;
    default: return fill(total) + sign + body;
  }
}

std::string c_format(const char* conv, int64_t prec, double v) {
  char fmt[32], buf[512];
  std::snprintf(fmt, sizeof fmt, "%%.%d%s", static_cast<int>(std::min<int64_t>(prec, 300)), conv);
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string format_number(const Value& v, Spec s) {
  bool is_float = v.is_float() || (s.type && std::string("eEfFgG%").find(s.type) != std::string::npos);
  std::string sign, body;
  if (!is_float) {
    int64_t i = v.get_int();
    uint64_t mag = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
    sign = i < 0 ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
    char t = s.type ? s.type : 'd';
    char buf[80];
    if (t == 'c') {
      std::string c;
      py::append_utf8(c, static_cast<char32_t>(i));
      return pad_to("", c, s, '<');
    }
    if (t == 'b') {
      std::string b;
      do b.insert(b.begin(), static_cast<char>('0' + (mag & 1))); while (mag >>= 1);
      body = (s.alt ? "0b" : "") + b;
    } else if (t == 'o' || t == 'x' || t == 'X') {
      std::snprintf(buf, sizeof buf, t == 'o' ? "%llo" : t == 'x' ? "%llx" : "%llX", static_cast<unsigned long long>(mag));
      body = std::string(s.alt ? (t == 'o' ? "0o" : t == 'x' ? "0x" : "0X") : "") + buf;
    } else if (t == 'd' || t == 'n') {
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(mag));
      body = s.grouping ? group_digits(buf, s.grouping) : buf;
    } else {
      fail(std::string("Unknown format code '") + t + "' for object of type 'int'");
    }
    return pad_to(sign, body, s, '>');
  }
  double f = v.get_float();
  sign = std::signbit(f) && !std::isnan(f) ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
  double a = std::fabs(f);
  char t = s.type;
  if (std::isinf(a) || std::isnan(a)) {
    body = std::isnan(a) ? "nan" : "inf";
    if (t == 'E' || t == 'F' || t == 'G') body = py::upper(body);
  } else if (t == 0 && s.precision < 0) {
    body = py::float_repr(a);
  } else if (t == '%') {
    body = c_format("f", s.precision < 0 ? 6 : s.precision, a * 100) + "%";
  } else {
    int64_t p = s.precision < 0 ? 6 : s.precision;
    std::string conv(1, t == 0 || t == 'n' ? 'g' : t);
    body = c_format(conv.c_str(), p, a);
    if (t == 0 && body.find_first_of(".e") == std::string::npos) body += ".0";
  }
  if (s.grouping) {
    size_t end = body.find_first_not_of("0123456789");
    body = group_digits(body.substr(0, end), s.grouping) + (end == std::string::npos ? "" : body.substr(end));
  }
  return pad_to(sign, body, s, '>');
}

Spec parse_spec(const std::string& spec) {
  Spec s;
  std::u32string u = py::decode(spec);
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (u.size() >= 2 && is_align(u[1])) {
    s.fill.clear();
    py::append_utf8(s.fill, u[0]);
    s.align = static_cast<char>(u[1]);
    i = 2;
  } else if (!u.empty() && is_align(u[0])) {
    s.align = static_cast<char>(u[0]);
    i = 1;
  }
  if (i < u.size() && (u[i] == '+' || u[i] == '-' || u[i] == ' ')) s.sign = static_cast<char>(u[i++]);
  if (i < u.size() && u[i] == '#') s.alt = true, ++i;
  if (i < u.size() && u[i] == '0') {
    if (!s.align) s.fill = "0", s.align = '=';
    ++i;
  }
  while (i < u.size() && u[i] >= '0' && u[i] <= '9') s.width = std::min<int64_t>(s.width * 10 + (u[i++] - '0'), 1 << 20);
  if (i < u.size() && (u[i] == ',' || u[i] == '_')) s.grouping = static_cast<char>(u[i++]);
  if (i < u.size() && u[i] == '.') {
    ++i;
    s.precision = 0;
    while (i < u.size() && u[i] >= '0' && u[i] <= '9') s.precision = std::min<int64_t>(s.precision * 10 + (u[i++] - '0'), 1 << 20);
  }
  if (i < u.size()) s.type = static_cast<char>(u[i++]);
  if (i != u.size()) fail("Invalid format specifier '" + spec + "'");
  return s;
}

std::string format_value(const Value& v, const std::string& spec) {
  if (spec.empty()) return to_str(v);
  Spec s = parse_spec(spec);
  if (v.is_string()) {
    if (s.type && s.type != 's') fail(std::string("Unknown format code '") + s.type + "' for object of type 'str'");
    std::string body = v.str();
    if (s.precision >= 0) body = py::encode(py::decode(body).substr(0, static_cast<size_t>(s.precision)));
    return pad_to("", body, s, '<');
  }
  if (v.is_number()) {
    return format_number(v.is_bool() ? Value::integer(v.get_int()) : v, s);  // bool formats as int
  }
  fail("unsupported format string passed to " + type_name(v) + ".__format__");
}

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> pos;
  const Value* mapping = nullptr;
  if (args.is_tuple()) pos = args.items();
  else if (args.is_dict()) mapping = &args;
  else pos.push_back(args);
  if (mapping) pos.push_back(args);  // "%s" % {...} prints the dict when no %(name) is used
  size_t next = 0;
  bool used_mapping = false;
  auto take = [&]() -> Value {
    if (next >= pos.size()) fail("not enough arguments for format string");
    return pos[next++];
  };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    Value arg;
    bool have_arg = false;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      const Value* v = mapping->dict().get(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!v) fail("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      arg = *v;
      have_arg = used_mapping = true;
      i = close + 1;
    }
    Spec s;
    for (; i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos; ++i) {
      if (fmt[i] == '-') s.align = '<';
      else if (fmt[i] == '+') s.sign = '+';
      else if (fmt[i] == ' ' && s.sign != '+') s.sign = ' ';
      else if (fmt[i] == '#') s.alt = true;
      else if (fmt[i] == '0' && s.align != '<') s.fill = "0", s.align = '=';
    }
    if (i < fmt.size() && fmt[i] == '*') {
      s.width = take().get_int(), ++i;
    } else {
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) s.width = std::min<int64_t>(s.width * 10 + (fmt[i++] - '0'), 1 << 20);
    }
    if (i < fmt.size() && fmt[i] == '.') {
      s.precision = 0;
      ++i;
      if (i < fmt.size() && fmt[i] == '*') {
        s.precision = take().get_int(), ++i;
      } else {
        while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) s.precision = std::min<int64_t>(s.precision * 10 + (fmt[i++] - '0'), 1 << 20);
      }
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail("incomplete format");
    char t = fmt[i];
    if (t == '%') {
      out.push_back('%');
      continue;
    }
    if (!have_arg) arg = take();
    if (t == 's' || t == 'r' || t == 'a') {
      std::string body = t == 's' ? to_str(arg) : to_repr(arg);
      if (s.precision >= 0) body = py::encode(py::decode(body).substr(0, static_cast<size_t>(s.precision)));
      if (s.fill == "0") s.fill = " ", s.align = s.align == '=' ? '>' : s.align;
      out += pad_to("", body, s, '>');
    } else if (std::string("diuxXofFeEgGc").find(t) != std::string::npos) {
      if (!arg.is_number()) fail(std::string("%") + t + " format: a real number is required, not " + type_name(arg));
      if (t == 'c') {
        s.type = 'c';
        out += format_number(Value::integer(arg.get_int()), s);
        continue;
      }
      if (t == 'd' || t == 'i' || t == 'u') {
        s.type = 'd';
        out += format_number(Value::integer(arg.is_float() ? static_cast<int64_t>(std::trunc(arg.get_float())) : arg.get_int()), s);
      } else if (t == 'x' || t == 'X' || t == 'o') {
        if (arg.is_float()) fail(std::string("%") + t + " format: an integer is required, not float");
        s.type = t;
        out += format_number(arg, s);
      } else {
        s.type = t;
        if (s.precision < 0) s.precision = 6;
        out += format_number(Value::number(arg.get_float()), s);
      }
    } else {
      char buf[64];
      std::snprintf(buf, sizeof buf, "unsupported format character '%c' (0x%x)", t, static_cast<unsigned char>(t));
      fail(buf);
    }
  }
  if (!used_mapping && next < pos.size() && !(mapping && next == 0))
    fail("not all arguments converted during string formatting");
  return out;
}

std::string str_format(const std::string& fmt, const std::vector<Value>& args,
                       const std::vector<std::pair<std::string, Value>>& kwargs) {
  std::string out;
  int auto_idx = 0;
  bool manual = false;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    if (field.find('{') != std::string::npos) fail("nested replacement fields are not supported");
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field.resize(bang);
    }
    size_t name_end = field.find_first_of(".[");
    std::string name = field.substr(0, name_end);
    Value v;
    if (name.empty()) {
      if (manual) fail("cannot switch from manual field specification to automatic field numbering");
      if (auto_idx >= static_cast<int>(args.size())) fail("Replacement index " + std::to_string(auto_idx) + " out of range for positional args tuple");
      v = args[static_cast<size_t>(auto_idx++)];
    } else if (std::isdigit(static_cast<unsigned char>(name[0]))) {
      if (auto_idx) fail("cannot switch from automatic field numbering to manual field specification");
      manual = true;
      auto n = py::parse_int(name, 10);
      if (!n || *n >= static_cast<int64_t>(args.size())) fail("Replacement index " + name + " out of range for positional args tuple");
      v = args[static_cast<size_t>(*n)];
    } else {
      bool found = false;
      for (auto& [k, x] : kwargs)
        if (k == name) v = x, found = true;
      if (!found) fail("KeyError: '" + name + "'");
    }
    for (size_t p = name_end; p != std::string::npos && p < field.size();) {
      if (field[p] == '.') {
        size_t e = field.find_first_of(".[", p + 1);
        v = get_attr(v, field.substr(p + 1, e == std::string::npos ? std::string::npos : e - p - 1));
        p = e;
      } else {
        size_t e = field.find(']', p);
        if (e == std::string::npos) fail("Missing ']' in format string");
        std::string key = field.substr(p + 1, e - p - 1);
        auto n = py::parse_int(key, 10);
        v = get_item(v, n && !key.empty() && std::isdigit(static_cast<unsigned char>(key[0])) ? Value::integer(*n) : Value::string(key));
        p = e + 1;
      }
    }
    if (v.is_undefined()) fail_undefined(v);
    if (conv == "r" || conv == "a") v = Value::string(to_repr(v));
    else if (conv == "s") v = Value::string(to_str(v));
    else if (!conv.empty()) fail("Unknown conversion specifier " + conv);
    out += format_value(v, spec);
  }
  return out;
}

}  // namespace ds::chat::jinja
