// The vocabulary trie of a TextCodec for constrained generation (grammar/token_mask.h): every token's
// bytes, with the special (added) tokens left out and the end-of-generation tokens as the ends.
#pragma once
#include <memory>

#include "engine/text_codec.h"
#include "grammar/token_mask.h"

namespace ds::engine {

std::unique_ptr<grammar::TokenTrie> make_token_trie(const TextCodec& codec);

}  // namespace ds::engine
