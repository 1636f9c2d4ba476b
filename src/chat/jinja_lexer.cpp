#include "chat/jinja_lexer.h"

#include <cstring>

#include "chat/jinja_value.h"
#include "chat/py_str.h"

namespace ds::chat::jinja {
namespace {

[[noreturn]] void syntax_error(int line, std::string msg) { throw TemplateError{std::move(msg), line, false}; }

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_dig(char c) { return c >= '0' && c <= '9'; }
int count_nl(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Jinja2 decodes string literals with Python's "unicode-escape" codec.
std::string unescape(std::string_view s, int line) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\' || i + 1 >= s.size()) {
      out.push_back(c);
      continue;
    }
    char e = s[++i];
    auto hex = [&](int n) -> char32_t {
      char32_t v = 0;
      for (int k = 1; k <= n; ++k) {
        if (i + k >= s.size()) syntax_error(line, "truncated escape in string literal");
        char h = s[i + k];
        int d = is_dig(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) syntax_error(line, "truncated escape in string literal");
        v = v * 16 + static_cast<char32_t>(d);
      }
      i += n;
      return v;
    };
    switch (e) {
      case '\n': break;  // line continuation
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': py::append_utf8(out, hex(2)); break;
      case 'u': py::append_utf8(out, hex(4)); break;
      case 'U': {
        char32_t v = hex(8);
        if (v > 0x10ffff) syntax_error(line, "illegal Unicode character in string literal");
        py::append_utf8(out, v);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int v = e - '0';
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k) v = v * 8 + (s[++i] - '0');
          py::append_utf8(out, static_cast<char32_t>(v));
        } else {
          out.push_back('\\');  // unknown escapes stay as written
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < s_.size()) {
      size_t open = find_open(pos);
      if (open == std::string::npos) {
        push_data(std::string_view(s_).substr(pos));
        break;
      }
      char kind = s_[open + 1];  // '{', '%' or '#'
      char sign = open + 2 < s_.size() && (s_[open + 2] == '-' || s_[open + 2] == '+') ? s_[open + 2] : 0;
      size_t after = open + 2 + (sign ? 1 : 0);
      size_t raw_end = kind == '%' ? match_raw(after) : std::string::npos;
      std::string_view text = std::string_view(s_).substr(pos, open - pos);
      int text_lines = count_nl(text);
      push_data(strip_before(text, sign, kind != '{', line_starting));
      line_ += text_lines;
      if (raw_end != std::string::npos) {
        line_ += count_nl(std::string_view(s_).substr(after, raw_end - after));
        pos = lex_raw(raw_end, line_starting);
      } else if (kind == '#') {
        pos = lex_comment(after, line_starting);
      } else {
        pos = lex_tag(after, kind == '%', line_starting);
      }
    }
    toks_.push_back(Token{Tok::Eof, "", 0, 0, line_});
    return std::move(toks_);
  }

 private:
  std::string s_;
  std::vector<Token> toks_;
  int line_ = 1;

  size_t find_open(size_t pos) const {
    for (size_t p = s_.find('{', pos); p != std::string::npos; p = s_.find('{', p + 1))
      if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) return p;
    return std::string::npos;
  }

  // Skips Python whitespace (regex \s on str: Unicode spaces too) from p.
  size_t skip_space(size_t p) const {
    while (p < s_.size()) {
      unsigned char c = static_cast<unsigned char>(s_[p]);
      if (c < 0x80) {
        if (!py::is_space(c)) break;
        ++p;
        continue;
      }
      size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      std::u32string cp = py::decode(std::string_view(s_).substr(p, n));
      if (cp.size() != 1 || !py::is_space(cp[0])) break;
      p += n;
    }
    return p;
  }

  void push_data(std::string_view text) {
    if (!text.empty()) toks_.push_back(Token{Tok::Data, std::string(text), 0, 0, line_});
  }

  // Text before a tag: "-" strips all trailing whitespace; lstrip_blocks strips a line's indentation
  // before a block / comment tag (not before "{{", and not when the tag says "+").
  std::string strip_before(std::string_view text, char sign, bool lstrip_applies, bool line_starting) const {
    if (sign == '-') return py::strip(text, std::nullopt, false, true);
    if (sign != '+' && lstrip_applies) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
        std::u32string tail = py::decode(text.substr(l_pos));
        bool all_ws = true;
        for (char32_t c : tail) all_ws = all_ws && py::is_space(c);
        if (all_ws) return std::string(text.substr(0, l_pos));
      }
    }
    return std::string(text);
  }

  // After "{%" (and its sign): is this "raw %}"? Returns the position after the tag, or npos.
  size_t match_raw(size_t p) const {
    while (p < s_.size() && is_ws(s_[p])) ++p;
    if (s_.compare(p, 3, "raw") != 0 || (p + 3 < s_.size() && is_name_char(s_[p + 3]))) return std::string::npos;
    p += 3;
    while (p < s_.size() && is_ws(s_[p])) ++p;
    if (s_.compare(p, 3, "-%}") == 0) {
      p += 3;
      while (p < s_.size() && is_ws(s_[p])) ++p;
      return p;
    }
    if (s_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  // Consumes a tag end at p; returns the position after it (with trim_blocks / "-" handling) or npos.
  size_t match_end(size_t p, bool block, bool* ends_nl) const {
    const char* close = block ? "%}" : "}}";
    *ends_nl = false;
    if (block && s_.compare(p, 3, "+%}") == 0) return p + 3;
    if (s_.compare(p, 1, "-") == 0 && s_.compare(p + 1, 2, close) == 0) {
      size_t q = p + 3;
      q = skip_space(q);
      *ends_nl = q > p + 3 && s_[q - 1] == '\n';
      return q;
    }
    if (s_.compare(p, 2, close) == 0) {
      size_t q = p + 2;
      if (block && q < s_.size() && s_[q] == '\n') {
        ++q;
        *ends_nl = true;
      }
      return q;
    }
    return std::string::npos;
  }

  size_t lex_raw(size_t p, bool& line_starting) {
    // Body up to {%(-|+|) endraw (-|+|)%}; the body gets the same whitespace handling as any text.
    for (size_t q = s_.find("{%", p); q != std::string::npos; q = s_.find("{%", q + 1)) {
      size_t r = q + 2;
      char sign = r < s_.size() && (s_[r] == '-' || s_[r] == '+') ? s_[r] : 0;
      if (sign) ++r;
      while (r < s_.size() && is_ws(s_[r])) ++r;
      if (s_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < s_.size() && is_ws(s_[r])) ++r;
      bool nl = false;
      size_t end = match_end(r, true, &nl);
      if (end == std::string::npos) continue;
      std::string_view body = std::string_view(s_).substr(p, q - p);
      int body_lines = count_nl(body);
      push_data(strip_before(body, sign, true, line_starting));
      line_ += body_lines + count_nl(std::string_view(s_).substr(q, end - q));
      line_starting = nl;
      return end;
    }
    syntax_error(line_, "Missing end of raw directive");
  }

  size_t lex_comment(size_t p, bool& line_starting) {
    for (size_t q = p; q < s_.size(); ++q) {
      bool nl = false;
      size_t end = std::string::npos;
      if (s_.compare(q, 3, "+#}") == 0) {
        end = q + 3;
      } else if (s_.compare(q, 3, "-#}") == 0) {
        end = q + 3;
        end = skip_space(end);
        nl = end > q + 3 && s_[end - 1] == '\n';
      } else if (s_.compare(q, 2, "#}") == 0) {
        end = q + 2;
        if (end < s_.size() && s_[end] == '\n') ++end, nl = true;
      }
      if (end == std::string::npos) continue;
      line_ += count_nl(std::string_view(s_).substr(p, end - p));
      line_starting = nl;
      return end;
    }
    syntax_error(line_, "Missing end of comment tag");
  }

  size_t lex_tag(size_t p, bool block, bool& line_starting) {
    int open_line = line_;
    toks_.push_back(Token{block ? Tok::BlockBegin : Tok::VarBegin, "", 0, 0, line_});
    std::vector<char> balance;
    while (true) {
      size_t q = skip_space(p);
      line_ += count_nl(std::string_view(s_).substr(p, q - p));
      p = q;
      if (p >= s_.size())
        syntax_error(open_line, std::string("unexpected end of template: the ") + (block ? "'{%'" : "'{{'") +
                                    " tag opened here is never closed");
      bool nl = false;
      size_t end = balance.empty() ? match_end(p, block, &nl) : std::string::npos;
      if (end != std::string::npos) {
        toks_.push_back(Token{block ? Tok::BlockEnd : Tok::VarEnd, "", 0, 0, line_});
        line_ += count_nl(std::string_view(s_).substr(p, end - p));
        line_starting = nl;
        return end;
      }
      p = lex_token(p, balance);
    }
  }

  size_t lex_number(size_t p) {
    auto digits = [&](size_t q) {  // (\d+_)*\d+ ; returns end, or q when there are none
      size_t r = q;
      while (r < s_.size() && is_dig(s_[r])) {
        while (r < s_.size() && is_dig(s_[r])) ++r;
        if (r + 1 < s_.size() && s_[r] == '_' && is_dig(s_[r + 1])) ++r;
      }
      return r;
    };
    Token t{Tok::Int, "", 0, 0, line_};
    char b = p + 1 < s_.size() ? static_cast<char>(std::tolower(static_cast<unsigned char>(s_[p + 1]))) : 0;
    if (s_[p] == '0' && (b == 'x' || b == 'o' || b == 'b')) {  // 0x1f, 0o17, 0b101
      int base = b == 'x' ? 16 : b == 'o' ? 8 : 2;
      size_t r = p + 2;
      std::string ds;
      while (r < s_.size() && (std::isxdigit(static_cast<unsigned char>(s_[r])) || s_[r] == '_')) {
        if (s_[r] != '_') ds.push_back(s_[r]);
        ++r;
      }
      auto v = py::parse_int(ds, base);
      if (!v) syntax_error(line_, "invalid integer literal '" + s_.substr(p, r - p) + "'");
      t.ival = *v;
      t.text = s_.substr(p, r - p);
      toks_.push_back(t);
      return r;
    }
    size_t q = digits(p);
    bool after_dot = p > 0 && s_[p - 1] == '.';  // Jinja: a float never starts right after a '.'
    if (!after_dot) {
      size_t frac = q;
      if (q + 1 < s_.size() && s_[q] == '.' && is_dig(s_[q + 1])) frac = digits(q + 1);
      size_t e = frac;
      if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
        size_t r = e + 1;
        if (r < s_.size() && (s_[r] == '+' || s_[r] == '-')) ++r;
        size_t d = digits(r);
        if (d > r) e = d;
      }
      if (e != q) {
        std::string clean;
        for (size_t i = p; i < e; ++i)
          if (s_[i] != '_') clean.push_back(s_[i]);
        t.type = Tok::Float;
        t.text = s_.substr(p, e - p);
        t.fval = std::strtod(clean.c_str(), nullptr);
        toks_.push_back(t);
        return e;
      }
    }
    // Jinja's integer rule: a leading 0 is only "0" (or "0_0..."); "012" lexes as 0, then 12.
    if (s_[p] == '0') {
      q = p + 1;
      while (q + 1 < s_.size() && s_[q] == '_' && s_[q + 1] == '0') q += 2;
      while (q < s_.size() && s_[q] == '0') ++q;
    }
    std::string clean;
    for (size_t i = p; i < q; ++i)
      if (s_[i] != '_') clean.push_back(s_[i]);
    auto v = py::parse_int(clean, 10);
    if (!v) syntax_error(line_, "integer literal too large: " + s_.substr(p, q - p));
    t.ival = *v;
    t.text = s_.substr(p, q - p);
    toks_.push_back(t);
    return q;
  }

  size_t lex_token(size_t p, std::vector<char>& balance) {
    char c = s_[p];
    if (is_dig(c)) return lex_number(p);
    if (is_name_start(c)) {
      size_t q = p;
      while (q < s_.size() && is_name_char(s_[q])) ++q;
      toks_.push_back(Token{Tok::Name, s_.substr(p, q - p), 0, 0, line_});
      return q;
    }
    if (c == '\'' || c == '"') {
      size_t q = p + 1;
      while (q < s_.size() && s_[q] != c) q += s_[q] == '\\' ? 2 : 1;
      if (q >= s_.size()) syntax_error(line_, "unterminated string literal");
      std::string_view raw = std::string_view(s_).substr(p + 1, q - p - 1);
      toks_.push_back(Token{Tok::String, unescape(raw, line_), 0, 0, line_});
      line_ += count_nl(raw);
      return q + 1;
    }
    static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two)
      if (s_.compare(p, 2, op) == 0) {
        toks_.push_back(Token{Tok::Op, op, 0, 0, line_});
        return p + 2;
      }
    if (std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr) {
      syntax_error(line_, std::string("unexpected char '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) syntax_error(line_, std::string("unexpected '") + c + "'");
      if (balance.back() != c)
        syntax_error(line_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    toks_.push_back(Token{Tok::Op, std::string(1, c), 0, 0, line_});
    return p + 1;
  }
};

std::string normalize_newlines(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace ds::chat::jinja
