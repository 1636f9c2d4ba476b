// An engine on the fake backend with the byte codec, started: the rig of the scheduler tests and of the
// constraint tests (tests/engine). Header-only: only the binaries that link ds_engine include it.
#pragma once
#include <gtest/gtest.h>

#include <memory>

#include "engine/byte_codec.h"
#include "engine/engine.h"
#include "engine/fake_backend.h"

namespace ds::test {

struct EngineRig {
  explicit EngineRig(engine::FakeBackendOptions o, engine::EngineConfig cfg = {})
      : fb(std::move(o)), eng(fb, codec, cfg) {
    eng.start();
  }
  engine::ByteCodec codec;
  engine::FakeBackend fb;
  engine::Engine eng;
  // The request's handle; a refusal fails the test (and gives nullptr).
  std::shared_ptr<engine::RequestHandle> submit(engine::GenerationRequest r) {
    auto s = eng.submit(std::move(r));
    EXPECT_EQ(s.status, engine::SubmitStatus::Ok) << s.message;
    return s.handle;
  }
};

}  // namespace ds::test
