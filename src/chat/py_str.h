// Python str semantics on UTF-8 strings, for the Jinja interpreter (jinja_*.cpp). Python strings are
// sequences of code points, so length, indexing, slicing and reversal work on code points here too;
// whitespace is Python's str.isspace() set (not just ASCII), case mapping is Unicode simple case
// mapping (utf8proc). Float printing follows Python's repr (shortest round-trip digits, exponent form
// when the decimal exponent is < -4 or >= 16), because "{{ 1.0 }}" must print "1.0".
// Invalid UTF-8 bytes decode to U+DC80+byte (Python's surrogateescape) and encode back unchanged.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::chat::py {

std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);
size_t length(std::string_view s);  // code points

bool is_space(char32_t c);  // Python str.isspace()
bool is_printable(char32_t c);  // Python str.isprintable() for one code point
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_cased_upper(char32_t c);
bool is_cased_lower(char32_t c);
bool is_alpha(char32_t c);
bool is_digit(char32_t c);
bool is_alnum(char32_t c);

// str.strip/lstrip/rstrip: `chars` empty optional = whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit): no sep = runs of whitespace, leading/trailing dropped.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
// str.replace(old, new, count); count < 0 = all. Empty `old` inserts `new` between code points.
std::string replace(std::string_view s, std::string_view old_s, std::string_view new_s, int64_t count);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
std::string swapcase(std::string_view s);
// str.find / count on code points (-1 when absent).
int64_t find(std::string_view s, std::string_view sub, bool reverse);
int64_t count(std::string_view s, std::string_view sub);

std::string repr(std::string_view s);  // Python repr of a str: quotes chosen as Python does
std::string float_repr(double v);      // Python repr(float): 1.0, 1e-05, 1e+16, inf, nan
std::string int_str(int64_t v);

// Python int("...") and float("...") for the int/float filters (surrounding whitespace allowed).
std::optional<int64_t> parse_int(std::string_view s, int base);
std::optional<double> parse_float(std::string_view s);

}  // namespace ds::chat::py
