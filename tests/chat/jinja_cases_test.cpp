// The Jinja subset against the reference: jinja_cases.jsonl holds small templates (every construct,
// whitespace control, filters, tests, methods, macros, scoping, undefined values, error cases) with
// what Jinja2 3.1, set up as Hugging Face sets it up, rendered or raised for each
// (make_jinja_cases.py). Renderings must match byte for byte; where Jinja2 raised, deltaserve must
// return an error too, blaming the same template line, and raise_exception's message verbatim.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat_test_util.h"

using namespace ds;

TEST(JinjaCases, MatchJinja2Reference) {
  auto cases = test::read_jsonl(std::string(DS_CHAT_TEST_DIR) + "/jinja_cases.jsonl");
  ASSERT_GE(cases.size(), 150u);
  size_t n_render = 0, n_error = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name + ": " + c["template"].get<std::string>().substr(0, 300));
    auto t = chat::ChatTemplate::parse(c["template"].get<std::string>());
    Result<std::string> r = t.ok() ? t->render_vars(c["vars"]) : Result<std::string>(t.error());
    if (c.contains("expected")) {
      ++n_render;
      if (!r.ok()) {
        ADD_FAILURE() << r.error().message;
        continue;
      }
      EXPECT_EQ(*r, c["expected"].get<std::string>());
      continue;
    }
    ++n_error;
    const auto& e = c["error"];
    if (r.ok()) {
      ADD_FAILURE() << "Jinja2 raised " << e["type"].get<std::string>() << ": " << e["message"].get<std::string>()
                    << "; deltaserve rendered:\n" << *r;
      continue;
    }
    if (e["raised"].get<bool>()) {
      EXPECT_EQ(r.error().message, e["message"].get<std::string>());
    } else {
      EXPECT_EQ(r.error().message.rfind("chat template: ", 0), 0u) << r.error().message;
      if (e["line"].is_number()) {
        std::string want = "line " + std::to_string(e["line"].get<int>()) + ":";
        EXPECT_NE(r.error().message.find(want), std::string::npos)
            << "Jinja2 blamed " << want << " (" << e["message"].get<std::string>() << "), got: " << r.error().message;
      }
    }
  }
  EXPECT_GE(n_render, 100u);
  EXPECT_GE(n_error, 30u);
}
