// Robustness of the template interpreter: hostile or broken templates and inputs must end in a
// ds::Error with a clear message (never a crash, a hang or unbounded memory): runaway recursion,
// output explosions, billion-iteration loops, absurd nesting, self-referencing values, mangled
// templates. Also API argument checks and concurrent renders of one template.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <pthread.h>
#include <thread>

#include "chat/chat_template.h"
#include "chat_test_util.h"
#include "testutil.h"

using namespace ds;
using ojson = nlohmann::ordered_json;

namespace {

Result<std::string> render(const std::string& tpl, const ojson& vars = ojson::object(),
                           const chat::ChatTemplate::Limits* limits = nullptr) {
  auto t = chat::ChatTemplate::parse(tpl);
  if (!t) return t.error();
  if (limits) t->set_limits(*limits);
  return t->render_vars(vars);
}

void expect_error(const Result<std::string>& r, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "rendered " << r->size() << " bytes";
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

}  // namespace

TEST(JinjaLimits, RunawayRecursion) {
  expect_error(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}"), "nested deeper than 200");
  // Mutual recursion through caller() counts too.
  expect_error(render("{% macro a() %}{% call a() %}x{% endcall %}{{ caller() }}{% endmacro %}{{ a() }}"), "nested deeper");
}

TEST(JinjaLimits, OutputAndStringSize) {
  chat::ChatTemplate::Limits small;
  small.max_output_bytes = 1000;
  expect_error(render("{% for i in range(2000) %}x{% endfor %}", ojson::object(), &small), "exceed 1000 bytes");
  EXPECT_TRUE(render("{% for i in range(999) %}x{% endfor %}", ojson::object(), &small).ok());
  // Default limits: a billion-character string or doubling a string is refused before allocation.
  expect_error(render("{{ 'x' * 1000000000 }}"), "exceed");
  expect_error(render("{{ ['x'] * 1000000000 }}"), "exceed");
  small.max_output_bytes = 1 << 20;
  expect_error(render("{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                      ojson::object(), &small),
               "exceed");
  expect_error(render("{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                      ojson::object(), &small),
               "exceed");
  expect_error(render("{{ 'x'.center(1000000000000) }}"), "exceed");
}

TEST(JinjaLimits, StepBudgetStopsHugeLoops) {
  chat::ChatTemplate::Limits l;
  l.max_steps = 1'000'000;
  auto t0 = std::chrono::steady_clock::now();
  expect_error(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", ojson::object(), &l),
               "exceeded 1000000 steps");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));  // generous: CI machines are shared
  expect_error(render("{{ range(100001)|length }}"), "Range too big");
}

TEST(JinjaLimits, DeepNestingIsRefusedNotACrash) {
  auto nested = [](const std::string& open, const std::string& mid, const std::string& close, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += open;
    s += mid;
    for (int i = 0; i < n; ++i) s += close;
    return s;
  };
  expect_error(render("{{ " + nested("(", "1", ")", 100000) + " }}"), "nested deeper");
  expect_error(render("{{ " + nested("[", "1", "]", 100000) + " }}"), "nested deeper");
  expect_error(render("{{ " + nested("not ", "1", "", 100000) + " }}"), "nested deeper");
  expect_error(render("{{ " + nested("-", "1", "", 100000) + " }}"), "nested deeper");
  expect_error(render(nested("{% if true %}", "x", "{% endif %}", 10000)), "nested deeper");
  EXPECT_EQ(*render("{{ " + nested("(", "1", ")", 50) + " }}"), "1");
  // Values nested by the template or by the input.
  expect_error(render("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}"),
               "nested deeper than 256");
  ojson deep = ojson::parse(std::string(5000, '[') + std::string(5000, ']'));
  expect_error(render("{{ x|length }}", ojson{{"x", deep}}), "nested deeper than 256");
  // A namespace that holds itself: printing and serialising it must stop.
  expect_error(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), "nested too deeply");
  expect_error(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me|string|length }}"), "nested too deeply");
}

// Session 36's fuzzing: expressions nested 120 deep (under the parser's 128) inside 200 nested macro calls (the call
// limit) took ~8 MB of C++ stack and crashed the process; the interpreter's stack budget refuses it instead.
TEST(JinjaLimits, DeepExpressionsInsideDeepMacroCallsAreRefused) {
  auto recursive = [](const std::string& expr, int calls) {
    return "{%- macro f(n) -%}{%- if n > 0 -%}{{ " + expr + " }}{%- endif -%}{%- endmacro -%}{{ f(" +
           std::to_string(calls) + ") }}";
  };
  const std::string deep = recursive(std::string(120, '-') + "f(n - 1)", 199);
  auto r = render(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("nested too deeply"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("KiB of stack"), std::string::npos) << r.error().message;
  // The same on a thread with a 2 MB stack: the budget shrinks to the room the thread has.
  std::string msg;
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, size_t{2} << 20), 0);
  struct Job {
    const std::string* tpl;
    std::string* msg;
  } job{&deep, &msg};
  pthread_t th;
  ASSERT_EQ(pthread_create(
                &th, &attr,
                [](void* p) -> void* {
                  auto* j = static_cast<Job*>(p);
                  auto res = render(*j->tpl);
                  *j->msg = res.ok() ? "rendered" : res.error().message;
                  return nullptr;
                },
                &job),
            0);
  pthread_join(th, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_NE(msg.find("nested too deeply"), std::string::npos) << msg;
  // Deep expressions in shallow recursion, and shallow expressions in the deepest recursion allowed, still render.
  const std::string parens = std::string(50, '(') + "n" + std::string(50, ')');
  auto a = render(recursive("f(n - 1) ~ " + parens, 10));
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(*a, "12345678910");
  auto b = render(recursive("f(n - 1) ~ (n % 2)", 199));
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->size(), 199u);
}

// Session 36's fuzzing: a slice inside a tuple index evaluated its missing object (a null pointer: exit 139).
TEST(JinjaLimits, SliceInsideATupleIndexIsRefused) {
  for (const char* t : {"{{ [1, 2][:1, 2] }}", "{{ [1, 2][1:, 2] }}", "{{ [1, 2][0, ::1] }}", "{{ x[1:2, 3] }}"}) {
    auto r = render(t);
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_NE(r.error().message.find("slice inside a tuple index"), std::string::npos) << t << ": " << r.error().message;
  }
  EXPECT_EQ(*render("{{ [1, 2, 3][:2] }}{{ 'abc'[::-1] }}{{ {(1, 2): 'x'}[1, 2] }}"), "[1, 2]cbax");
}

TEST(JinjaLimits, ErrorsNameTheLine) {
  auto r = render("a\nb\n{{ 1 +* 2 }}");
  expect_error(r, "syntax error on line 3");
  r = render("one\n{% for m in messages %}\n{{ m.content.nosuch.deeper }}\n{% endfor %}",
             ojson::parse(R"({"messages": [{"content": "x"}]})"));
  expect_error(r, "line 3: 'str object' has no attribute 'nosuch'");
  r = render("{% if x %}\n\n{% endfor %}");
  expect_error(r, "line 3");
  r = render("\n{{ x | nosuch }}");
  expect_error(r, "line 2: no filter named 'nosuch'");
  r = render("{% for x in y %}\n{% if x %}\n");
  expect_error(r, "'if' block opened on line 2");
}

TEST(JinjaLimits, ApiArgumentChecks) {
  auto t = chat::ChatTemplate::parse("{{ messages|length }}");
  ASSERT_TRUE(t.ok());
  expect_error(t->render(ojson::object(), nullptr, false), "messages must be a JSON array");
  expect_error(t->render(ojson::array(), ojson("tools"), false), "tools must be a JSON array or null");
  expect_error(t->render(ojson::array(), nullptr, false, ojson::array()), "must be a JSON object");
  expect_error(t->render_vars(ojson::array()), "must be a JSON object");
  // HF's variables: tools/documents are defined (none), extra kwargs and special tokens arrive.
  auto t2 = chat::ChatTemplate::parse(
      "{{ tools is none }}{{ documents is none }}{{ add_generation_prompt }}{{ enable_thinking }}{{ bos_token }}");
  ASSERT_TRUE(t2.ok());
  t2->set_special_tokens(ojson{{"bos_token", "<s>"}});
  EXPECT_EQ(*t2->render(ojson::array(), nullptr, true, ojson{{"enable_thinking", false}}), "TrueTrueTrueFalse<s>");
}

TEST(JinjaLimits, MangledTemplatesNeverCrash) {
  const std::string base = test::slurp(test::fixture("chat/qwen3.5.jinja"));
  ASSERT_FALSE(base.empty());
  const ojson messages = ojson::parse(R"([
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nok", "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": {"c": "Paris", "n": [1, {"a": 2}]}}}]},
    {"role": "tool", "content": "21C"},
    {"role": "user", "content": [{"type": "text", "text": "and?"}, {"type": "image"}]}])");
  const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}])");
  const std::string alphabet = "{}%#-+()[]'\"|.~:=,!<>*/ \n\tabcdefghijklmnopqrstuvwxyz0123456789_";
  std::mt19937 rng(12345);
  chat::ChatTemplate::Limits l;
  l.max_steps = 200'000;
  int parsed = 0, rendered = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string s = base;
    int n_mut = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n_mut && !s.empty(); ++k) {
      size_t pos = rng() % s.size();
      switch (rng() % 5) {
        case 0: s.erase(pos, 1 + rng() % 8); break;
        case 1: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        case 2: s[pos] = alphabet[rng() % alphabet.size()]; break;
        case 3: s.resize(pos); break;
        case 4: {
          size_t len = std::min<size_t>(rng() % 200, s.size() - pos);
          s.insert(rng() % s.size(), s.substr(pos, len));
          break;
        }
      }
    }
    auto t = chat::ChatTemplate::parse(s);
    if (!t) {
      EXPECT_NE(t.error().message.find("line "), std::string::npos) << t.error().message;
      continue;
    }
    ++parsed;
    t->set_limits(l);
    auto r = t->render(messages, tools, true, ojson{{"enable_thinking", iter % 2 == 0}});
    if (r) ++rendered;
    else EXPECT_FALSE(r.error().message.empty());
  }
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rendered, 50);
}

TEST(JinjaLimits, ConcurrentRendersOfOneTemplate) {
  auto t = chat::ChatTemplate::parse(test::slurp(test::fixture("chat/qwen3.5.jinja")));
  ASSERT_TRUE(t.ok());
  auto golden = test::read_jsonl(test::fixture("chat/golden-qwen3.5.jsonl"));
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 5; ++rep)
        for (const auto& g : golden) {
          ojson extra = ojson::object();
          if (g.contains("enable_thinking")) extra["enable_thinking"] = g["enable_thinking"];
          auto r = t->render(g["messages"], g["tools"], g["add_generation_prompt"].get<bool>(), extra);
          bool ok = g.contains("error") ? (!r && r.error().message == g["error"]) : (r && *r == g["rendered"]);
          if (!ok) ++bad;
        }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}
