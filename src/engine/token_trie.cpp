#include "engine/token_trie.h"

namespace ds::engine {

std::unique_ptr<grammar::TokenTrie> make_token_trie(const TextCodec& codec) {
  const int32_t V = codec.n_vocab();
  std::vector<std::string> bytes(V);
  std::vector<bool> excluded(V, false);
  std::vector<int32_t> eog;
  for (int32_t t = 0; t < V; t++) {
    if (codec.is_eog(t)) eog.push_back(t);
    else if (codec.is_special(t) || codec.is_control(t)) excluded[t] = true;
    else bytes[t] = codec.token_bytes(t);
  }
  return std::make_unique<grammar::TokenTrie>(bytes, excluded, std::move(eog));
}

}  // namespace ds::engine
