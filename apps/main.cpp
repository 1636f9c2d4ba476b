// deltaserve: one binary, many subcommands (inspect, tokenize, logits, run, bench, synth, serve, ...).
#include <algorithm>
#include <cstdio>
#include <string>

#include "command.h"
#include "git_sha.h"
#include "core/log.h"

namespace ds::app {
std::vector<Command>& commands() {
  static std::vector<Command> all;
  return all;
}
void apply_omp_defaults(char** argv);  // omp_defaults.cpp
}  // namespace ds::app

int main(int argc, char** argv) {
  ds::app::apply_omp_defaults(argv);
  ds::log_init();
  CLI::App app{
      "deltaserve: a Qwen3.5 (Gated DeltaNet hybrid) inference engine and OpenAI-compatible server.\n"
      "Run 'deltaserve <command> --help' for the options of a command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "deltaserve 0.1.0 (commit " DS_GIT_SHA ")");
  auto& cmds = ds::app::commands();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  // CLI11 answers an unknown command ("deltaserve serv") with "A subcommand is required": name it instead,
  // with the commands there are.
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(cmds.begin(), cmds.end(), [&](const auto& c) { return c.name == argv[1]; })) {
    std::string names;
    for (const auto& c : cmds) names += (names.empty() ? "" : ", ") + c.name;
    std::fprintf(stderr,
                 "deltaserve: '%s' is not a command; the commands are %s.\nRun 'deltaserve --help' for what each "
                 "does.\n",
                 argv[1], names.c_str());
    return 2;
  }
  ds::app::RunFn to_run;
  for (auto& c : cmds) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    auto fn = c.setup(*sub);
    sub->callback([&to_run, fn] { to_run = fn; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return to_run ? to_run() : 1;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
