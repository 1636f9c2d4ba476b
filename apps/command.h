// Subcommand registry: each apps/cmd_<name>.cpp registers itself with DS_COMMAND, so adding a
// subcommand never edits main.cpp. A command's setup() adds its options to its CLI11 subcommand and
// returns the function to run after parsing; that function returns the process exit code.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace ds::app {

using RunFn = std::function<int()>;
using SetupFn = std::function<RunFn(CLI::App&)>;

struct Command {
  std::string name;
  std::string help;
  SetupFn setup;
};

std::vector<Command>& commands();

struct Registrar {
  Registrar(std::string name, std::string help, SetupFn setup) {
    commands().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

}  // namespace ds::app

#define DS_COMMAND(name, help, setup_fn) \
  static ::ds::app::Registrar DS_CONCAT_CMD(_ds_cmd_, __LINE__)(name, help, setup_fn)
#define DS_CONCAT_CMD_INNER(a, b) a##b
#define DS_CONCAT_CMD(a, b) DS_CONCAT_CMD_INNER(a, b)
